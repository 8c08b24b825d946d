"""The module paths of 0.1 still import, as their new homes, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys

import pytest

import simhash_redis
from simhash_redis import _moved


@pytest.mark.parametrize(("old", "new"), sorted(_moved.MOVED.items()))
def test_an_old_path_is_its_new_module(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match="has moved to"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_the_old_fingerprint_module_keeps_the_public_function() -> None:
    from simhash_redis.fingerprint import DEFAULT_SCHEME, distance, fingerprint, fingerprint_many

    importlib.import_module("simhash_redis.fingerprint")
    assert simhash_redis.fingerprint is fingerprint  # the package's name is still the function
    assert fingerprint("Hello, World!") == 0xF1E3FFA92AA51AD1
    assert fingerprint_many(["Hello, World!"], DEFAULT_SCHEME) == [0xF1E3FFA92AA51AD1]
    assert distance(1, 2) == 2
