"""The reproducible data every benchmark uses, and the private server they run against.

Texts: real English and Chinese text, never random words, and the same on every machine: the
versioned evaluation corpus `benchmarks/data/eval_corpus.jsonl.gz` (built by `benchmarks/eval_corpus.py`
from Debian packages and PyPI sdists, sources and licences in `benchmarks/data/SOURCES.md`), its
original documents only (not the synthetic near-duplicates), in file order. Texts are cut into
documents of `size` UTF-8 bytes; when more documents are asked for than the text holds, further passes
start at shifted offsets, so every document is still real, contiguous text.

Fingerprints for the index benchmarks: 64-bit values from a seeded numpy generator (the index's cost
depends on how many fingerprints share a table key, which for SimHash of distinct documents is close
to uniform). Ids are 16 bytes, ``doc:000000000042``. Queries are half "hits" (a stored fingerprint with
0 to k bits flipped) and half "misses" (fresh random values).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from simhash_redis.errors import InputError  # noqa: E402
from simhash_redis.jobs.jsonlines import read_json_lines  # noqa: E402
from tests.servers import ServerProcess  # noqa: E402

__all__ = [
    "ROOT",
    "documents",
    "fingerprints",
    "id_of",
    "pin",
    "queries",
    "server",
    "text",
    "unpin",
]

_EVAL = ROOT / "benchmarks" / "data" / "eval_corpus.jsonl.gz"
SEED = 20240601
# Offset step between passes over the text (a prime, so documents of one pass are not aligned with
# another's); size / _SHIFT passes are possible.
_SHIFT = 61


@functools.cache
def text(lang: str) -> str:
    """All the real text of one language ("en" or "zh"), in a fixed order."""
    parts = []
    for item in read_json_lines(_EVAL):
        if isinstance(item, InputError):
            raise item
        if item.value.get("lang") == lang and item.value.get("kind") != "variant":
            parts.append(item.value["text"])
    if not parts:
        raise ValueError(f"no {lang!r} text in {_EVAL}")
    return "\n".join(parts)


def documents(lang: str, count: int, size: int = 3500) -> list[str]:
    """`count` documents of about `size` UTF-8 bytes of real text in one language.

    Args:
        lang: "en" or "zh".
        count: how many.
        size: UTF-8 bytes per document.
    """
    data = text(lang).encode("utf-8")
    docs: list[str] = []
    shift = 0
    while len(docs) < count:
        start = shift
        while start + size <= len(data) and len(docs) < count:
            end = start + size
            while end < len(data) and data[end] & 0xC0 == 0x80:
                end += 1
            while data[start] & 0xC0 == 0x80:
                start += 1
            docs.append(data[start:end].decode("utf-8"))
            start = end
        shift += _SHIFT  # the next pass cuts the same text at other places
        if shift >= size:
            raise ValueError(f"not enough {lang} text for {count} documents of {size} bytes")
    return docs


def fingerprints(n: int, seed: int = SEED) -> list[int]:
    """`n` distinct 64-bit fingerprints from a seeded generator."""
    rng = np.random.default_rng(seed)
    values = np.unique(rng.integers(0, 2**64, size=n + n // 1000 + 16, dtype=np.uint64))
    rng.shuffle(values)
    return [int(v) for v in values[:n]]


def id_of(i: int) -> str:
    """The 16-byte id of document number i."""
    return f"doc:{i:012d}"


def queries(stored: list[int], count: int, k: int = 3, seed: int = SEED + 1) -> list[int]:
    """Half near-duplicates of stored fingerprints (0..k bits flipped), half fresh random values."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        if i % 2:
            out.append(int(rng.integers(0, 2**64, dtype=np.uint64)))
            continue
        fp = stored[int(rng.integers(0, len(stored)))]
        for bit in rng.choice(64, size=int(rng.integers(0, k + 1)), replace=False):
            fp ^= 1 << int(bit)
        out.append(fp)
    return out


def pin(cpu: int) -> None:
    """Pin this process to one CPU (where the OS allows it), so per-core figures are per core."""
    if hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {cpu % (os.cpu_count() or 1)})


def unpin() -> None:
    """Let this process (and what it starts from now on) run on every CPU again."""
    if hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, range(os.cpu_count() or 1))


@contextlib.contextmanager
def server(cpu: int | None = 1, **config: object) -> Iterator[ServerProcess]:
    """A private server on a free loopback port (no persistence), pinned to its own CPU."""
    with ServerProcess({"save": "", "appendonly": "no", **config}) as proc:  # type: ignore[dict-item]
        if cpu is not None and proc.pid and hasattr(os, "sched_setaffinity"):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(proc.pid, {cpu % (os.cpu_count() or 1)})
        yield proc
