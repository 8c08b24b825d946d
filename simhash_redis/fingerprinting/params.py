"""What the engines read of a scheme and of a MinHasher (which sit above them), as protocols."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["MinHashParams", "SchemeParams"]


class SchemeParams(Protocol):
    """A validated scheme, as the engines read it; a `Scheme` is one (its docstring says what each is)."""

    @property
    def features(self) -> str: ...
    @property
    def n(self) -> int: ...
    @property
    def f(self) -> int: ...
    @property
    def weighting(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def stopwords(self) -> tuple[str, ...]: ...


class MinHashParams(Protocol):
    """A MinHasher's parameters and permutations (multipliers `a`, offsets `b`), as the native sketcher
    reads them; a `MinHasher` is one."""

    @property
    def num_perm(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def a(self) -> npt.NDArray[np.uint64]: ...
    @property
    def b(self) -> npt.NDArray[np.uint64]: ...
