"""Argument checks shared by the public entry points: one wording for "wrong type" and "out of range"."""

from __future__ import annotations

from typing import TypeGuard

from .errors import InvalidArgument, InvalidType

__all__ = ["check_int", "is_int"]


def is_int(value: object) -> TypeGuard[int]:
    """Whether a value is an int and not a bool (which Python counts as an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """The int argument `name` (not a bool: InvalidType), checked against the inclusive range low..high
    (None: no upper bound; else InvalidArgument)."""
    if not is_int(value):
        raise InvalidType(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidArgument(f"{name} must be {bound}, got {value}")
    return value
