"""How the index's batch methods take their arguments apart, with the same errors everywhere."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import InvalidType

__all__ = ["as_batch", "check_pairs", "chunks", "is_integer"]


def as_batch(value: object, argument: str) -> list[Any]:
    """A batch argument as a list; a str, bytes or non-iterable is refused rather than split up.

    Args:
        value: the argument.
        argument: its name, for the message.

    Raises:
        InvalidType: a str, bytes, mapping or non-iterable.
    """
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidType(
            f"{argument} must be a list (or other iterable) of items, got {type(value).__name__}"
        )
    return list(value)


def is_integer(value: object) -> bool:
    """Tell an int-like scalar (numpy integers too) from a document; a bool is neither.

    Args:
        value: a document or fingerprint argument.
    """
    if isinstance(value, (str, bytes, bool)):
        return False
    return hasattr(value, "__index__")


def check_pairs(batch: list[Any]) -> list[tuple[str, Any]]:
    """Check that every item of a batch is an (id, document) pair.

    Args:
        batch: the items.

    Raises:
        InvalidType: an item is not a 2-tuple.
    """
    for item in batch:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidType(f"items must be (id, document) pairs, got {type(item).__name__}")
    return batch


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Items in lists of `size` (the last may be shorter).

    Args:
        items: the items.
        size: the chunk size.
    """
    source = iter(items)
    while batch := list(itertools.islice(source, size)):
        yield batch
