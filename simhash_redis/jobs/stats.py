"""What an index holds and costs: documents, bucket sizes, the largest buckets, and memory (MEMORY USAGE of a
sample of keys of each kind, extrapolated); read with SCAN, every key once: safe on a live server."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..index import SimhashIndex, VerifiedIndex
from ..store import Store

__all__ = ["Bucket", "IndexStats", "MemoryEstimate", "PeriodStats", "TableStats", "collect"]


@dataclass(frozen=True)
class Bucket:
    """One table bucket: the table number, its key value (hex, as in the key name) and its size."""

    table: int
    key: str
    size: int


@dataclass(frozen=True)
class TableStats:
    """One table: how many buckets (keys) it has, and their largest and mean size."""

    table: int
    keys: int
    largest: int
    mean: float


@dataclass(frozen=True)
class PeriodStats:
    """One period of an index with a retention window: when it began, when its keys expire (UTC, ISO
    8601), and the documents and distinct fingerprints written into it that are still there."""

    start: str
    expires: str
    documents: int
    fingerprints: int


@dataclass(frozen=True)
class MemoryEstimate:
    """Redis memory used by the index's keys: the estimate in bytes, the keys measured with MEMORY USAGE
    of all the index's keys, and whether every key was measured."""

    bytes: int
    sampled_keys: int
    total_keys: int
    exact: bool


@dataclass(frozen=True)
class IndexStats:
    """Everything `collect` reports.

    Attributes:
        bucket_sizes: how many table buckets have a size in each range ("1", "2-3", "4-7", ...).
        largest: the largest buckets; a lookup reads one bucket per table, so these make it slow.
        id_map_keys, fp_map_keys: id-map and fingerprint-map hashes in use.
        server_used_memory: the whole server's used_memory (all data, not only this index).
        config: the index's meta fields (f, k, layout, scheme, ...).
        periods: each live period of an index with a retention window, oldest first.
    """

    name: str
    documents: int
    fingerprints: int
    tables: list[TableStats]
    bucket_sizes: dict[str, int]
    largest: list[Bucket]
    id_map_keys: int
    fp_map_keys: int
    memory: MemoryEstimate
    server_used_memory: int | None
    config: dict[str, str] = field(default_factory=dict)
    periods: list[PeriodStats] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


class _Reservoir:
    """A uniform random sample of at most `size` keys of one kind, and how many were seen."""

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size, self.rng, self.seen = size, rng, 0
        self.keys: list[bytes] = []

    def offer(self, key: bytes) -> None:
        self.seen += 1
        if len(self.keys) < self.size:
            self.keys.append(key)
        elif (j := self.rng.randrange(self.seen)) < self.size:
            self.keys[j] = key


def collect(index: SimhashIndex | VerifiedIndex, *, sample: int = 2000, top: int = 10) -> IndexStats:
    """Gather an index's statistics from Redis.

    Args:
        sample: keys of each kind (table buckets, id map, fingerprint map) measured for memory.
        top: how many of the largest buckets to list.

    Raises:
        RedisUnavailable: the server cannot be reached.
    """
    index = index.index if isinstance(index, VerifiedIndex) else index
    sample = max(1, sample)
    store = index.store
    rng = random.Random(0)
    kinds = {kind: _Reservoir(sample, rng) for kind in ("tables", "id", "fp", "other")}
    n_tables = len(index.layout.tables)
    sizes: list[list[int]] = [[] for _ in range(n_tables)]
    largest: list[Bucket] = []
    histogram: Counter[int] = Counter()
    for keys in store.scan("all"):
        table_keys: list[tuple[int, bytes]] = []
        for key in keys:
            kind, number = index.keys.kind_of(key, periods=index.windows is not None) or ("other", 0)
            if kind == "table":
                table_keys.append((number, key))
                kind = "tables"
            kinds[kind if kind in kinds else "other"].offer(key)
        cards = store.execute([(b"SCARD", key) for _, key in table_keys])
        for (table, key), card in zip(table_keys, cards, strict=True):
            size = int(card)
            if size == 0:
                continue
            sizes[table].append(size)
            histogram[1 << (size.bit_length() - 1)] += 1
            largest.append(Bucket(table, key.rpartition(b":")[2].decode(), size))
            if len(largest) > 4 * top:  # keep the list short while scanning millions of buckets
                largest.sort(key=lambda b: (-b.size, b.table, b.key))
                del largest[top:]
    largest.sort(key=lambda b: (-b.size, b.table, b.key))
    docs, fps = index.count()
    return IndexStats(
        name=index.name,
        documents=docs,
        fingerprints=fps,
        tables=[
            TableStats(i, len(s), max(s, default=0), round(sum(s) / len(s), 3) if s else 0.0)
            for i, s in enumerate(sizes)
        ],
        bucket_sizes={(str(b) if b == 1 else f"{b}-{2 * b - 1}"): histogram[b] for b in sorted(histogram)},
        largest=largest[:top],
        id_map_keys=kinds["id"].seen,
        fp_map_keys=kinds["fp"].seen,
        memory=_memory(store, list(kinds.values())),
        server_used_memory=store.used_memory(),
        config=index.config.to_meta(),
        periods=_periods(index),
    )


def _periods(index: SimhashIndex) -> list[PeriodStats]:
    """Each live period holding documents, oldest first (none for an index without a window)."""
    windows = index.windows
    if windows is None:
        return []

    def moment(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="seconds")

    return [
        PeriodStats(moment(w * windows.period_ms), moment(windows.expires_at(w)), docs, fps)
        for w, docs, fps in windows.counts(sketched=index.config.verification is not None)
        if docs or fps
    ]


def _memory(store: Store, kinds: list[_Reservoir]) -> MemoryEstimate:
    total = 0.0
    for kind in (kind for kind in kinds if kind.keys):
        replies = store.execute([(b"MEMORY", b"USAGE", key, b"SAMPLES", 0) for key in kind.keys])
        if usages := [int(u) for u in replies if u is not None]:
            total += sum(usages) / len(usages) * kind.seen
    sampled, seen = sum(len(kind.keys) for kind in kinds), sum(kind.seen for kind in kinds)
    return MemoryEstimate(bytes=round(total), sampled_keys=sampled, total_keys=seen, exact=sampled == seen)
