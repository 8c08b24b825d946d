"""Which bits of a fingerprint form each table's key: the block-table layouts of Manku et al. (WWW 2007)."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from functools import cached_property

from ..checks import is_int
from ..defaults import SUPPORTED_F
from ..errors import IndexCorrupted, InvalidArgument

__all__ = ["Layout"]

# "blocks=16,16,16,16;tables=0/1/2/3": tables '/'-separated, each a '+'-joined list of blocks.
_META_RE = re.compile(r"^blocks=(\d+(?:,\d+)*);tables=(\d+(?:\+\d+)*(?:/\d+(?:\+\d+)*)*)$")


def _split_bits(f: int, parts: int) -> tuple[int, ...]:
    base, extra = divmod(f, parts)
    return tuple(base + 1 if i < extra else base for i in range(parts))


@dataclass(frozen=True)
class Layout:
    """The block partition of an f-bit fingerprint and the tables built from it.

    Block 0 holds the most significant bits; table t's key is its blocks' bits, in `tables[t]`'s order.
    A layout must be exact for distance <= k: every choice of k blocks leaves a table outside it.

    Args:
        f: fingerprint width in bits.
        k: the largest distance the layout guarantees to find.
        blocks: block widths in bits, most significant first; they sum to f.
        tables: for each table, the block numbers that form its key.

    Raises:
        InvalidArgument: the blocks do not sum to f, a table names an unknown block, or the tables do
            not guarantee exact results for distance <= k.
    """

    f: int
    k: int
    blocks: tuple[int, ...]
    tables: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if self.f not in SUPPORTED_F:
            raise InvalidArgument(f"f must be one of {SUPPORTED_F}, got {self.f!r}")
        if not 0 <= self.k < len(self.blocks) or self.k >= self.f:
            raise InvalidArgument(
                f"k must be in 0..{len(self.blocks) - 1} for {len(self.blocks)} blocks, got {self.k!r}"
            )
        if any(b <= 0 for b in self.blocks) or sum(self.blocks) != self.f:
            raise InvalidArgument(
                f"blocks must be positive widths summing to f={self.f}, got {self.blocks!r}"
            )
        if not self.tables or any(not t for t in self.tables):
            raise InvalidArgument("tables must be a non-empty list of non-empty block lists")
        for table in self.tables:
            if len(set(table)) != len(table) or any(not 0 <= b < len(self.blocks) for b in table):
                raise InvalidArgument(
                    f"table {table!r} must name distinct blocks in 0..{len(self.blocks) - 1}"
                )
            if sum(self.blocks[b] for b in table) > 64:
                raise InvalidArgument(f"table {table!r} has a key wider than 64 bits")
        table_sets = [frozenset(t) for t in self.tables]
        for differing in itertools.combinations(range(len(self.blocks)), self.k):
            bad = frozenset(differing)
            if not any(t.isdisjoint(bad) for t in table_sets):
                raise InvalidArgument(
                    f"layout is not exact for k={self.k}: blocks {sorted(bad)} may all differ and every "
                    "table uses one of them"
                )

    @classmethod
    def pigeonhole(cls, f: int, k: int) -> Layout:
        """The default layout: k+1 blocks, one table per block (InvalidArgument: k out of range for f)."""
        if not is_int(k) or not 0 <= k < min(f, 64):
            raise InvalidArgument(f"k must be an int in 0..{min(f, 64) - 1}, got {k!r}")
        blocks = _split_bits(f, k + 1)
        return cls(f=f, k=k, blocks=blocks, tables=tuple((i,) for i in range(k + 1)))

    @classmethod
    def permuted(cls, f: int, k: int, blocks: int) -> Layout:
        """Manku's permuted tables: `blocks` blocks, one table per choice of blocks-k of them.

        Args:
            blocks: number of blocks, greater than k; gives C(blocks, k) tables.

        Raises:
            InvalidArgument: blocks <= k, or the keys would be wider than 64 bits.
        """
        if not is_int(blocks) or not k < blocks <= f:
            raise InvalidArgument(f"blocks must be an int in {k + 1}..{f} for k={k}, got {blocks!r}")
        widths = _split_bits(f, blocks)
        tables = tuple(itertools.combinations(range(blocks), blocks - k))
        return cls(f=f, k=k, blocks=widths, tables=tables)

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        return tuple(self.f - end for end in itertools.accumulate(self.blocks))

    @cached_property
    def key_bits(self) -> tuple[int, ...]:
        return tuple(sum(self.blocks[b] for b in t) for t in self.tables)

    @property
    def read_fraction(self) -> float:
        """The share of (uniformly spread) stored fingerprints a query reads; from 1, a scan is cheaper."""
        return sum(2.0**-bits for bits in self.key_bits)

    @cached_property
    def plans(self) -> tuple[tuple[tuple[int, int, int], ...], ...]:
        plans = []
        for table in self.tables:
            plan = []
            position = sum(self.blocks[b] for b in table)
            for b in table:
                position -= self.blocks[b]
                plan.append((self.offsets[b], (1 << self.blocks[b]) - 1, position))
            plans.append(tuple(plan))
        return tuple(plans)

    def keys_of(self, fingerprint: int) -> list[int]:
        out = []
        for plan in self.plans:
            if len(plan) == 1:  # one block per table (the default layout): no loop
                shift, mask, _ = plan[0]
                out.append((fingerprint >> shift) & mask)
                continue
            value = 0
            for shift, mask, position in plan:
                value |= ((fingerprint >> shift) & mask) << position
            out.append(value)
        return out

    @property
    def hex_widths(self) -> tuple[int, ...]:
        return tuple(math.ceil(bits / 4) for bits in self.key_bits)

    def to_meta(self) -> str:
        blocks = ",".join(str(b) for b in self.blocks)
        tables = "/".join("+".join(str(b) for b in t) for t in self.tables)
        return f"blocks={blocks};tables={tables}"

    @classmethod
    def from_meta(cls, text: str, f: int, k: int) -> Layout:
        """Parse a layout string written by `to_meta` (IndexCorrupted for any other)."""
        match = _META_RE.match(text)
        if not match:
            raise IndexCorrupted(f"malformed layout in index meta: {text!r}")
        blocks = tuple(int(b) for b in match.group(1).split(","))
        tables = tuple(tuple(int(b) for b in t.split("+")) for t in match.group(2).split("/"))
        try:
            return cls(f=f, k=k, blocks=blocks, tables=tables)
        except InvalidArgument as exc:
            raise IndexCorrupted(f"invalid layout in index meta: {exc}") from None

    def describe(self) -> str:
        """For people, e.g. '4 tables of 16-bit keys (blocks 16,16,16,16)'."""
        bits = sorted(set(self.key_bits))
        key = "/".join(str(b) for b in bits)
        return f"{len(self.tables)} tables of {key}-bit keys (blocks {','.join(map(str, self.blocks))})"
