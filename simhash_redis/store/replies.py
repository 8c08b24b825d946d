"""Reading replies whose shape depends on the protocol (RESP2 or RESP3)."""

from __future__ import annotations

from typing import Any

__all__ = ["hash_pairs"]


def hash_pairs(reply: Any) -> list[tuple[bytes, bytes]]:
    """The (field, value) pairs of an HGETALL reply, a map under RESP3 and a flat list under RESP2."""
    if isinstance(reply, dict):
        return list(reply.items())
    return [(reply[i], reply[i + 1]) for i in range(0, len(reply), 2)]
