"""Opening the index a `VerifiedIndex` wraps: an existing one, or one created verified from the start."""

from __future__ import annotations

from typing import Any

from ..errors import IndexNotFound, InvalidArgument
from ..fingerprinting import MinHasher
from ..store import Verification
from .simhash_index import SimhashIndex

__all__ = ["verifiable"]


def verifiable(
    client: Any, name: str, hasher: MinHasher | None, threshold: float | None, options: dict[str, Any]
) -> SimhashIndex:
    """The index a `VerifiedIndex` of that name wraps: opened, or created verified from the start.

    Raises:
        InvalidArgument: options name `verification` (the mode is hasher and threshold).
        IndexNotFound, ConfigurationMismatch, RedisUnavailable: as `SimhashIndex`.
    """
    if "verification" in options:
        raise InvalidArgument("give the verified mode as hasher and threshold, not verification")
    options = dict(options)
    create = options.pop("create", True)
    try:
        return SimhashIndex(client, name, create=False, **options)
    except IndexNotFound:
        if not create:
            raise
        # Created verified from the start: no plain writer can come between creation and pinning.
        mode = Verification.of(hasher, 0.8 if threshold is None else threshold)
        return SimhashIndex(client, name, verification=mode, **options)
