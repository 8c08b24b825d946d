"""Choose a table layout for f, k and N stored fingerprints, rated by a query's cost (uniformly spread
fingerprints: N / 2^b per bucket of b-bit keys) and by Redis memory as measured (`TABLE_BYTES_64`)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numpy as np

from .. import defaults
from ..errors import InvalidArgument
from ..store.layout import Layout
from ..store.reads import reads_bucket_whole

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_KEY_BITS",
    "DEFAULT_MAX_TABLES",
    "LayoutPlan",
    "candidate_layouts",
    "distinct_candidate_probability",
    "estimate",
    "layout_named",
    "map_bytes_per_doc",
    "plan",
    "table_bytes_per_fp",
]

#: Candidates per query the recommended layout may read back: about 1.5 round trips of work
#: (docs/layouts.md), so a layout under it spends its time on round trips rather than on candidates.
DEFAULT_BUDGET = 256.0
#: Layouts with more tables than this are not listed: each table is another copy of every fingerprint.
DEFAULT_MAX_TABLES = 100
#: Permuted layouts are listed until their narrowest key exceeds this many bits (buckets of ~1 member).
DEFAULT_MAX_KEY_BITS = 40

# Measured Redis bytes per fingerprint per table, as (log2 load, bytes) points, load = N / 2^keybits, by
# `python benchmarks/bench_layouts.py --calibrate` (docs/layouts.md, "Measured memory constants").
# fmt: off
TABLE_BYTES_64: tuple[tuple[float, float], ...] = (
    (-20.068, 98.5), (-12.068, 98.9), (-8.068, 98.8), (-4.068, 105.2), (-2.068, 83.9),
    (-0.068, 62.9), (0.932, 44.8), (1.932, 30.1), (2.932, 19.2), (3.932, 12.6),
    (4.932, 10.3), (5.932, 9.2), (6.932, 8.6), (7.932, 8.3), (8.932, 12.8),
    (9.932, 51.1), (10.932, 51.6), (11.932, 51.9),
)
TABLE_BYTES_128: tuple[tuple[float, float], ...] = (
    (-20.068, 131.0), (-12.068, 130.9), (-8.068, 130.6), (-4.068, 137.1), (-2.068, 116.5),
    (-0.068, 97.1), (0.932, 79.1), (1.932, 63.5), (2.932, 52.2), (3.932, 45.5),
    (4.932, 43.1), (5.932, 41.9), (6.932, 51.1), (7.932, 80.9), (8.932, 82.5),
    (9.932, 83.4), (10.932, 83.7), (11.932, 83.7),
)
# Bytes per document of the id map plus the fingerprint map, as (log2 load, bytes) points, load = N /
# id_buckets (ids of 2-7 bytes), measured likewise.
MAP_BYTES: tuple[tuple[float, float], ...] = (
    (-0.068, 155.4), (1.932, 85.4), (2.932, 62.9), (4.932, 45.3), (5.932, 42.4),
    (6.932, 41.0), (7.932, 40.4), (9.932, 133.5),
)
# fmt: on


def _interpolate(points: tuple[tuple[float, float], ...], load: float) -> float:
    """Piecewise-linear in log2(load), constant beyond the measured range."""
    xs, ys = zip(*points, strict=True)
    return float(np.interp(math.log2(max(load, 2.0**-60)), xs, ys))


def table_bytes_per_fp(load: float, f: int = defaults.F) -> float:
    """Measured Redis bytes per fingerprint of f bits in a table of `load` (N / 2^keybits) per bucket."""
    return _interpolate(TABLE_BYTES_128 if f == 128 else TABLE_BYTES_64, load)


def map_bytes_per_doc(load: float) -> float:
    """Measured Redis bytes per document of the id and fingerprint maps, `load` (N / id_buckets) a bucket."""
    return _interpolate(MAP_BYTES, load)


def distinct_candidate_probability(layout: Layout) -> float:
    """The chance that a random fingerprint shares a table key with a query (times N: distinct candidates)."""
    p = [2.0**-w for w in layout.blocks]
    sizes = {len(t) for t in layout.tables}
    size = min(sizes)
    if len(sizes) == 1 and len(layout.tables) == math.comb(len(p), size):
        # Tables are all `size`-subsets of the blocks: a candidate agrees on at least `size` blocks.
        dist = [1.0] + [0.0] * len(p)
        for pj in p:
            dist = [dist[i] * (1 - pj) + (dist[i - 1] * pj if i else 0.0) for i in range(len(p) + 1)]
        return sum(dist[size:])
    table_sets = [frozenset(t) for t in layout.tables]
    total = 0.0
    for mask in range(1 << len(p)):
        agree = frozenset(j for j in range(len(p)) if mask >> j & 1)
        if any(t <= agree for t in table_sets):
            total += math.prod(p[j] if j in agree else 1 - p[j] for j in range(len(p)))
    return total


@dataclass(frozen=True)
class LayoutPlan:
    """One candidate layout ('pigeonhole' or 'permuted-<blocks>') rated for N stored fingerprints: the
    fingerprints a query reads back (summed over tables, and distinct), and the expected Redis memory."""

    label: str
    layout: Layout
    tables: int
    key_bits: tuple[int, ...]
    candidates: float
    distinct_candidates: float
    table_bytes: float
    map_bytes: float
    recommended: bool = False
    id_buckets: int = defaults.ID_BUCKETS

    @property
    def memory_bytes(self) -> float:
        """Expected Redis memory of the whole index."""
        return self.table_bytes + self.map_bytes

    @property
    def refused(self) -> bool:
        """Whether a new index of this layout is refused (`defaults.MAX_READ_FRACTION`): never recommended."""
        return self.layout.read_fraction >= defaults.MAX_READ_FRACTION

    @property
    def key_bits_text(self) -> str:
        """The key widths as 'lo-hi' or a single number."""
        lo, hi = min(self.key_bits), max(self.key_bits)
        return str(lo) if lo == hi else f"{lo}-{hi}"

    @property
    def commands(self) -> str:
        """The commands one `near` sends to a new index of this layout (docs/architecture.md, "The path of a
        `near`"), and what a retention window or the verified mode changes."""
        if reads_bucket_whole(self.id_buckets, self.key_bits):
            own = (
                "HGETALL of the query's own fingerprint-map bucket (an HGET of its fingerprint with a "
                "retention window or verified), then 1 HGET per matching fingerprint outside that bucket"
            )
        else:
            own = "HGET of the query's fingerprint in the fingerprint map, then 1 HGET per other matching "
            own += "fingerprint"
        return (
            f"{self.tables} SMEMBERS + {own}; verified adds 1 HGET per band to the first write and reads ids "
            "with sketches (HMGET) in place of those HGETs"
        )

    def to_dict(self) -> dict[str, object]:
        """The plan as JSON-ready values, with the layout in its meta form."""
        return {
            "label": self.label,
            "layout": self.layout.to_meta(),
            "blocks": list(self.layout.blocks),
            "tables": self.tables,
            "key_bits": list(self.key_bits),
            "candidates": self.candidates,
            "distinct_candidates": self.distinct_candidates,
            "table_bytes": round(self.table_bytes),
            "map_bytes": round(self.map_bytes),
            "memory_bytes": round(self.memory_bytes),
            "smembers_per_query": self.tables,
            "commands": self.commands,
            "round_trips_per_query": 2,
            "read_fraction": self.layout.read_fraction,
            "refused": self.refused,
            "recommended": self.recommended,
        }


def candidate_layouts(
    f: int, k: int, *, max_tables: int = DEFAULT_MAX_TABLES, max_key_bits: int = DEFAULT_MAX_KEY_BITS
) -> list[tuple[str, Layout]]:
    """(label, layout) pairs worth considering, fewest tables first: pigeonhole, then permuted with k+2, k+3,
    ... blocks, until the tables exceed `max_tables`, the narrowest key `max_key_bits`, or keys pass 64 bits
    (InvalidArgument for f or k out of range)."""
    out = [("pigeonhole", Layout.pigeonhole(f, k))]
    for blocks in itertools.count(k + 2):
        if blocks > f or math.comb(blocks, k) > max_tables:
            break
        try:
            layout = Layout.permuted(f, k, blocks)
        except InvalidArgument:
            break
        if min(layout.key_bits) > max_key_bits:
            break
        out.append((f"permuted-{blocks}", layout))
    return out


def layout_named(label: str, f: int, k: int) -> Layout:
    """The layout a `plan` row names: "pigeonhole" (k+1 tables) or "permuted-B" (B blocks);
    InvalidArgument for a label that names none for this f and k."""
    if label == "pigeonhole":
        return Layout.pigeonhole(f, k)
    prefix, _, blocks = label.partition("-")
    if prefix != "permuted" or not blocks.isascii() or not blocks.isdigit():
        raise InvalidArgument(f"layout must be 'pigeonhole' or 'permuted-B' (B blocks), got {label!r}")
    return Layout.permuted(f, k, int(blocks))


def estimate(label: str, layout: Layout, n: float, *, id_buckets: int = defaults.ID_BUCKETS) -> LayoutPlan:
    """Rate one layout, shown as `label`, for n stored fingerprints (one document each); not recommended
    (InvalidArgument for a negative n or id_buckets)."""
    if not n >= 0 or math.isinf(n):
        raise InvalidArgument(f"n must be a finite number >= 0, got {n!r}")
    if id_buckets < 1:
        raise InvalidArgument(f"id_buckets must be positive, got {id_buckets!r}")
    loads = [n / 2.0**bits for bits in layout.key_bits]
    tables = sum(n * table_bytes_per_fp(load, layout.f) for load in loads)
    return LayoutPlan(
        label=label,
        layout=layout,
        tables=len(layout.tables),
        key_bits=layout.key_bits,
        candidates=sum(loads),
        distinct_candidates=n * distinct_candidate_probability(layout),
        table_bytes=tables,
        map_bytes=n * map_bytes_per_doc(n / id_buckets),
        id_buckets=id_buckets,
    )


def plan(
    f: int,
    k: int,
    n: float,
    *,
    budget: float = DEFAULT_BUDGET,
    max_tables: int = DEFAULT_MAX_TABLES,
    max_key_bits: int = DEFAULT_MAX_KEY_BITS,
    id_buckets: int = defaults.ID_BUCKETS,
) -> list[LayoutPlan]:
    """Rate every `candidate_layouts` layout for n fingerprints, fewest tables first, and mark the one
    recommended: the fewest tables whose expected candidates per query stay within `budget` (ties: less
    memory), else the fewest candidates; never a `LayoutPlan.refused` one (none when all are).

    Raises:
        InvalidArgument: f, k, n, budget, max_tables or id_buckets is out of range.
    """
    if not budget > 0:
        raise InvalidArgument(f"budget must be positive, got {budget!r}")
    if max_tables < 1:
        raise InvalidArgument(f"max_tables must be at least 1, got {max_tables}")
    plans = [
        estimate(label, layout, n, id_buckets=id_buckets)
        for label, layout in candidate_layouts(f, k, max_tables=max_tables, max_key_bits=max_key_bits)
    ]
    usable = [p for p in plans if not p.refused]
    within = [p for p in usable if p.candidates <= budget]
    if within:
        best: LayoutPlan | None = min(within, key=lambda p: (p.tables, p.memory_bytes))
    else:
        best = min(usable, key=lambda p: (p.candidates, p.memory_bytes), default=None)
    return [dataclasses.replace(p, recommended=True) if p is best else p for p in plans]
