"""Fixtures of the CLI tests: a CliRunner bound to the suite's real server, and input files."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from simhash_redis.cli.app import app
from typer.testing import CliRunner, Result

#: Runs the app with --redis-url of the suite's server (flushed before the test) and returns the result.
Invoke = Callable[..., Result]

_WORDS = [
    "the",
    "city",
    "council",
    "approved",
    "new",
    "budget",
    "on",
    "tuesday",
    "after",
    "long",
    "debate",
    "about",
    "school",
    "funding",
    "storm",
    "brought",
    "heavy",
    "rain",
    "and",
    "strong",
    "winds",
    "to",
    "coast",
    "closing",
    "roads",
    "across",
    "region",
    "football",
    "club",
    "signed",
    "young",
    "striker",
    "from",
    "second",
    "division",
    "for",
    "undisclosed",
    "fee",
    "this",
    "week",
    "scientists",
    "reported",
    "species",
    "of",
    "frog",
    "found",
    "in",
    "mountain",
    "forests",
    "during",
    "survey",
    "last",
    "spring",
    "central",
    "bank",
    "kept",
    "interest",
    "rates",
    "unchanged",
    "signalled",
    "that",
    "inflation",
    "is",
    "slowly",
    "coming",
    "down",
    "mayor",
    "said",
    "minister",
    "police",
    "hospital",
    "market",
    "election",
    "voters",
    "river",
    "bridge",
    "airport",
    "company",
    "shares",
    "profit",
    "workers",
    "strike",
    "union",
    "museum",
    "festival",
]


def article(i: int, copy: int = 0) -> str:
    """A short news-like text, distinct for each i; copy > 0 gives a republished copy of story i.

    Copies differ in case, spacing and punctuation only, which the default scheme normalises away, so
    they are certain near-duplicates (distance 0), while distinct stories are far apart.
    """
    rng = random.Random(i)
    words = [rng.choice(_WORDS) for _ in range(40)]
    if copy == 0:
        return " ".join(words)
    text = "  ".join(words) + "!" * copy
    return text.upper() if copy % 2 else text.title()


@pytest.fixture
def invoke(redis_url: str) -> Invoke:
    """CliRunner against the suite's server: invoke("load", "x.jsonl", input=...)."""
    runner = CliRunner()

    def run(
        *args: str, input: str | bytes | None = None, index: str | None = None, url: str | None = None
    ) -> Result:
        prefix = ["--redis-url", url or redis_url]
        if index is not None:
            prefix += ["--index", index]
        return runner.invoke(app, [*prefix, *args], input=input)

    return run


def write_jsonl(path: Path, rows: Sequence[Mapping[str, object]], *, gz: bool = False) -> Path:
    """Write rows as JSON Lines (gzipped when gz)."""
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path
