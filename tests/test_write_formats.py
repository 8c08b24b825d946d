"""The write script's compact format for a batch of adds stores what the general format stores."""

from __future__ import annotations

import redis

from simhash_redis import Outcome, SimhashIndex
from simhash_redis.codec import encode_fp
from simhash_redis.writes import AtomicWrites, Write


def _writes(index: SimhashIndex) -> AtomicWrites:
    writes = index._writes
    assert isinstance(writes, AtomicWrites)
    return writes


def _dump(client: redis.Redis) -> dict[bytes, object]:
    out: dict[bytes, object] = {}
    for key in client.keys("*"):
        kind = client.type(key)
        if kind == b"hash":
            out[key] = client.hgetall(key)
        elif kind == b"set":
            out[key] = client.smembers(key)
        else:
            out[key] = client.get(key)
    return out


def test_fresh_adds_and_general_batches_store_the_same_bytes(any_client: redis.Redis) -> None:
    # The first round's compact 'a' format (all adds) and the general format write the same data.
    ops: list[Write] = [
        (b"id%d" % i, encode_fp((i * 0x9E3779B97F4A7C15) % (1 << 64), 64), None) for i in range(30)
    ]
    ops.append((b"id3", encode_fp(5, 64), None))  # a later pair for the same id wins
    fresh = SimhashIndex(any_client, "fresh", k=3, id_buckets=4)
    assert _writes(fresh).apply(ops)[-1] == Outcome.REPLACED
    fresh_data = {key.replace(b":fresh:", b":x:"): value for key, value in _dump(any_client).items()}
    fresh.drop()
    general = SimhashIndex(any_client, "general", k=3, id_buckets=4)
    assert _writes(general).apply([*ops, (b"gone", b"", None)])[-1] == Outcome.MISSING
    assert {
        key.replace(b":general:", b":x:"): value for key, value in _dump(any_client).items()
    } == fresh_data
