"""Opening the index a `VerifiedIndex` wraps, and its verified mode, pinned or adopted."""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import defaults
from ..errors import ConfigurationMismatch, IndexCorrupted, IndexNotFound, InvalidArgument
from ..fingerprinting import Sketcher
from ..store import Verification, pin_meta
from .simhash_index import SimhashIndex

__all__ = ["checked_threshold", "verifiable", "verified_mode"]


def checked_threshold(hasher: Sketcher | None, threshold: float | None, band_buckets: int | None) -> float:
    """The threshold asked for (`defaults.THRESHOLD` when None), the verified mode's arguments checked
    (InvalidArgument, InvalidType) before anything is read or written."""
    asked = defaults.THRESHOLD if threshold is None else threshold
    Verification.of(hasher, asked, (0, 0), band_buckets)
    return asked


def verifiable(
    client: Any,
    name: str,
    hasher: Sketcher | None,
    threshold: float | None,
    options: dict[str, Any],
    band_buckets: int | None = None,
) -> SimhashIndex:
    """The index a `VerifiedIndex` of that name wraps: opened, or created verified from the start."""
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
        asked = checked_threshold(hasher, threshold, band_buckets)
        mode = Verification.of(hasher, asked, band_buckets=band_buckets)
        return SimhashIndex(client, name, verification=mode, **options)


def verified_mode(
    index: SimhashIndex,
    hasher: Sketcher | None,
    threshold: float | None,
    band_buckets: int | None = None,
    convert: bool = False,
) -> Verification:
    """The verified mode pinned in an index's meta (checked against the arguments), else pinned now where
    `index` created it, or `convert` asks (errors: `VerifiedIndex`'s)."""
    asked = checked_threshold(hasher, threshold, band_buckets)
    pinned = index.config.verification or _pin(index, hasher, asked, band_buckets, convert)
    if band_buckets is not None and band_buckets != pinned.band_buckets:
        raise ConfigurationMismatch(
            f"index {index.name!r} was created with band_buckets={pinned.band_buckets}, not {band_buckets}",
            hint="open it without band_buckets to use the stored configuration, or choose another index name",
            remedy="without-band_buckets",
        )
    if (hasher is not None and hasher.describe() != pinned.hasher().describe()) or (
        threshold is not None and threshold != pinned.threshold
    ):
        given = Verification.of(
            hasher or pinned.hasher(),
            pinned.threshold if threshold is None else threshold,
            (pinned.bands, pinned.rows),
        )
        differs = "threshold" if threshold is not None and threshold != pinned.threshold else "hasher"
        raise ConfigurationMismatch(
            f"index {index.name!r} is verified with {pinned.to_meta()!r}, not {given.to_meta()!r}",
            hint="open it without hasher and threshold to use the pinned mode",
            remedy=f"without-{differs}",
        )
    return pinned


def _pin(
    index: SimhashIndex, hasher: Sketcher | None, threshold: float, band_buckets: int | None, convert: bool
) -> Verification:
    """Pin a mode in the meta of an index `index` created, or (convert) an empty one (or adopt one pinned
    meanwhile); one that holds documents stays plain (they could never be confirmed)."""
    if not (convert or index.created):  # its plain writers would be refused from the pin on
        raise ConfigurationMismatch(
            f"index {index.name!r} is not verified: it was created plain and stays so; open it as a "
            "SimhashIndex, create another index (VerifiedIndex.from_url(url, name, ...) creates one "
            "verified), or convert it while it is empty with VerifiedIndex(index, convert=True)"
        )
    docs = index.count()[0]
    if docs:
        raise ConfigurationMismatch(
            f"index {index.name!r} holds {docs:,} documents without sketches: verified mode "
            "is chosen when an index is created; create a verified index and load the documents into it"
        )
    mode = Verification.of(hasher, threshold, band_buckets=band_buckets)
    stored = pin_meta(index.store.sender, index.keys.meta, "verified", mode.to_meta())
    if stored is None:
        raise IndexNotFound(f"index {index.name!r} was dropped while it was being opened")
    try:
        pinned = Verification.from_meta(stored)
    except ValueError as exc:
        raise IndexCorrupted(f"index {index.name!r} has a malformed verified mode: {exc}") from None
    index.config = dataclasses.replace(index.config, verification=pinned)
    index.store.sketched = True  # the wrapped index's lookups read no bucket whole from now on
    return pinned
