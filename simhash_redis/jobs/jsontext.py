"""JSON documents parsed by orjson where it is installed and gives the stdlib's very value, else by json."""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any

__all__ = ["loads", "loads_object"]


_ORJSON: ModuleType | None
try:  # the [fast] extra: about 2.5x faster per 3.5 KB line
    _ORJSON = importlib.import_module("orjson")
except ImportError:
    _ORJSON = None


def loads(text: str) -> Any:
    """`json.loads`, by orjson where it is installed and gives the very same value (no error, no float).

    Raises:
        ValueError: (json.JSONDecodeError) the text is not JSON, or nests more than 1,024 levels deep
            (orjson's limit, on every Python and with either parser).
    """
    if _ORJSON is not None:
        try:
            value = _ORJSON.loads(text)
        except _ORJSON.JSONDecodeError:
            pass
        else:
            if not _has_float(value):
                return value
    try:
        value = json.loads(text)
    except RecursionError:
        # The stdlib recurses once per level: a bad record, not the end of the load.
        raise ValueError("nested too deeply") from None
    # orjson's limit, on every Python: 3.12+ read far deeper than 3.10 and 3.11 before a RecursionError.
    if _deeper_than(value, _MAX_DEPTH):
        raise ValueError("nested too deeply")
    return value


def loads_object(raw: bytes) -> dict[str, Any] | None:
    """The JSON object in a line's bytes when orjson reads it as the stdlib reads the decoded line (no
    float anywhere), else None: the caller then reads the line the general way."""
    if _ORJSON is None:
        return None
    try:
        value = _ORJSON.loads(raw)
    except _ORJSON.JSONDecodeError:
        return None
    return value if type(value) is dict and not _has_float(value) else None


#: The most levels of arrays and objects a document may nest (orjson's limit).
_MAX_DEPTH = 1024


def _deeper_than(value: Any, limit: int) -> bool:
    """Tell whether a parsed JSON value nests arrays and objects more than `limit` levels (no recursion)."""
    pending = [(value, 1)] if type(value) is dict or type(value) is list else []
    while pending:
        container, depth = pending.pop()
        if depth > limit:
            return True
        for item in container.values() if type(container) is dict else container:
            if type(item) is dict or type(item) is list:
                pending.append((item, depth + 1))
    return False


def _has_float(value: Any) -> bool:
    """Tell whether a parsed JSON value holds a float anywhere (without recursion: orjson reads up to
    1,024 levels, more than Python's stack allows)."""
    kind = type(value)
    if kind is not dict and kind is not list:
        return kind is float
    # Records are flat objects of strings: one pass over their values, containers looked into.
    pending = [value]
    while pending:
        container = pending.pop()
        for item in container.values() if type(container) is dict else container:
            kind = type(item)
            if kind is float:
                return True
            if kind is dict or kind is list:
                pending.append(item)
    return False
