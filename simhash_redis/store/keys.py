"""The names of every Redis key an index uses (docs/redis-keys.md); names hold no ':' nor glob characters."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt
import xxhash

from .. import defaults
from ..errors import InvalidArgument, InvalidType
from ..fingerprinting import engine_choice
from ..transport.greenlet_bridge import on_loop_stack
from .layout import Layout

if TYPE_CHECKING:
    from .config import IndexConfig
    from .verification import Verification

#: Table (t{i}:...) and band table (b{i}:...) keys, after the base.
_SET_KEY = re.compile(rb"t([0-9]+):")
_BAND_KEY = re.compile(rb"b([0-9]+):")
_PERIOD_KEY = re.compile(rb"w[0-9]+:")
_TYPES = {
    "table": b"set",
    "band": b"hash",
    "id": b"hash",
    "fp": b"hash",
    "counts": b"hash",
    "meta": b"hash",
    "lock": b"string",
    "reply": b"hash",
}

__all__ = ["BandColumns", "BandNumbers", "KeyForm", "KeySchema", "encode_id", "validate_name"]

# From this many sketches `band_columns` pays: its numpy passes cost some 70 us however few they are.
_COLUMNS_MIN = 32
_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)

_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


class KeyForm(NamedTuple):
    """How a number becomes a bucket's key: the prefix, then the number in hex of `hex_width` digits, or in
    decimal for 0."""

    prefix: bytes
    hex_width: int

    def key(self, value: int) -> bytes:
        if self.hex_width:
            return self.prefix + b"%0*x" % (self.hex_width, value)
        return self.prefix + b"%d" % value


def validate_name(value: object, argument: str) -> str:
    """Check an index name or key prefix (`argument` names it in errors).

    Raises:
        InvalidType: the value is not a str.
        InvalidArgument: not 1-100 letters, digits, '.', '_' and '-', or '-' alone or only dots.
    """
    if not isinstance(value, str):
        raise InvalidType(f"{argument} must be a str, got {type(value).__name__}")
    if not _NAME_RE.match(value):
        raise InvalidArgument(
            f"{argument} must be 1-100 characters of letters, digits, '.', '_' or '-', got {value!r}"
        )
    if value == "-" or not value.strip("."):
        raise InvalidArgument(f"{argument} may not be '-' (standard input) or only dots, got {value!r}")
    return value


def encode_id(doc_id: object) -> bytes:
    """A document id as the UTF-8 bytes stored in Redis, checked.

    Raises:
        InvalidType: the id is not a str.
        InvalidArgument: the id is empty, longer than MAX_ID_BYTES, or holds a lone surrogate.
    """
    if not isinstance(doc_id, str):
        raise InvalidType(f"id must be a str, got {type(doc_id).__name__}")
    try:
        raw = doc_id.encode()
    except UnicodeEncodeError:
        raise InvalidArgument(f"id {doc_id!r} is not valid Unicode (lone surrogate)") from None
    if not 1 <= len(raw) <= defaults.MAX_ID_BYTES:
        raise InvalidArgument(f"id must be 1..{defaults.MAX_ID_BYTES} UTF-8 bytes, got {len(raw)}")
    return raw


class BandColumns(NamedTuple):
    """A batch's band places, `per` a sketch: place i is (keys[i, :key_lengths[i]], fields[i])."""

    keys: npt.NDArray[np.uint8]
    key_lengths: npt.NDArray[np.intp]
    fields: npt.NDArray[np.uint8]
    per: int


class BandNumbers(NamedTuple):
    """The band places of a window of sketches: bucket numbers (a sketch per row, a band per column), each
    band's fields, and the fields as big-endian ints shaped as `numbers` (None past 8 bytes)."""

    numbers: npt.NDArray[np.uint64]
    fields: list[list[bytes]]
    values: npt.NDArray[np.uint64] | None


class KeySchema:
    """Builds the key names of one index (`window`: of one period, in an index with a retention window)."""

    def __init__(
        self,
        prefix: str,
        name: str,
        layout: Layout,
        id_buckets: int,
        window: int | None = None,
    ) -> None:
        self.prefix, self.name, self.window = prefix, name, window
        self._fp_mask = (1 << layout.f) - 1
        self.base = f"{prefix}:{name}" if window is None else f"{prefix}:{name}:w{window}"
        self.meta = self.meta_key(prefix, name)
        self.counts = f"{self.base}:counts".encode()
        self.pattern = f"{self.base}:*"
        self.id_buckets = id_buckets
        self._table_formats = [
            f"{self.base}:t{i}:%0{width}x".encode() for i, width in enumerate(layout.hex_widths)
        ]
        self._id_prefix = f"{self.base}:id:".encode()
        self._fp_prefix = f"{self.base}:fp:".encode()
        self._layout = layout
        self._lock_prefix, self._reply_prefix = _writer_prefixes(self.base)
        self._band_prefix = f"{self.base}:b".encode()
        self._band_prefixes: list[bytes] = []  # b"{base}:b{i}:" by band, made on first use
        self._base_len = len(self.base) + 1

    @classmethod
    def of(cls, prefix: str, name: str, config: IndexConfig) -> KeySchema:
        return cls(prefix, name, config.layout, config.id_buckets)

    @staticmethod
    def meta_key(prefix: str, name: str) -> bytes:
        return f"{prefix}:{name}:meta".encode()

    @staticmethod
    def before_meta(prefix: str, name: str) -> tuple[bytes, tuple[bytes, bytes]]:
        """An index's counts hash and the prefixes of a writer's own keys (not data), known without meta."""
        base = f"{prefix}:{name}"
        return f"{base}:counts".encode(), _writer_prefixes(base)

    def tables(self, fingerprint: int) -> list[bytes]:
        return self.table_builder()(fingerprint)

    def in_window(self, window: int) -> KeySchema:
        """The key names of one period (its start divided by the period's length)."""
        return KeySchema(self.prefix, self.name, self._layout, self.id_buckets, window)

    def periods_map_builder(self, windows: Sequence[int], kind: str) -> Callable[[bytes], list[bytes]]:
        in_periods = self.periods_key_builder(windows)
        bucket = self.fp_bucket if kind == "fp" else self.id_bucket
        return lambda raw: in_periods(bucket(raw))

    def periods_key_builder(self, windows: Sequence[int]) -> Callable[[bytes], list[bytes]]:
        prefixes = [f"{self.prefix}:{self.name}:w{window}:".encode() for window in windows]
        start = self._base_len
        return lambda key: [prefix + key[start:] for prefix in prefixes]

    def table_builder(self) -> Callable[[int], list[bytes]]:
        build = _TABLES.get(self)
        if build is None:
            build = _TABLES[self] = _compile_tables(self._table_formats, self._layout)
        return build

    def periods_builder(self, windows: Sequence[int]) -> Callable[[int], list[bytes]]:
        in_periods, tables = self.periods_key_builder(windows), self.table_builder()
        return lambda fp: [key for keys in zip(*map(in_periods, tables(fp)), strict=True) for key in keys]

    def table_form(self, table: int) -> KeyForm:
        width = self._layout.hex_widths[table]
        return KeyForm(self._table_formats[table][: -len(b"%%0%dx" % width)], width)

    @property
    def id_form(self) -> KeyForm:
        return KeyForm(self._id_prefix, 0)

    @property
    def fp_form(self) -> KeyForm:
        return KeyForm(self._fp_prefix, 0)

    def pattern_of(self, kind: str) -> str:
        """The SCAN pattern of the keys of a kind: "all", "id", "fp", "band" or "windows" (KeyError else)."""
        return (
            f"{self.base}:"
            + {"all": "*", "id": "id:*", "fp": "fp:*", "band": "b*:*", "windows": "w*:*"}[kind]
        )

    def kind_of(self, key: bytes, *, periods: bool = False) -> tuple[str, int] | None:
        """What a key of this index is: ("table" | "band", its number), or ("id" | "fp" | "counts" | "lock" |
        "reply" | "meta", 0); None for none of ours (`periods`: a period's key as the same outside)."""
        if key == self.meta:
            return "meta", 0
        tail = key[self._base_len :] if key.startswith(self.base.encode() + b":") else b""
        if periods and (period := _PERIOD_KEY.match(tail)):
            tail = tail[period.end() :]
        for kind, pattern in (("table", _SET_KEY), ("band", _BAND_KEY)):
            numbered = pattern.match(tail)
            if numbered:
                return kind, int(numbered.group(1))
        if tail == b"counts":
            return "counts", 0
        named = tail.partition(b":")[0]
        return (named.decode(), 0) if named in (b"id", b"fp", b"lock", b"reply") and b":" in tail else None

    def stored_type(self, key: bytes) -> bytes | None:
        kind = self.kind_of(key)
        return None if kind is None else _TYPES[kind[0]]

    def lock(self, table_key: bytes) -> bytes:
        return self._lock_prefix + table_key[self._base_len :]

    def id_lock(self, doc_id: bytes) -> bytes:
        return self._lock_prefix + b"id:" + doc_id

    def reply(self, nonce: bytes) -> bytes:
        return self._reply_prefix + nonce

    def id_bucket(self, doc_id: bytes) -> bytes:
        return self._id_prefix + b"%d" % (xxhash.xxh3_64_intdigest(doc_id) % self.id_buckets)

    def fp_bucket(self, stored_fp: bytes) -> bytes:
        """The fingerprint-map hash of a stored fingerprint (a value this library never writes: bucket 0)."""
        try:
            value = int(stored_fp) & self._fp_mask
        except ValueError:
            value = 0
        return self.fp_bucket_of(value)

    def fp_bucket_of(self, fingerprint: int) -> bytes:
        # By its low bits: a lookup reading its own bucket whole gets most near hits' ids in one trip.
        return self._fp_prefix + b"%d" % (fingerprint % self.id_buckets)

    @staticmethod
    def sketch_field(stored_fp: bytes) -> bytes:
        return b"s:" + stored_fp

    def bands(self, sketch: bytes, mode: Verification | None) -> list[bytes]:
        """The names of a sketch's band values (bucket key, b"#", the band's bytes), as of a table's set."""
        return [key + b"#" + field for key, field in self.band_places(sketch, mode)]

    def band_places(self, sketch: bytes, mode: Verification | None) -> list[tuple[bytes, bytes]]:
        if mode is None or not mode.bands or not sketch:
            return []
        count, width, buckets = mode.bands, mode.band_bytes, mode.band_buckets
        prefixes = self._band_prefixes_of(count)
        places = []
        for i in range(count):
            value = sketch[i * width : (i + 1) * width]
            places.append((prefixes[i] + b"%x" % (int.from_bytes(value, "big") % buckets), value))
        return places

    @on_loop_stack
    def band_columns(self, sketches: Sequence[bytes], mode: Verification | None) -> BandColumns | None:
        """`band_places` of many sketches as byte columns; None where `band_places` of each serves (no band
        tables, bands past 64 bits or more than 10, too few sketches)."""
        if mode is None or not mode.bands or len(sketches) < _COLUMNS_MIN:
            return None
        count, width, buckets = mode.bands, mode.band_bytes, mode.band_buckets
        span = count * width
        if width > 8 or count > 10 or any(len(s) < span for s in sketches):
            return None
        joined = np.frombuffer(b"".join([s[:span] for s in sketches]), dtype=np.uint8)
        fields = joined.reshape(len(sketches) * count, width)
        numbers = _big_endian(fields) % np.uint64(buckets)
        # The band's prefix (one width: bands 0-9), then the number in hex without leading zeros.
        prefix_bytes = np.frombuffer(b"".join(self._band_prefixes_of(count)[:count]), dtype=np.uint8)
        prefixes = prefix_bytes.reshape(count, -1)
        top = max(1, (buckets - 1).bit_length() + 3 >> 2)
        shown = np.ones(len(numbers), dtype=np.intp)
        for n in range(1, top):
            shown += numbers >> np.uint64(4 * n) != 0
        shifts = 4 * (shown[:, None] - 1 - np.arange(top))
        nibbles = (numbers[:, None] >> np.maximum(shifts, 0).astype(np.uint64)) & np.uint64(15)
        hexes = _HEX_DIGITS[nibbles.astype(np.intp)]
        keys = np.concatenate([np.tile(prefixes, (len(sketches), 1)), hexes], axis=1)
        return BandColumns(keys, prefixes.shape[1] + shown, fields, count)

    def band_form(self, band: int) -> KeyForm:
        return KeyForm(self._band_prefixes_of(band + 1)[band], 1)

    @on_loop_stack
    def band_numbers(self, sketches: Sequence[bytes], mode: Verification) -> BandNumbers:
        """The bucket number and field of each band of each sketch (an empty sketch: 0 and b"")."""
        count, width, buckets = mode.bands, mode.band_bytes, mode.band_buckets
        span = count * width
        whole = [s if len(s) >= span else b"\0" * span for s in sketches]
        fields = [[s[i * width : (i + 1) * width] for s in whole] for i in range(count)]
        if width <= 8:
            joined = np.frombuffer(b"".join([s[:span] for s in whole]), dtype=np.uint8)
            values = _big_endian(joined.reshape(len(whole), count, width))
            numbers: npt.NDArray[np.uint64] = values % np.uint64(buckets)
        else:
            values = None
            ints = [
                int.from_bytes(fields[i][n], "big") % buckets for n in range(len(whole)) for i in range(count)
            ]
            numbers = np.array(ints, dtype=np.uint64).reshape(len(whole), count)
        for n, s in enumerate(sketches):
            if len(s) < span:
                numbers[n] = 0
                for band in fields:
                    band[n] = b""
        return BandNumbers(numbers, fields, values)

    def _band_prefixes_of(self, count: int) -> list[bytes]:
        prefixes = self._band_prefixes
        while len(prefixes) < count:
            prefixes.append(b"%s%d:" % (self._band_prefix, len(prefixes)))
        return prefixes

    def bucket_numbers(self, raws: Sequence[bytes]) -> npt.NDArray[Any]:
        hashes = np.fromiter(map(xxhash.xxh3_64_intdigest, raws), dtype=np.uint64, count=len(raws))
        buckets: npt.NDArray[Any] = hashes % np.uint64(self.id_buckets)
        return buckets

    def native_bucket_numbers(self, column: tuple[bytes, bytes] | tuple[bytes, bool]) -> npt.NDArray[Any]:
        if engine_choice.native is None:
            raise RuntimeError("this form needs the compiled core")
        numbers = engine_choice.native.column_buckets(column, self.id_buckets)
        return np.frombuffer(numbers, dtype=np.uint64)

    @on_loop_stack
    def fp_bucket_numbers(self, fps: Sequence[int] | npt.NDArray[Any]) -> npt.NDArray[Any]:
        if isinstance(fps, np.ndarray) and fps.dtype != object:  # 128-bit ones stay Python ints
            numbers: npt.NDArray[Any] = fps.astype(np.uint64, copy=False) % np.uint64(self.id_buckets)
            return numbers
        buckets = self.id_buckets
        return np.fromiter((int(fp) % buckets for fp in fps), dtype=np.uint64, count=len(fps))


# Compiled on first use, kept outside the instance so it stays picklable.
_TABLES: weakref.WeakKeyDictionary[KeySchema, Callable[[int], list[bytes]]] = weakref.WeakKeyDictionary()


def _writer_prefixes(base: str) -> tuple[bytes, bytes]:
    return f"{base}:lock:".encode(), f"{base}:reply:".encode()


def _big_endian(digits: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    values = digits[..., 0].astype(np.uint64)
    for j in range(1, digits.shape[-1]):
        values = (values << np.uint64(8)) | digits[..., j]
    return values


def _compile_tables(formats: list[bytes], layout: Layout) -> Callable[[int], list[bytes]]:
    """One expression building every table key of a fingerprint (4x a loop's speed); its source holds only
    integers, the key formats passed in as variables."""
    names: dict[str, object] = {}
    parts = []
    for t, (fmt, plan) in enumerate(zip(formats, layout.plans, strict=True)):
        names[f"f{t}"] = fmt
        terms = [f"((fp >> {int(shift)} & {int(mask)}) << {int(position)})" for shift, mask, position in plan]
        parts.append(f"f{t} % ({' | '.join(terms)})")
    return eval(f"lambda fp: [{', '.join(parts)}]", names)  # type: ignore[no-any-return]
