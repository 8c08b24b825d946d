"""Indexes with different names (or prefixes) never read or delete each other's keys.

Names that are prefixes of one another, or differ only in '.', '-' or '_', share a server: each index's
reads, counts, verify() and drop() see only its own keys, and dropping one leaves every other key on the
server byte for byte as it was — including foreign keys that merely look alike.
"""

from __future__ import annotations

import redis

from simhash_redis import SimhashIndex
from tests.test_lost_replies import snapshot

A = 0x0123456789ABCDEF
NAMES = ["a", "a-b", "a.b", "a_b", "ab", "A", "a-", "b"]
#: Keys of nobody's index that a sloppy pattern (``simhash:a*``, ``simhash:a?b:*``) would catch. (A key
#: ``simhash:a:anything`` is inside index a's documented namespace: drop("a") deletes it by design.)
FOREIGN = [
    b"simhash:a",
    b"simhash:ab",
    b"simhash:a-b",
    b"simhash:abc:meta",
    b"simhashx:a:meta",
]


def fill(client: redis.Redis) -> dict[str, SimhashIndex]:
    """Every index gets the same ids, with fingerprints of its own (and one shared fingerprint)."""
    indexes = {}
    for n, name in enumerate(NAMES):
        index = SimhashIndex(client, name, k=3, id_buckets=16)
        index.add_many([("same-id", A), (f"own-{n}", A ^ (0b111 << (3 * n))), ("shared-fp", A ^ (1 << 63))])
        indexes[name] = index
    other_prefix = SimhashIndex(client, "a", prefix="simhash.x", k=3, id_buckets=16)
    other_prefix.add("same-id", A)
    indexes["prefix:simhash.x"] = other_prefix
    return indexes


def test_reads_and_counts_see_only_their_own_index(redis_client: redis.Redis) -> None:
    for key in FOREIGN:
        redis_client.set(key, b"not an index key")
    indexes = fill(redis_client)
    for n, name in enumerate(NAMES):
        index = indexes[name]
        ids = sorted(m.id for m in index.near(A))
        assert ids == [f"own-{n}", "same-id", "shared-fp"], (name, ids)
        assert index.get(f"own-{n}") == A ^ (0b111 << (3 * n))
        assert all(index.get(f"own-{m}") is None for m in range(len(NAMES)) if m != n)
        assert index.count() == (3, 3), name
        report = index.verify()
        assert report.ok and report.docs == 3, (name, report.as_dict())
    assert indexes["prefix:simhash.x"].count() == (1, 1)


def test_drop_deletes_its_own_keys_and_nothing_else(redis_client: redis.Redis) -> None:
    for key in FOREIGN:
        redis_client.set(key, b"not an index key")
    indexes = fill(redis_client)
    for victim in ["a", "a-b", "A", "prefix:simhash.x"]:
        index = indexes.pop(victim)
        own = snapshot(redis_client, f"{index.keys.base}:*")
        everything = snapshot(redis_client, "*")
        assert own, victim
        records = list(redis_client.scan_iter(match=f"{index.keys.base}:reply:*"))  # the writes' replies
        assert index.drop() == len(own) + len(records)
        after = snapshot(redis_client, "*")
        assert after == {k: v for k, v in everything.items() if k not in own}, victim
        assert index.count() == (0, 0)
        for name, other in indexes.items():
            assert other.count() == ((3, 3) if name != "prefix:simhash.x" else (1, 1)), (victim, name)
            assert other.verify().ok
    for key in FOREIGN:
        assert redis_client.get(key) == b"not an index key"


def test_repairing_one_index_leaves_the_others_alone(redis_client: redis.Redis) -> None:
    indexes = fill(redis_client)
    before = snapshot(redis_client, "*")
    damaged = indexes["a"]
    redis_client.hincrby(damaged.keys.counts, "docs", 7)
    assert not damaged.verify(repair=True).ok
    after = snapshot(redis_client, "*")
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed <= {damaged.keys.counts}, changed
    assert damaged.verify().ok
