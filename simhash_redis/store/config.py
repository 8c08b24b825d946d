"""An index's configuration, its meta fields, and the check of a worker's arguments against it."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import timedelta

from .. import defaults
from ..checks import is_int
from ..errors import ConfigurationMismatch, IndexCorrupted, InvalidArgument, InvalidType
from ..fingerprinting import Scheme
from .layout import Layout
from .verification import Verification

__all__ = ["FORMAT_VERSION", "IndexConfig", "Retention", "Verification"]

#: Version of the Redis data format (docs/redis-keys.md); any other is refused rather than misread.
FORMAT_VERSION = 4

_DURATION_RE = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_LONGEST = 100 * 365 * 86400
#: Periods a retention is cut into by default (a document lives retention to 7/6 of it).
_PERIODS = 6


def parse_duration(value: object, argument: str) -> int:
    """A duration in whole seconds, from a timedelta, a number of seconds, or a string such as "7d".

    A string must name its unit: a week's retention read as 7 seconds loses every document.

    Raises:
        InvalidType: another type.
        InvalidArgument: not positive, not whole seconds, or a string of another form (a bare number).
    """
    if isinstance(value, timedelta):
        seconds: float = value.total_seconds()
    elif isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match is None:
            raise InvalidArgument(f"{argument} must look like 90s, 30m, 12h, 7d or 2w, got {value!r}")
        number, unit = match.groups()
        if not unit:
            raise InvalidArgument(
                f"{argument} {value.strip()!r} needs a unit: {number}s, {number}m, {number}h, {number}d or "
                f"{number}w (e.g. {number}d for {number} days)"
            )
        seconds = int(number) * _UNIT_SECONDS[unit]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value
    else:
        raise InvalidType(
            f"{argument} must be a timedelta, seconds or a string such as '7d', got {type(value).__name__}"
        )
    if not math.isfinite(seconds) or seconds != int(seconds) or not 1 <= seconds <= _LONGEST:
        raise InvalidArgument(
            f"{argument} must be a whole number of seconds from 1 s to 100 years, got {value!r}"
        )
    return int(seconds)


@dataclass(frozen=True)
class Retention:
    """A retention window: each document is forgotten by itself a set time after it was last written.

    A document written at time t is found until t + seconds and never after t + seconds + period.

    Args:
        seconds: the retention, in whole seconds (also a timedelta or a string such as "7d" through `of`).
        period: the length of a period in whole seconds, at most the retention.
        sliding: a stored document found again as a near-duplicate by `add_if_new` (or a unique add) is
            kept another retention from then ("seen again"); otherwise only writing it again does that.

    Raises:
        InvalidArgument: a value is out of range.
        InvalidType: a value has the wrong type.
    """

    seconds: int
    period: int
    sliding: bool = False

    def __post_init__(self) -> None:
        for argument in ("seconds", "period"):
            value = getattr(self, argument)
            if not is_int(value):
                raise InvalidType(f"retention {argument} must be an int, got {type(value).__name__}")
        if not isinstance(self.sliding, bool):
            raise InvalidType(f"sliding must be a bool, got {type(self.sliding).__name__}")
        if not 1 <= self.seconds <= _LONGEST:
            raise InvalidArgument(f"the retention must be 1 s to 100 years, got {self.seconds} s")
        if not 1 <= self.period <= self.seconds:
            raise InvalidArgument(f"the period must be 1 s to the retention, got {self.period} s")

    @classmethod
    def of(cls, retention: object, period: object = None, *, sliding: bool = False) -> Retention:
        """A retention from a timedelta, seconds or a string such as "7d"; the period defaults to a sixth."""
        seconds = parse_duration(retention, "retention")
        length = -(-seconds // _PERIODS) if period is None else parse_duration(period, "period")
        return cls(seconds, length, sliding)

    def to_meta(self) -> str:
        """The meta field, e.g. "604800;period=100800;sliding"."""
        return f"{self.seconds};period={self.period}" + (";sliding" if self.sliding else "")

    @classmethod
    def from_meta(cls, text: str) -> Retention:
        seconds, _, rest = text.partition(";period=")
        period, _, sliding = rest.partition(";")
        made = cls(int(seconds), int(period), sliding == "sliding")
        if made.to_meta() != text:
            raise ValueError(f"retention {text!r} is not in its canonical form")
        return made

    def describe(self) -> str:
        """The retention and period for people, e.g. "7d (periods of 28h), sliding"."""
        return f"{_human(self.seconds)} (periods of {_human(self.period)})" + (
            ", sliding" if self.sliding else ""
        )


def _human(seconds: int) -> str:
    for unit in ("w", "d", "h", "m"):
        if seconds % _UNIT_SECONDS[unit] == 0:
            return f"{seconds // _UNIT_SECONDS[unit]}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class IndexConfig:
    """Everything that decides where a fingerprint is stored and how a text becomes one."""

    layout: Layout
    scheme: Scheme
    id_buckets: int = defaults.ID_BUCKETS
    verification: Verification | None = None
    retention: Retention | None = None

    @property
    def f(self) -> int:
        return self.layout.f

    @property
    def k(self) -> int:
        return self.layout.k

    @classmethod
    def build(
        cls,
        *,
        k: int | None = None,
        f: int | None = None,
        layout: Layout | None = None,
        scheme: Scheme | None = None,
        id_buckets: int | None = None,
        verification: Verification | None = None,
        retention: Retention | None = None,
    ) -> IndexConfig:
        """The configuration from a worker's arguments, defaults filling the rest.

        Raises:
            InvalidArgument: the arguments contradict each other or are out of range.
            InvalidType: an argument has the wrong type.
        """
        typed = {"layout": layout, "scheme": scheme, "verification": verification, "retention": retention}
        kinds = (Layout, Scheme, Verification, Retention)
        for (arg, given), kind in zip(typed.items(), kinds, strict=True):
            if given is not None and not isinstance(given, kind):
                raise InvalidType(f"{arg} must be a {kind.__name__}, got {type(given).__name__}")
        for arg, value in (("k", k), ("f", f), ("id_buckets", id_buckets)):
            if value is not None and (not is_int(value)):
                raise InvalidType(f"{arg} must be an int, got {type(value).__name__}")
        widths = {w for w in (f, layout.f if layout else None, scheme.f if scheme else None) if w is not None}
        if len(widths) > 1:
            raise InvalidArgument(f"f, layout.f and scheme.f disagree: {sorted(widths)}")
        width = widths.pop() if widths else defaults.F
        if width not in defaults.SUPPORTED_F:
            raise InvalidArgument(f"f must be one of {defaults.SUPPORTED_F}, got {width!r}")
        if layout is None:
            layout = Layout.pigeonhole(width, defaults.K if k is None else k)
        elif k is not None and k != layout.k:
            raise InvalidArgument(f"k={k} disagrees with the layout's k={layout.k}")
        buckets = defaults.ID_BUCKETS if id_buckets is None else id_buckets
        if not 1 <= buckets <= 1 << 30:
            raise InvalidArgument(f"id_buckets must be in 1..2**30, got {buckets!r}")
        return cls(layout, scheme or Scheme(f=width), buckets, verification, retention)

    def to_meta(self) -> dict[str, str]:
        fields = {
            "format": str(FORMAT_VERSION),
            "f": str(self.f),
            "k": str(self.k),
            "layout": self.layout.to_meta(),
            "scheme": self.scheme.to_meta(),
            "stopwords": json.dumps(list(self.scheme.stopwords), ensure_ascii=False),
            "id_buckets": str(self.id_buckets),
        }
        if self.verification is not None:
            fields["verified"] = self.verification.to_meta()
        if self.retention is not None:
            fields["retention"] = self.retention.to_meta()
        return fields

    @classmethod
    def from_meta(cls, meta: dict[str, str]) -> IndexConfig:
        """Read a stored meta hash's decoded fields (IndexCorrupted: malformed, or of another format)."""
        try:
            version = int(meta["format"])
            if version != FORMAT_VERSION:
                raise IndexCorrupted(
                    f"the index uses data format {version}; this simhash-redis reads format "
                    f"{FORMAT_VERSION} only: "
                    + (
                        "upgrade simhash-redis"
                        if version > FORMAT_VERSION
                        else "export it with the simhash-redis that wrote it and import the dump here "
                        "(dumps do not depend on the format), or create the index again"
                    )
                )
            f, k = int(meta["f"]), int(meta["k"])
            layout = Layout.from_meta(meta["layout"], f=f, k=k)
            stopwords = json.loads(meta.get("stopwords", "[]"))
            scheme = Scheme.from_meta(meta["scheme"], stopwords=stopwords)
            verified = meta.get("verified")
            verification = None if verified is None else Verification.from_meta(verified)
            stated = meta.get("retention")
            retention = None if stated is None else Retention.from_meta(stated)
            return cls(layout, scheme, int(meta["id_buckets"]), verification, retention)
        except IndexCorrupted:
            raise
        except (KeyError, ValueError, TypeError, InvalidArgument, ConfigurationMismatch) as exc:
            raise IndexCorrupted(
                f"the index's meta hash is malformed ({exc!r}); check the index name"
            ) from None

    def check_against(self, stored: IndexConfig, given: set[str], index: str) -> None:
        """Refuse to open a stored index with explicitly `given` arguments that contradict it.

        Raises:
            ConfigurationMismatch: an explicitly given argument differs from the stored value.
        """
        mine, theirs = self.to_meta(), stored.to_meta()
        fields = {
            "k": ["k"],
            "f": ["f"],
            "layout": ["layout"],
            "scheme": ["scheme", "stopwords"],
            "id_buckets": ["id_buckets"],
            "verification": ["verified"],
            "retention": ["retention"],
        }
        for arg in sorted(given):
            for field in fields[arg]:
                if mine.get(field) != theirs.get(field):
                    old, new = (f"{field}={c.get(field, 'none')}" for c in (theirs, mine))
                    if field == "retention":  # "1w (periods of 28h)", as import says it
                        both = (stored.retention, self.retention)
                        old, new = (f"retention {r.describe()}" if r else "no retention" for r in both)
                    raise ConfigurationMismatch(
                        f"index {index!r} was created with {old}, not {new}",
                        hint=f"open it without {arg} to use the stored configuration, or choose another "
                        "index name",
                        remedy=f"without-{arg}",
                    )
