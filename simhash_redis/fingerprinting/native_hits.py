"""The read path's candidate filter in the compiled core: `store.candidates`' twin, bit for bit.

Stored values of SMEMBERS replies, as Python lists of bytes or in their RESP form straight off the wire,
are decoded and compared with each query by popcount in Rust; any value other than a plain decimal is
decoded by `codec.decode_fp`, so values and errors are the pure filter's.
"""

from __future__ import annotations

from collections.abc import Callable

import simhash_redis_native as _native

from ..codec import decode_fp

__all__ = ["hash_values", "hits", "hits_in_sets", "scan_sets"]

_WIDEST = 1 << 128
_SLOW: dict[int, Callable[[object, int], tuple[int, int]]] = {}


def _slow_candidate(f: object) -> Callable[[object, int], tuple[int, int]]:
    """Make the decoder of stored values that are not plain decimal bytes.

    Args:
        f: the index's fingerprint width.

    Returns:
        A function of (stored value, query) giving (fingerprint, distance) as `_hits_scalar` computes
        them, raising as `codec.decode_fp` does.
    """

    def slow(raw: object, fp: int) -> tuple[int, int]:
        candidate = decode_fp(raw, f)  # type: ignore[arg-type]  # any value int() takes, as the pure code
        return candidate, (candidate ^ fp).bit_count()

    return slow


def hits(
    fps: list[int], replies: list[list[bytes]], tables: int, k: int, f: int
) -> list[dict[bytes, tuple[int, int]]] | None:
    """For each query, {stored value: (fingerprint, distance)} of its candidates within distance k.

    Exactly `simhash_redis.index._hits_scalar`: values are decoded by `codec.decode_fp` (signed 64-bit
    decimals for f = 64 wrap to unsigned), each distinct value of a query counted once, in the order
    met; a value that is not a decimal raises the ValueError of ``int()``.

    Args:
        fps: the query fingerprints.
        replies: the SMEMBERS replies (lists of stored values), `tables` per query, query after query.
        tables: replies per query.
        k: the largest distance that counts.
        f: the index's fingerprint width.

    Returns:
        One dict per query; None for arguments outside the native kernel's types (the caller's pure
        filter then answers).

    Raises:
        ValueError: a stored value is not an integer literal.
    """
    if type(replies) is list and _filter_arguments(fps, tables, k):
        return _native.hits(fps, replies, tables, min(max(k, -1), 129), k, f == 64, _slow_of(f))
    return None


def hits_in_sets(
    fps: list[int], data: bytes, tables: int, k: int, f: int
) -> list[dict[bytes, tuple[int, int]]] | None:
    """`hits` of SMEMBERS replies in their RESP form, as `scan_sets` found them whole.

    Args:
        fps: the query fingerprints.
        data: the replies, `tables` per query, query after query.
        tables: replies per query.
        k: the largest distance kept.
        f: the fingerprint width.

    Returns:
        As `hits`; None for arguments outside the native kernel's types.

    Raises:
        ValueError: a stored value is not an integer literal, or `data` is not whole replies.
    """
    if type(data) is bytes and _filter_arguments(fps, tables, k):
        return _native.hits_in_sets(fps, data, tables, min(max(k, -1), 129), k, f == 64, _slow_of(f))
    return None


def scan_sets(data: bytes, want: int) -> tuple[int, int, bool]:
    """How far whole SMEMBERS or HGETALL replies (RESP arrays, sets or maps of bulk strings) reach in
    `data`.

    Args:
        data: replies as they came off the wire, from the start of one.
        want: the most replies to look for.

    Returns:
        The end of the last whole one, how many there are, and whether the next one has another shape
        (an error reply, say), which a general RESP reader must then read.
    """
    return _native.scan_sets(data, 0, want)


def hash_values(data: bytes, fields: list[bytes]) -> list[bytes | None]:
    """The value of each field in one HGETALL reply in its RESP form (a map, or an array of fields and
    values in turn), None where the field is absent: only strings at field positions are compared.

    Args:
        data: the whole reply, as it came off the wire.
        fields: the fields.

    Raises:
        ValueError: not one whole reply of bulk strings in pairs.
    """
    return _native.hash_values(data, fields)


def _filter_arguments(fps: object, tables: object, k: object) -> bool:
    """Whether the candidate filter's arguments are of the compiled kernels' types."""
    return (
        type(fps) is list
        and type(tables) is int
        and tables >= 1
        and type(k) is int
        and all(type(fp) is int and 0 <= fp < _WIDEST for fp in fps)
    )


def _slow_of(f: int) -> Callable[[object, int], tuple[int, int]]:
    """The filter's decoder of values other than plain decimals, for width f (kept for a few widths)."""
    slow = _SLOW.get(f) if type(f) is int else None
    if slow is None:
        slow = _slow_candidate(f)
        if type(f) is int and len(_SLOW) < 8:
            _SLOW[f] = slow
    return slow
