"""A minimal simhash-redis worker: store each new document unless a near-duplicate is already indexed.

Reads documents from standard input (one per line, ids ``stdin:<hash of the line>``, so that the next
batch piped in does not take this one's ids) or from folders of text files
(one document per file, ids = paths relative to the folder), calls `SimhashIndex.add_if_new` for each,
and prints ``duplicate<TAB>id<TAB>existing id<TAB>distance`` for every document it did not store. Any
number of these workers, on any number of machines, can share one index: add_if_new is atomic, so of
two workers racing with near-duplicates exactly one stores its document.

Usage::

    SIMHASH_REDIS_URL=redis://localhost:6379/0 python docker/worker_example.py --index docs FOLDER...
    SIMHASH_REDIS_INDEX=docs python docker/worker_example.py -      # the index from the environment
    some-producer | python docker/worker_example.py --index docs -

It uses only the public API (``from simhash_redis import SimhashIndex``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import xxhash

from simhash_redis import SimhashIndex, SimhashRedisError


def documents(sources: list[str]) -> Iterator[tuple[str, str]]:
    """The (id, text) pairs of the sources: "-" for stdin lines, else folders (or single files).

    Args:
        sources: "-" or paths.

    Yields:
        (id, text) for every non-empty line or file.
    """
    for source in sources:
        if source == "-":
            for line in sys.stdin:
                if line.strip():
                    text = line.rstrip("\n")
                    yield f"stdin:{xxhash.xxh3_64_hexdigest(text.encode())}", text
            continue
        root = Path(source)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if any(part.startswith(".") for part in path.relative_to(root).parts):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if text.strip():
                yield (path.name if path == root else path.relative_to(root).as_posix()), text


def main(argv: list[str] | None = None) -> int:
    """Run the worker.

    Args:
        argv: command-line arguments (default sys.argv[1:]).

    Returns:
        The exit status: 0, or 1 when Redis failed.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", default=["-"], help='folders or files, or "-" for stdin lines')
    parser.add_argument(
        "--redis-url", default=os.environ.get("SIMHASH_REDIS_URL"), help="default: $SIMHASH_REDIS_URL"
    )
    parser.add_argument(
        "--index",
        default=os.environ.get("SIMHASH_REDIS_INDEX", "default"),
        help="index name (default: $SIMHASH_REDIS_INDEX, else default)",
    )
    parser.add_argument("--k", type=int, default=None, help="largest distance, when creating the index")
    args = parser.parse_args(argv)
    if not args.redis_url:
        parser.error("pass --redis-url or set SIMHASH_REDIS_URL (e.g. $(simhash-redis server url))")
    stored = duplicates = 0
    try:
        index = SimhashIndex.from_url(args.redis_url, args.index, k=args.k)
        for doc_id, text in documents(args.sources):
            match = index.add_if_new(doc_id, text)
            if match is None:
                stored += 1
            elif match.id != doc_id:
                duplicates += 1
                print(f"duplicate\t{doc_id}\t{match.id}\t{match.distance}", flush=True)
    except SimhashRedisError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"stored {stored}, duplicates {duplicates}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
