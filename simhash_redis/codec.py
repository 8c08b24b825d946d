"""Every stored (docs/redis-keys.md), printed or dumped form of a fingerprint, and of the id lists and
sketches stored with them."""

from __future__ import annotations

import re

import numpy as np

from .checks import is_int
from .errors import InvalidArgument

__all__ = [
    "decode_fp",
    "decode_ids",
    "decode_sketches",
    "dump_fp",
    "encode_fp",
    "encode_ids",
    "encode_sketches",
    "format_fingerprint",
    "netstring",
    "pack_fps",
    "parse_fingerprint",
    "undump_fp",
    "unpack_fps",
    "unpack_fps_many",
]

_SIGN = 1 << 63
_WRAP = 1 << 64


def encode_fp(fingerprint: int, f: int) -> bytes:
    """The stored form of a validated fingerprint of width f (at 64 bits, the signed integer Redis stores)."""
    return b"%d" % (fingerprint - _WRAP if f == 64 and fingerprint >= _SIGN else fingerprint)


def decode_fp(raw: bytes | int, f: int) -> int:
    """The fingerprint of a stored value (bytes, or an int from a Lua script) written by `encode_fp`."""
    value = int(raw)
    return value + _WRAP if value < 0 and f == 64 else value


def pack_fps(stored: list[bytes], f: int) -> bytes:
    """Stored fingerprints (`encode_fp`'s) in a band table's packed form."""
    width = _packed_width(f)
    return b"".join(decode_fp(one, f).to_bytes(width, "little") for one in stored)


def unpack_fps(raw: bytes, f: int) -> list[bytes]:
    """The stored fingerprints (`encode_fp`'s) of a band table's packed value (else ValueError)."""
    width = _packed_width(f)
    if len(raw) % width:
        raise ValueError(f"a band value of {len(raw)} bytes is no list of {width}-byte fingerprints")
    return [encode_fp(int.from_bytes(raw[i : i + width], "little"), f) for i in range(0, len(raw), width)]


def unpack_fps_many(values: list[bytes | None], f: int) -> list[list[bytes]]:
    """`unpack_fps` of many band values (None: an absent one, no fingerprints), decoded in one pass."""
    width = _packed_width(f)
    if width != 8 or not any(values):
        return [unpack_fps(value, f) if value else [] for value in values]
    if any(value and len(value) % 8 for value in values):
        raise ValueError("a band value is no list of 8-byte fingerprints")
    # Little-endian unsigned, read as signed: the stored form of a fingerprint of 64 bits (or fewer).
    stored = [b"%d" % one for one in np.frombuffer(b"".join(v for v in values if v), dtype="<i8").tolist()]
    out, at = [], 0
    for value in values:
        count = len(value) // 8 if value else 0
        out.append(stored[at : at + count])
        at += count
    return out


def _packed_width(f: int) -> int:
    return 8 if f <= 64 else (f + 7) // 8


def encode_ids(ids: list[str]) -> bytes:
    """A list of document ids as concatenated netstrings."""
    return b"".join(netstring(doc_id.encode()) for doc_id in ids)


def decode_ids(raw: bytes) -> list[str]:
    """The ids in a value written by `encode_ids` (or by the Lua write script), else ValueError."""
    if raw.isascii():  # lengths in bytes are lengths in characters: split the text, not each id decoded
        return _ascii_netstrings(raw.decode("ascii"))
    return [item.decode() for item in _netstrings(raw)]


def encode_sketches(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """The sketches of (encoded id, sketch) pairs sharing a fingerprint: each sketch's netstring, then that
    of its ids' list."""
    groups: dict[bytes, list[bytes]] = {}
    for raw, sketch in pairs:
        groups.setdefault(sketch, []).append(raw)
    return b"".join(
        netstring(sketch) + netstring(b"".join(map(netstring, ids))) for sketch, ids in groups.items()
    )


def decode_sketches(raw: bytes) -> dict[str, bytes]:
    """The sketch of each id in a value written by `encode_sketches` (or by the Lua scripts), else
    ValueError."""
    items = _netstrings(raw)
    if len(items) % 2:
        raise ValueError("a sketch without its ids")
    return {
        doc_id.decode(): items[i] for i in range(0, len(items), 2) for doc_id in _netstrings(items[i + 1])
    }


def netstring(item: bytes) -> bytes:
    """An item (an encoded id, a sketch, a list) as a netstring."""
    return b"%d:%s" % (len(item), item)


def _netstrings(raw: bytes) -> list[bytes]:
    items = []
    pos, end = 0, len(raw)
    while pos < end:
        colon = raw.index(b":", pos)
        digits = raw[pos:colon]
        # A sign or a space could make a length that never advances; a leading zero one Lua would not find.
        if not digits.isdigit() or (digits[:1] == b"0" and len(digits) > 1):
            raise ValueError(f"malformed netstring length {digits[:20]!r}")
        length = int(digits)
        start = colon + 1
        if start + length > end:
            raise ValueError("truncated netstring list")
        items.append(raw[start : start + length])
        pos = start + length
    return items


def _ascii_netstrings(text: str) -> list[str]:
    """`_netstrings` of an ASCII value, decoded (one loop a page's thousands of copies go through)."""
    items: list[str] = []
    append, find = items.append, text.find
    pos, end = 0, len(text)
    while pos < end:
        colon = find(":", pos)
        digits = text[pos:colon]
        # As `_netstrings`: no sign, space or leading zero (ASCII: isdigit is 0-9 only).
        if colon < 0 or not digits.isdigit() or (digits[0] == "0" and colon - pos > 1):
            raise ValueError(f"malformed netstring length {digits[:20]!r}")
        start = colon + 1
        pos = start + int(digits)
        if pos > end:
            raise ValueError("truncated netstring list")
        append(text[start:pos])
    return items


_HEX = re.compile(r"^[0-9a-f]+$")
_DECIMAL = re.compile(r"^-?[0-9]+$")
_PLAIN_HEX = re.compile(r"(?:0[xX])?[0-9a-fA-F]+")


def parse_fingerprint(text: str, f: int, base: str = "auto") -> int:
    """Read a fingerprint in hex or decimal (``0x8ffffffffffffff1``, ``8ffffffffffffff1``, ``-42``: f-bit
    two's complement, as Java longs and Redis store them).

    Args:
        base: "auto", "hex" or "dec"; auto reads digits-only text as decimal.

    Raises:
        InvalidArgument: malformed, or out of range for f bits.
    """
    if base not in ("auto", "hex", "dec"):
        raise InvalidArgument(f"fp_base must be auto, hex or dec, got {base!r}")
    # The common case of a load: plain hex digits that fit (digits-only text is decimal in auto).
    if base != "dec" and _PLAIN_HEX.fullmatch(text) and (base == "hex" or not text.isdigit()):
        value = int(text, 16)
        if value >> f == 0:
            return value
    return _parse_any(text, f, base)


def _parse_any(text: str, f: int, base: str) -> int:
    raw = text.strip()
    lowered = raw.lower()
    digits = lowered.removeprefix("0x")
    is_hex = base == "hex" or lowered.startswith("0x") or (base == "auto" and not _DECIMAL.match(lowered))
    # int() alone would also take '_' separators, '+', and a sign after '0x'.
    if not (_HEX.match(digits) if is_hex else _DECIMAL.match(lowered)):
        raise InvalidArgument(f"{raw[:80]!r} is not a hex or decimal fingerprint")
    value = int(digits, 16) if is_hex else int(lowered, 10)
    if -(1 << (f - 1)) <= value < 0:
        value += 1 << f
    if not 0 <= value < 1 << f:
        raise InvalidArgument(f"fingerprint {raw[:80]!r} does not fit in {f} bits")
    return value


def format_fingerprint(value: int, f: int) -> str:
    """A fingerprint as 0x-prefixed zero-padded lower-case hex (digits alone would read as decimal)."""
    return f"0x{value:0{f // 4}x}"


def dump_fp(fingerprint: int, f: int) -> int | bytes:
    """A fingerprint as a dump record holds it (msgpack integers stop at 64 bits)."""
    return fingerprint if f <= 64 else fingerprint.to_bytes(f // 8, "big")


def undump_fp(value: object, f: int) -> int:
    """The fingerprint of a dump record's (decoded msgpack) value written by `dump_fp`, else ValueError."""
    if isinstance(value, bytes) and len(value) == f // 8:
        return int.from_bytes(value, "big")
    if is_int(value) and f <= 64:
        return value
    raise ValueError(f"not a {f}-bit fingerprint: {value!r}"[:120])
