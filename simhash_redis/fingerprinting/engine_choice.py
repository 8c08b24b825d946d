"""Which engine computes fingerprints, MinHash sketches and the candidate filter: the compiled core
(`pip install ./native`) when it can be imported, else the pure numpy engine (the same bits).
SIMHASH_REDIS_ENGINE=python forces the pure engine (and the service without its fast lane); =native makes
a missing compiled core an error.
The choice is made on first use, so that a wrong value is an error of the call that needs an engine.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from types import ModuleType
from typing import Protocol, cast

from ..errors import InvalidArgument, SimhashRedisError
from . import documents
from .documents import Document
from .hashing import SchemeParams

__all__ = ["ENGINE_ENV", "Engine", "chosen", "engine", "native"]

#: The environment variable that chooses the engine: "native", "python", or unset (native if installed).
ENGINE_ENV = "SIMHASH_REDIS_ENGINE"


def _load_native() -> ModuleType | None:
    given = os.environ.get(ENGINE_ENV, "")
    choice = given.strip().lower()
    if choice not in ("", "native", "python"):
        raise InvalidArgument(
            f"the environment variable {ENGINE_ENV} must be 'native', 'python' or unset (the compiled "
            f"core when installed), got {given!r}"
        )
    if choice == "python":
        return None
    try:
        from . import native as adapter
    except ImportError as exc:
        if choice == "native":
            raise SimhashRedisError(
                f"{ENGINE_ENV}=native, but the compiled core cannot be imported ({exc}): install it from "
                f"a checkout of simhash-redis with `pip install ./native` (needs Rust), or unset {ENGINE_ENV}"
            ) from None
        if not isinstance(exc, ModuleNotFoundError):
            # Installed but unusable (older than the package, or broken): said once, not silently slower.
            warnings.warn(f"{exc}; the pure engine runs meanwhile", RuntimeWarning, stacklevel=2)
        return None
    return adapter


#: The native adapter module, or None when the pure engine runs: chosen on first use (`__getattr__`).
native: ModuleType | None


def __getattr__(name: str) -> ModuleType | None:
    """``native``, chosen on first use (raises as `engine`)."""
    if name != "native":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    core = globals()["native"] = _load_native()
    return core


def _core() -> ModuleType | None:
    return globals()["native"] if "native" in globals() else __getattr__("native")


def engine() -> str:
    """The engine in use: "native" (the compiled core) or "python" (the pure numpy engine).

    Raises:
        InvalidArgument: SIMHASH_REDIS_ENGINE is neither "native", "python" nor unset.
        SimhashRedisError: it is "native" and the compiled core cannot be imported.
    """
    return "python" if _core() is None else "native"


class Engine(Protocol):
    """What both engines' modules offer (the native adapter and `documents`): schemes validated."""

    def fingerprint(self, doc: Document, scheme: SchemeParams) -> int: ...
    def fingerprint_many(self, docs: Iterable[Document], scheme: SchemeParams) -> list[int]: ...


def chosen() -> Engine:
    """The engine in use (its module; raises as `engine`): chosen on first use, read again per call by a
    `Scheme`, once by an index (at its first fingerprint)."""
    core = _core()
    return documents if core is None else cast(Engine, core)
