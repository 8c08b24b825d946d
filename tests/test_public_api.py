"""The public API is exactly `simhash_redis.__all__`, every name imports, and docs/api.md documents each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import simhash_redis
import simhash_redis.asyncio

ROOT = Path(__file__).resolve().parent.parent

#: Pinned on purpose: adding or removing a public name must be a deliberate change of this list,
#: of docs/api.md (python scripts/gen_api_docs.py) and of the changelog.
PUBLIC = [
    "Backoff",
    "BandedOddSketcher",
    "ConfigurationMismatch",
    "Document",
    "IndexCorrupted",
    "IndexNotFound",
    "InputError",
    "InvalidArgument",
    "InvalidFingerprint",
    "InvalidType",
    "Layout",
    "Match",
    "MinHasher",
    "Outcome",
    "RedisAuthError",
    "RedisOutOfMemory",
    "RedisPermissionError",
    "RedisTimeout",
    "RedisUnavailable",
    "Retention",
    "Scheme",
    "SimhashIndex",
    "SimhashRedisError",
    "TooManyErrors",
    "VerifiedIndex",
    "VerifiedMatch",
    "VerifyReport",
    "WriteContention",
    "__version__",
    "distance",
    "drop_index",
    "engine",
    "fingerprint",
    "fingerprint_many",
    "open_index",
    "redact_url",
]


#: The asyncio API's face, a subpackage of its own (it needs greenlet, the `asyncio` extra).
PUBLIC_ASYNCIO = ["AsyncSimhashIndex", "AsyncVerifiedIndex", "open_index"]


def test_all_is_pinned() -> None:
    assert list(simhash_redis.__all__) == PUBLIC
    assert list(simhash_redis.asyncio.__all__) == PUBLIC_ASYNCIO


def test_every_public_name_imports() -> None:
    namespace: dict[str, object] = {}
    exec(f"from simhash_redis import {', '.join(PUBLIC)}", namespace)
    for name in PUBLIC:
        assert namespace[name] is getattr(simhash_redis, name)


def test_every_public_name_is_documented_with_a_section_and_a_signature() -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for name in PUBLIC_ASYNCIO:
        assert f"<!-- signature: asyncio.{name} -->" in text, f"docs/api.md has no signature block for {name}"
        assert f"### `simhash_redis.asyncio.{name}`" in text, f"docs/api.md has no section for {name}"
    for name in PUBLIC:
        assert f"<!-- signature: {name} -->" in text, f"docs/api.md has no signature block for {name}"
        assert f"### `{name}`" in text or f"## `{name}`" in text, f"docs/api.md has no section for {name}"


def test_api_signatures_are_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_api_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr + "\n(regenerate with: python scripts/gen_api_docs.py)"
