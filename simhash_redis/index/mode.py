"""The one place (`chosen_mode`) that decides whether an index is verified: a new index made from texts is
verified unless plain is asked for, one made from fingerprints plain; an existing one keeps its mode."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationMismatch, IndexNotFound, InvalidArgument, InvalidType
from ..fingerprinting import Sketcher
from ..results import Match, VerifiedMatch
from .arguments import check_max_candidates
from .simhash_index import Document, SimhashIndex
from .verified_index import MAX_CANDIDATES, VerifiedIndex, checked_threshold, verifiable

__all__ = ["LIBRARY", "Asking", "add_if_new_many", "asked_mode", "chosen_mode", "open_in_mode"]


@dataclass(frozen=True)
class Asking:
    """How a caller's users ask for each mode ("verified=False", "--plain"; "--threshold", ...)."""

    plain: str
    verified: str
    hasher: str = "hasher"
    threshold: str = "threshold"
    band_buckets: str = "band_buckets"

    def asked_by(self, verified: bool | None, **arguments: object) -> str | None:
        """What asks for verified mode, in these words (verified, and each argument not None), or None."""
        given = ["verified"] if verified else []
        given += [argument for argument, value in arguments.items() if value is not None]
        words: list[str] = [getattr(self, argument) for argument in given]
        if len(words) > 1:  # "--threshold and --band-buckets"
            return ", ".join(words[:-1]) + " and " + words[-1]
        return words[0] if words else None


#: The library's words.
LIBRARY = Asking(plain="verified=False", verified="verified=True")


def chosen_mode(
    asked: bool | None,
    *,
    name: str,
    stored: bool | None = None,
    from_text: bool = True,
    asking: Asking = LIBRARY,
    asked_by: str | None = None,
) -> bool:
    """Whether an index is (to be) verified.

    Args:
        asked: True for verified, False for plain, None for the default.
        stored: the mode of the existing index; None: the index is new.
        from_text: whether a new index is made from texts.
        asked_by: what asked for verified mode in the caller's words (default: `asking.verified`).

    Raises:
        ConfigurationMismatch: the existing index has the other mode than the one asked for.
    """
    if stored is not None:
        if asked is not None and asked != stored:
            if stored:
                raise ConfigurationMismatch(
                    f"index {name!r} is verified: it was created verified and stays so; leave out "
                    f"{asking.plain}, or create another index with {asking.plain}"
                )
            raise ConfigurationMismatch(
                f"index {name!r} is not verified: it was created plain and stays so; leave out "
                f"{asked_by or asking.verified}, or create another index (then load the documents into it)"
            )
        return stored
    return asked if asked is not None else from_text


def asked_mode(
    verified: bool | None,
    *,
    hasher: Sketcher | None = None,
    threshold: float | None = None,
    band_buckets: int | None = None,
    asking: Asking = LIBRARY,
) -> bool | None:
    """The mode asked for (verified when one of its arguments is given), the arguments checked first.

    Raises:
        InvalidArgument: plain asked for with hasher, threshold or band_buckets; threshold or
            band_buckets out of range.
        InvalidType: verified is not a bool (or None); hasher is not a MinHasher or BandedOddSketcher.
    """
    if verified is not None and not isinstance(verified, bool):  # "false" would ask for verified
        raise InvalidType(f"verified must be True, False or None, got {verified!r}")
    given = asking.asked_by(None, hasher=hasher, threshold=threshold, band_buckets=band_buckets)
    if given and verified is False:
        raise InvalidArgument(f"{given} belong to verified mode: leave them out, or leave out {asking.plain}")
    checked_threshold(hasher, threshold, band_buckets)
    return True if given else verified


def open_in_mode(
    client: Any,
    name: str,
    *,
    verified: bool | None = None,
    from_text: bool = True,
    hasher: Sketcher | None = None,
    threshold: float | None = None,
    band_buckets: int | None = None,
    max_candidates: int | None = MAX_CANDIDATES,
    asking: Asking = LIBRARY,
    **options: Any,
) -> SimhashIndex | VerifiedIndex:
    """Open (or create) an index in the mode `chosen_mode` gives: a `VerifiedIndex` or a `SimhashIndex`
    (verified, from_text: as `chosen_mode`'s; the others as `VerifiedIndex`'s and `SimhashIndex`'s)."""
    asked = asked_mode(verified, hasher=hasher, threshold=threshold, band_buckets=band_buckets, asking=asking)
    cap = check_max_candidates(max_candidates)
    options = dict(options)
    create = options.pop("create", True)
    try:
        index = SimhashIndex(client, name, create=False, **options)
    except IndexNotFound:
        if not create:
            raise
        try:
            if chosen_mode(asked, name=name, from_text=from_text, asking=asking):
                index = verifiable(client, name, hasher, threshold, options, band_buckets)
            else:
                index = SimhashIndex(client, name, **options)
        except ConfigurationMismatch:
            # Another process created it meanwhile, maybe in the other mode: its stored mode decides below.
            index = SimhashIndex(client, name, create=False, **options)
    stored = index.config.verification is not None
    chosen_mode(
        asked,
        name=name,
        stored=stored,
        asking=asking,
        asked_by=asking.asked_by(verified, hasher=hasher, threshold=threshold, band_buckets=band_buckets),
    )
    return VerifiedIndex(index, hasher, threshold, band_buckets, cap) if stored else index


def add_if_new_many(
    index: SimhashIndex | VerifiedIndex, items: Sequence[tuple[str, Document]]
) -> list[Match | VerifiedMatch | None]:
    """`add_if_new_many` of an index of either mode (a verified index's documents are texts)."""
    return list(index.add_if_new_many(items))  # type: ignore[arg-type]  # an int is refused when verified
