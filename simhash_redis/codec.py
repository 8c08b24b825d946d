"""How fingerprints and id lists are written in Redis values.

Fingerprints of up to 64 bits are stored as signed 64-bit decimal integers (two's complement), so Redis
keeps small sets in its compact intset encoding and hash fields in listpack integer form; 128-bit
fingerprints are stored as unsigned decimals. The ids that share one fingerprint are a concatenation of
netstrings (`5:doc-1` followed by `5:doc-2`), readable with redis-cli and parsable from Lua.
"""

from __future__ import annotations

__all__ = ["decode_fp", "decode_ids", "encode_fp", "encode_ids"]

_SIGN = 1 << 63
_WRAP = 1 << 64


def encode_fp(fingerprint: int, f: int) -> bytes:
    """The stored form of a fingerprint.

    Args:
        fingerprint: an int in [0, 2**f), already validated.
        f: the index's fingerprint width.
    """
    if f == 64 and fingerprint >= _SIGN:
        return b"%d" % (fingerprint - _WRAP)
    return b"%d" % fingerprint


def decode_fp(raw: bytes | int, f: int) -> int:
    """The fingerprint for a stored value written by `encode_fp`.

    Args:
        raw: a Redis reply (bytes, or an int from a Lua script).
        f: the index's fingerprint width.
    """
    value = int(raw)
    return value + _WRAP if value < 0 and f == 64 else value


def encode_ids(ids: list[str]) -> bytes:
    """A list of document ids as concatenated netstrings.

    Args:
        ids: the ids, in order.
    """
    out = bytearray()
    for doc_id in ids:
        raw = doc_id.encode()
        out += b"%d:" % len(raw)
        out += raw
    return bytes(out)


def decode_ids(raw: bytes) -> list[str]:
    """The ids in a value written by `encode_ids` (or by the Lua write script).

    Args:
        raw: the stored value.

    Raises:
        ValueError: the value is not a sequence of netstrings.
    """
    ids = []
    pos = 0
    end = len(raw)
    while pos < end:
        colon = raw.index(b":", pos)
        length = int(raw[pos:colon])
        start = colon + 1
        if start + length > end:
            raise ValueError("truncated id list")
        ids.append(raw[start : start + length].decode())
        pos = start + length
    return ids
