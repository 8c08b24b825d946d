"""The native engine's tests: skipped as a whole unless the compiled core is in use.

It is in use when `simhash_redis_native` is installed (``make native`` or ``pip install ./native``) and
SIMHASH_REDIS_ENGINE is not "python".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from simhash_redis.fingerprinting import engine_choice

if engine_choice.native is None:
    pytest.skip(
        "the compiled core is not in use (not installed, or SIMHASH_REDIS_ENGINE=python)",
        allow_module_level=True,
    )


@contextlib.contextmanager
def pure_engine() -> Iterator[None]:
    """Run the pure engine for the duration (for indexes that fingerprint first meanwhile: an index keeps
    the engine of its first fingerprint)."""
    saved, engine_choice.native = engine_choice.native, None
    try:
        yield
    finally:
        engine_choice.native = saved
