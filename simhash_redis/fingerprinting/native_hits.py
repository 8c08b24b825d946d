"""The read path's candidate filter in the compiled core: `store.candidates.pure_hits`' twin, bit for bit.

Stored values of SMEMBERS replies, as Python lists of bytes or in their RESP form straight off the wire,
are decoded and compared with each query by popcount in Rust; any value other than a plain decimal is
decoded by `codec.decode_fp`, so values and errors are the pure filter's.
"""

from __future__ import annotations

from collections.abc import Callable

import simhash_redis_native as _native

from ..codec import decode_fp

__all__ = ["hash_values", "hits"]

_WIDEST = 1 << 128
_SLOW: dict[int, Callable[[object, int], tuple[int, int]]] = {}


def _slow_candidate(f: object) -> Callable[[object, int], tuple[int, int]]:
    """Make the decoder of stored values that are not plain decimal bytes.

    Args:
        f: the index's fingerprint width.

    Returns:
        A function of (stored value, query) giving (fingerprint, distance) as `pure_hits` computes
        them, raising as `codec.decode_fp` does.
    """

    def slow(raw: object, fp: int) -> tuple[int, int]:
        candidate = decode_fp(raw, f)  # type: ignore[arg-type]  # any value int() takes, as the pure code
        return candidate, (candidate ^ fp).bit_count()

    return slow


def hits(
    fps: list[int], replies: object, tables: int, k: int, f: int
) -> list[dict[bytes, tuple[int, int]]] | None:
    """For each query, {stored value: (fingerprint, distance)} of its candidates within distance k.

    Exactly `store.candidates.pure_hits`: values are decoded by `codec.decode_fp` (signed 64-bit
    decimals for f = 64 wrap to unsigned), each distinct value of a query counted once, in the order
    met; a value that is not a decimal raises the ValueError of ``int()``.

    Args:
        fps: the query fingerprints.
        replies: the SMEMBERS replies, `tables` per query, query after query: lists of stored values,
            or whole replies in their RESP form (bytes, as the wire gave them).
        tables: replies per query.
        k: the largest distance that counts.
        f: the index's fingerprint width.

    Returns:
        One dict per query; None for arguments outside the native kernel's types (the caller's pure
        filter then answers).

    Raises:
        ValueError: a stored value is not an integer literal, or RESP bytes are not whole replies.
    """
    kind = type(replies)
    if (kind is list or kind is bytes) and _filter_arguments(fps, tables, k):
        kernel = _native.hits if kind is list else _native.hits_in_sets
        return kernel(fps, replies, tables, min(max(k, -1), 129), k, f == 64, _slow_of(f))  # type: ignore[arg-type]
    return None


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
