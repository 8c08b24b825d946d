"""What the bulk-load tests share: deterministic loads, the logical content of an index, and the checks
that nothing half-written is visible to near()."""

from __future__ import annotations

import random
from typing import Any

from simhash_redis import SimhashIndex
from simhash_redis.codec import decode_ids

#: What an interrupted bulk load may leave, all invisible to near(): ids committed in the id map whose
#: fingerprint-map entry is not written yet, table members without ids. Never counts that differ from
#: the data: each step's script moves them with what it adds.
INVISIBLE = {"id missing from fingerprint map", "orphan table member"}

Content = dict[bytes, tuple[str, Any]]


def load(
    total: int, *, seed: int = 7, f: int = 64, shared: int = 9, twice: int = 13, prefix: str = "d"
) -> list[tuple[str, int]]:
    """`total` pairs with random f-bit fingerprints: every `shared`-th shares the fingerprint of the one
    before it, and every `twice`-th names again an id named earlier (with a new fingerprint)."""
    rng = random.Random(seed)
    items: list[tuple[str, int]] = []
    for i in range(total):
        fp = rng.getrandbits(f)
        if shared and i % shared == shared - 1 and items:
            fp = items[-1][1]
        doc_id = f"{prefix}{i}"
        if twice and i % twice == twice - 1 and i > 0:
            doc_id = items[rng.randrange(len(items))][0]
        items.append((doc_id, fp))
    return items


def content(index: SimhashIndex) -> Content:
    """The index's logical content: every key (without the index's prefix) with its type and value;
    hashes as dicts, the fingerprint map's id lists as sorted tuples (their order depends on the order
    the ids arrived in), sets as sets; the write calls' reply records left out (named by each call)."""
    store = index.store
    keys = sorted(
        {key for batch in store.scan("all") for key in batch if index.keys.kind_of(key) != ("reply", 0)}
    )
    kinds = [
        k.decode() if isinstance(k, bytes) else str(k) for k in store.execute([(b"TYPE", k) for k in keys])
    ]
    reads = [
        (b"HGETALL" if kind == "hash" else b"SMEMBERS", key) for key, kind in zip(keys, kinds, strict=True)
    ]
    values = store.execute(reads)
    base = f"{index.prefix}:{index.name}:".encode()
    out: Content = {}
    for key, kind, value in zip(keys, kinds, values, strict=True):
        name = key[len(base) :]
        if kind == "hash":
            pairs = value.items() if isinstance(value, dict) else zip(value[::2], value[1::2], strict=True)
            entries = dict(pairs)
            if name.startswith(b"fp:"):
                out[name] = (kind, {fp: tuple(sorted(decode_ids(raw))) for fp, raw in entries.items()})
            else:
                out[name] = (kind, entries)
        else:
            out[name] = (kind, set(value))
    return out


def assert_same(expected: Content, got: Content) -> None:
    """Two contents are equal, with a readable difference when not."""
    missing = sorted(set(expected) - set(got))[:10]
    extra = sorted(set(got) - set(expected))[:10]
    assert not missing and not extra, (missing, extra)
    differing = [key for key in expected if expected[key] != got[key]][:10]
    assert not differing, [(key, expected[key], got[key]) for key in differing[:3]]


def assert_nothing_half_visible(index: SimhashIndex) -> dict[str, int]:
    """verify() finds only what an interrupted bulk load may leave, all of it invisible to near();
    returns what it found."""
    report = index.verify()
    assert set(report.problems) <= INVISIBLE, report.as_dict()
    return dict(report.problems)


def final_state(items: list[tuple[str, int]], before: dict[str, int] | None = None) -> dict[str, int]:
    """Each id's fingerprint after the pairs are applied in order (a later pair for an id wins)."""
    state = dict(before or {})
    state.update(items)
    return state


def assert_model(index: SimhashIndex, state: dict[str, int]) -> None:
    """The index holds exactly `state` (checked through get_many, near and count)."""
    ids = sorted(state)
    assert dict(zip(ids, index.get_many(ids), strict=True)) == state
    assert index.count() == (len(state), len(set(state.values())))
    sample = ids[:: max(1, len(ids) // 50)]
    found = index.near_many([state[i] for i in sample], k=0)
    for doc_id, matches in zip(sample, found, strict=True):
        assert doc_id in {m.id for m in matches}, doc_id
