"""Verified mode's configuration: the sketch, the threshold and the band tables, pinned in an index's meta."""

from __future__ import annotations

from dataclasses import dataclass

from .. import defaults
from ..checks import is_int
from ..errors import InvalidArgument, InvalidType
from ..fingerprinting import BandedOddSketcher, MinHasher
from ..fingerprinting.banded_odd import BAND_VALUES, Sketcher

__all__ = ["VERIFIED_BANDS", "VERIFIED_BAND_BUCKETS", "Verification"]

#: The LSH band tables of a new verified index: 8 bands of 4 values, shared by a pair at Jaccard 0.8
#: with probability 1 - (1 - 0.8^4)^8 = 0.986.
VERIFIED_BANDS = (8, 4)
#: The buckets of each band table: listpacks to ~2 M documents (docs/redis-keys.md).
VERIFIED_BAND_BUCKETS = 1 << 14


@dataclass(frozen=True)
class Verification:
    """Verified mode: near-duplicates confirmed by a stored sketch, pinned in an index's meta.

    Args:
        threshold: the estimated Jaccard similarity from which a candidate is a near-duplicate, in (0, 1].
        num_perm, bits, n, seed: the sketch's parameters (`MinHasher`; an odd sketch's band values are
            `BAND_VALUES` of 8 bits).
        bands, rows: `bands` LSH band tables, each keyed by `rows` consecutive values (0, 0: none).
        band_buckets: the hashes each band table is spread over.
        kind: "odd" (`BandedOddSketcher`) or "minhash" (`MinHasher`).

    Raises:
        InvalidArgument: a value is out of range.
        InvalidType: a value has the wrong type.
    """

    threshold: float = defaults.THRESHOLD
    num_perm: int = 256
    bits: int = 8
    n: int = 3
    seed: int = 0
    bands: int = 0
    rows: int = 0
    band_buckets: int = VERIFIED_BAND_BUCKETS
    kind: str = "minhash"

    def __post_init__(self) -> None:
        threshold = self.threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise InvalidType(f"threshold must be a number, got {type(threshold).__name__}")
        if not 0 < threshold <= 1:
            raise InvalidArgument(f"threshold must be in (0, 1], got {threshold!r}")
        object.__setattr__(self, "threshold", float(threshold))
        if self.kind not in ("minhash", "odd"):
            raise InvalidArgument(f"kind must be 'minhash' or 'odd', got {self.kind!r}")
        if self.kind == "odd" and (self.num_perm, self.bits) != (BAND_VALUES, 8):
            raise InvalidArgument(f"an odd sketch's band values are {BAND_VALUES} of 8 bits")
        self.hasher()  # checks the sketch's parameters
        for name, value in (("bands", self.bands), ("rows", self.rows), ("band_buckets", self.band_buckets)):
            if not is_int(value):
                raise InvalidType(f"{name} must be an int, got {type(value).__name__}")
        if (self.bands == 0) != (self.rows == 0) or self.bands < 0 or self.rows < 0:
            raise InvalidArgument(
                f"bands and rows must both be positive, or both 0, got {self.bands}x{self.rows}"
            )
        if not 1 <= self.band_buckets <= 1 << 24:
            raise InvalidArgument(f"band_buckets must be in [1, 2**24], got {self.band_buckets}")
        if self.bands * self.rows > self.num_perm:
            raise InvalidArgument(
                f"{self.bands} bands of {self.rows} values need {self.bands * self.rows} sketch values; "
                f"the sketch has {self.num_perm}"
            )

    @classmethod
    def of(
        cls,
        hasher: Sketcher | None = None,
        threshold: float = defaults.THRESHOLD,
        bands: tuple[int, int] | None = None,
        band_buckets: int | None = None,
    ) -> Verification:
        """The verified mode of a hasher (default `BandedOddSketcher()`), a threshold and (bands, rows)
        (default `VERIFIED_BANDS` where the sketch has the values)."""
        if hasher is not None and not isinstance(hasher, (MinHasher, BandedOddSketcher)):
            raise InvalidType(f"hasher must be a MinHasher or BandedOddSketcher, got {type(hasher).__name__}")
        if bands is not None and (not isinstance(bands, tuple) or len(bands) != 2):
            raise InvalidType(f"bands must be a (bands, rows) tuple, got {bands!r}")
        h = hasher or BandedOddSketcher()
        kind, perm, bits = (
            ("minhash", h.num_perm, h.bits) if isinstance(h, MinHasher) else ("odd", BAND_VALUES, 8)
        )
        if bands is None:
            bands = VERIFIED_BANDS if perm >= VERIFIED_BANDS[0] * VERIFIED_BANDS[1] else (0, 0)
        count, rows = bands
        buckets = VERIFIED_BAND_BUCKETS if band_buckets is None else band_buckets
        return cls(threshold, perm, bits, h.n, h.seed, count, rows, buckets, kind)

    @property
    def sketch_bytes(self) -> int:
        # No hasher made for it: verify reads it per sketch.
        return BandedOddSketcher.sketch_bytes if self.kind == "odd" else self.num_perm * self.bits // 8

    @property
    def band_bytes(self) -> int:
        return self.rows * self.bits // 8

    def hasher(self) -> Sketcher:
        if self.kind == "odd":
            return BandedOddSketcher(self.n, self.seed)
        return MinHasher(self.num_perm, self.bits, self.n, self.seed)

    def to_meta(self) -> str:
        """The meta field, e.g. "odd;bits=1008;n=3;seed=0;threshold=0.8;bands=8x4;band_buckets=16384"."""
        text = f"{self.hasher().describe()};threshold={self.threshold!r}"
        if self.bands:
            text += f";bands={self.bands}x{self.rows};band_buckets={self.band_buckets}"
        return text

    def describe(self) -> str:
        """The mode for people, e.g. "Jaccard threshold 0.8 (odd sketches of 1,008 bits, ...)"."""
        bands = f", {self.bands} LSH band tables of {self.rows}" if self.bands else ""
        sketch = (
            "odd sketches of 1,008 bits"
            if self.kind == "odd"
            else f"MinHash sketches of {self.num_perm:,} values"
        )
        return f"Jaccard threshold {self.threshold:g} ({sketch}{bands})"

    @classmethod
    def from_meta(cls, text: str) -> Verification:
        kind, *fields = text.split(";")
        values = dict(field.split("=", 1) for field in fields)
        given = set(values) - {"bands", "band_buckets"}
        known = {
            "minhash": {"perm", "bits", "n", "seed", "threshold"},
            "odd": {"bits", "n", "seed", "threshold"},
        }
        if given != known.get(kind):
            raise ValueError(f"unknown verified mode {text!r}")
        count, _, rows = values.get("bands", "0x0").partition("x")
        perm, bits = (int(values["perm"]), int(values["bits"])) if kind == "minhash" else (BAND_VALUES, 8)
        made = cls(
            float(values["threshold"]),
            perm,
            bits,
            int(values["n"]),
            int(values["seed"]),
            int(count),
            int(rows),
            int(values.get("band_buckets", VERIFIED_BAND_BUCKETS)),
            kind,
        )
        if made.to_meta() != text:
            raise ValueError(f"verified mode {text!r} is not in its canonical form")
        return made
