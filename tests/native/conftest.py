"""The native engine's tests: skipped as a whole unless the compiled core is in use.

It is in use when `simhash_redis_native` is installed (``make native`` or ``pip install ./native``) and
SIMHASH_REDIS_ENGINE is not "python".
"""

from __future__ import annotations

import pytest

from simhash_redis.fingerprinting import engines

if engines.native is None:
    pytest.skip(
        "the compiled core is not in use (not installed, or SIMHASH_REDIS_ENGINE=python)",
        allow_module_level=True,
    )
