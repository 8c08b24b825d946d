"""An index's configuration, how it is stored in the meta hash, and how a worker's arguments are checked
against it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .. import defaults
from ..checks import is_int
from ..errors import ConfigurationMismatch, IndexCorrupted, InvalidArgument, InvalidType
from ..fingerprinting import Scheme
from .layout import Layout

__all__ = ["FORMAT_VERSION", "IndexConfig"]

#: Version of the Redis data format; a newer format is refused rather than misread.
FORMAT_VERSION = 1


@dataclass(frozen=True)
class IndexConfig:
    """Everything that decides where a fingerprint is stored and how a text becomes one.

    Args:
        layout: the table layout (which also fixes f and k).
        scheme: the fingerprint scheme, of the same f.
        id_buckets: buckets of the id and fingerprint maps.
    """

    layout: Layout
    scheme: Scheme
    id_buckets: int = defaults.ID_BUCKETS

    @property
    def f(self) -> int:
        """Fingerprint width in bits."""
        return self.layout.f

    @property
    def k(self) -> int:
        """The largest distance the index answers for."""
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
    ) -> IndexConfig:
        """The configuration from a worker's arguments, defaults filling the rest.

        Args:
            k: the largest distance; defaults to the layout's, else 3.
            f: fingerprint width; defaults to the layout's or scheme's, else 64.
            layout: the table layout; defaults to k+1 pigeonhole tables.
            scheme: the fingerprint scheme; defaults to the default scheme at width f.
            id_buckets: buckets of the id map.

        Raises:
            InvalidArgument: the arguments contradict each other or are out of range.
            InvalidType: an argument has the wrong type.
        """
        if layout is not None and not isinstance(layout, Layout):
            raise InvalidType(f"layout must be a Layout, got {type(layout).__name__}")
        if scheme is not None and not isinstance(scheme, Scheme):
            raise InvalidType(f"scheme must be a Scheme, got {type(scheme).__name__}")
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
        return cls(layout=layout, scheme=scheme or Scheme(f=width), id_buckets=buckets)

    def to_meta(self) -> dict[str, str]:
        """The fields of the meta hash."""
        return {
            "format": str(FORMAT_VERSION),
            "f": str(self.f),
            "k": str(self.k),
            "layout": self.layout.to_meta(),
            "scheme": self.scheme.to_meta(),
            "stopwords": json.dumps(list(self.scheme.stopwords), ensure_ascii=False),
            "id_buckets": str(self.id_buckets),
        }

    @classmethod
    def from_meta(cls, meta: dict[str, str]) -> IndexConfig:
        """Read a stored meta hash.

        Args:
            meta: the meta hash's fields, decoded.

        Raises:
            IndexCorrupted: a field is missing or malformed, or the format is newer than this version.
        """
        try:
            version = int(meta["format"])
            if version > FORMAT_VERSION:
                raise IndexCorrupted(
                    f"the index uses data format {version}; this simhash-redis reads formats up to "
                    f"{FORMAT_VERSION}: upgrade simhash-redis"
                )
            f, k = int(meta["f"]), int(meta["k"])
            layout = Layout.from_meta(meta["layout"], f=f, k=k)
            stopwords = json.loads(meta.get("stopwords", "[]"))
            scheme = Scheme.from_meta(meta["scheme"], stopwords=stopwords)
            return cls(layout=layout, scheme=scheme, id_buckets=int(meta["id_buckets"]))
        except IndexCorrupted:
            raise
        except (KeyError, ValueError, TypeError, InvalidArgument, ConfigurationMismatch) as exc:
            raise IndexCorrupted(
                f"the index's meta hash is malformed ({exc!r}); check the index name"
            ) from None

    def check_against(self, stored: IndexConfig, given: set[str], index: str) -> None:
        """Refuse to open a stored index with arguments that contradict it.

        Args:
            stored: the configuration in Redis.
            given: which arguments the worker passed explicitly.
            index: the index's name, for the message.

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
        }
        for arg in sorted(given):
            for field in fields[arg]:
                if mine[field] != theirs[field]:
                    raise ConfigurationMismatch(
                        f"index {index!r} is stored with {field}={theirs[field]!r} but {arg} asks for "
                        f"{field}={mine[field]!r}; open it without {arg} to use the stored configuration, "
                        "or choose another index name"
                    )
