"""Where a bulk load's time goes: server CPU and client CPU per document, against the plain commands.

Run from the repository root::

    python -m benchmarks.bench_write_cost [--n 200000] [--batch 1000] [--only add_many,raw]

Every variant writes the same n (16-byte id, 64-bit fingerprint) documents into an emptied private
server (pinned to CPU 1; this client to CPU 0) in batches of `batch`, and reports:

* fps/s: documents per wall-clock second;
* server us/doc: the server's CPU time (``INFO cpu``, user + sys, deltas) per document;
* script us/doc: ``INFO commandstats`` usec of evalsha per document (script variants only);
* client us/doc: this process's CPU time per document (waits on the socket excluded).

Variants:

* ``add_many``: `SimhashIndex.add_many` of one batch at a time (what bench_load measures);
* ``prep_seq``: add_many's per-batch work (encode_id, fingerprint_many, encode_fp) then
  `Writes.apply`, batch after batch: the same as add_many today, without its call overhead;
* ``apply``: `Writes.apply` of prebuilt (id, stored fp) writes (no id/fingerprint checks);
* ``pack``: building and packing the script call of each batch only, nothing sent (client cost);
* ``raw``: a hand-packed pipeline of the equivalent plain commands per document, HSETNX id map,
  HSETNX fingerprint map, 4 SADD (no atomicity, no counts): the server's ceiling for this data model;
* ``raw_sadd``: the 4 SADDs per document only (the anchor the issue quotes);
* ``raw_grouped``: the writes of ``raw`` grouped by key over all n documents, one variadic HSET or SADD
  per key (no atomicity, no counts, HSET instead of HSETNX, grouping included in the time): the server's
  ceiling for a non-atomic bulk import of this data model. Keys are shared by n/65,536 documents per
  table and n/131,072 per map bucket, so it gains with n;
* ``redis_py``: a redis-py pipeline of the 4 SADDs (what bench_load compares with).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis

from benchmarks import corpus, server_cpu
from simhash_redis import SimhashIndex
from simhash_redis.codec import encode_fp
from simhash_redis.store import Write, Writes
from simhash_redis.store.keys import encode_id
from simhash_redis.transport import wire

VARIANTS = ("add_many", "prep_seq", "apply", "pack", "raw", "raw_sadd", "raw_grouped", "redis_py")


def _evalsha_usec(client: redis.Redis) -> tuple[int, int]:
    stats = client.info("commandstats")
    entry = stats.get("cmdstat_evalsha") or {}
    return int(entry.get("usec", 0)), int(entry.get("calls", 0))


def _raw_pipeline(
    index: SimhashIndex, ids: list[bytes], stored: list[bytes], fps: list[int], batch: int, with_maps: bool
) -> None:
    keys = index.keys
    tables = keys.tables
    connection = wire.checkout(index.client.connection_pool)
    try:
        for start in range(0, len(ids), batch):
            commands: list[tuple[bytes, ...]] = []
            for doc_id, raw, fp in zip(
                ids[start : start + batch],
                stored[start : start + batch],
                fps[start : start + batch],
                strict=True,
            ):
                if with_maps:
                    commands.append((b"HSETNX", keys.id_bucket(doc_id), doc_id, raw))
                    commands.append((b"HSETNX", keys.fp_bucket(raw), raw, b"%d:%s" % (len(doc_id), doc_id)))
                commands.extend((b"SADD", key, raw) for key in tables(fp))
            wire.Exchange(connection).round_trip(commands)
    finally:
        index.client.connection_pool.release(connection)


def _raw_grouped(
    index: SimhashIndex, ids: list[bytes], stored: list[bytes], fps: list[int], batch: int
) -> None:
    keys = index.keys
    tables = keys.table_builder()
    maps: dict[bytes, list[bytes]] = {}
    sets: dict[bytes, list[bytes]] = {}
    for doc_id, raw, fp in zip(ids, stored, fps, strict=True):
        maps.setdefault(keys.id_bucket(doc_id), []).extend((doc_id, raw))
        maps.setdefault(keys.fp_bucket(raw), []).extend((raw, b"%d:%s" % (len(doc_id), doc_id)))
        for key in tables(fp):
            sets.setdefault(key, []).append(raw)
    commands = [(b"HSET", key, *pairs) for key, pairs in maps.items()]
    commands += [(b"SADD", key, *members) for key, members in sets.items()]
    connection = wire.checkout(index.client.connection_pool)
    try:
        for start in range(0, len(commands), batch):
            wire.Exchange(connection).round_trip(commands[start : start + batch])
    finally:
        index.client.connection_pool.release(connection)


def measure(name: str, client: redis.Redis, fps: list[int], batch: int) -> dict[str, Any]:
    """Run one variant on an emptied server; returns its figures."""
    client.flushall()
    client.config_resetstat()
    n = len(fps)
    index = SimhashIndex(client, "cost", k=3)
    ids_str = [corpus.id_of(i) for i in range(n)]
    ids = [i.encode() for i in ids_str]
    stored = [encode_fp(fp, 64) for fp in fps]
    writes = Writes(index.store, 64, len(index.layout.tables))
    run: Callable[[], None]
    if name == "add_many":

        def run() -> None:
            for start in range(0, n, batch):
                index.add_many(
                    list(zip(ids_str[start : start + batch], fps[start : start + batch], strict=True))
                )
    elif name == "add_many_all":
        index.batch_size = batch

        def run() -> None:
            index.add_many(list(zip(ids_str, fps, strict=True)))
    elif name == "apply":

        def run() -> None:
            for start in range(0, n, batch):
                writes.apply(
                    [
                        (i, s, None)
                        for i, s in zip(
                            ids[start : start + batch], stored[start : start + batch], strict=True
                        )
                    ]
                )
    elif name == "prep_seq":
        pairs = list(zip(ids_str, fps, strict=True))

        def batches() -> Iterator[list[Write]]:
            # What add_many does to each batch before writing it.
            for start in range(0, n, batch):
                chunk = pairs[start : start + batch]
                raw_ids = [encode_id(doc_id) for doc_id, _ in chunk]
                values = index.fingerprint_many([doc for _, doc in chunk])
                yield [(i, encode_fp(fp, 64), None) for i, fp in zip(raw_ids, values, strict=True)]

        def run() -> None:
            for ops in batches():
                writes.apply(ops)
    elif name == "pack":

        def run() -> None:
            for start in range(0, n, batch):
                ops = [
                    (i, s, None)
                    for i, s in zip(ids[start : start + batch], stored[start : start + batch], strict=True)
                ]
                wire.pack([writes._call(ops)])
    elif name in ("raw", "raw_sadd"):

        def run() -> None:
            _raw_pipeline(index, ids, stored, fps, batch, with_maps=name == "raw")
    elif name == "raw_grouped":

        def run() -> None:
            _raw_grouped(index, ids, stored, fps, batch)
    elif name == "redis_py":

        def run() -> None:
            tables = index.keys.tables
            for start in range(0, n, batch):
                pipe = client.pipeline(transaction=False)
                for fp, raw in zip(fps[start : start + batch], stored[start : start + batch], strict=True):
                    for key in tables(fp):
                        pipe.sadd(key, raw)
                pipe.execute()
    else:
        raise SystemExit(f"unknown variant {name}")
    server0 = server_cpu(client)
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    run()
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    server = server_cpu(client) - server0
    usec, calls = _evalsha_usec(client)
    dbsize = client.dbsize()
    out = {
        "variant": name,
        "fps_s": n / wall,
        "server_us": server / n * 1e6,
        "script_us": usec / n if calls else None,
        "client_us": cpu / n * 1e6,
        "keys": dbsize,
    }
    if name.startswith(("add_many", "apply", "prep")):
        out["docs"] = index.count()[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200_000, help="documents per variant")
    parser.add_argument("--batch", type=int, default=1000, help="documents per round trip")
    parser.add_argument("--only", default=",".join(VARIANTS), help="comma-separated variants, in order")
    parser.add_argument("--repeat", type=int, default=1, help="run the list of variants this many times")
    args = parser.parse_args()
    fps = corpus.fingerprints(args.n)
    with corpus.server() as server:
        client = server.client()
        corpus.pin(0)
        print(
            f"{'variant':<14}{'fps/s':>10}{'server us/doc':>15}{'script us/doc':>15}"
            f"{'client us/doc':>15}  keys"
        )
        results: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.repeat):
            for name in args.only.split(","):
                r = measure(name, client, fps, args.batch)
                results.setdefault(name, []).append(r)
                print(_row(name, r) + (f" docs={r['docs']:,}" if "docs" in r else ""), flush=True)
        if args.repeat > 1:
            print("best of each column over the repeats (the machine is shared: the least disturbed run):")
            for name, runs in results.items():
                best = {
                    "fps_s": max(r["fps_s"] for r in runs),
                    "server_us": min(r["server_us"] for r in runs),
                    "script_us": min((r["script_us"] for r in runs), key=lambda v: v or 0),
                    "client_us": min(r["client_us"] for r in runs),
                    "keys": runs[-1]["keys"],
                }
                print(_row(name, best))


def _row(name: str, r: dict[str, Any]) -> str:
    script = f"{r['script_us']:.2f}" if r["script_us"] is not None else "-"
    return (
        f"{name:<14}{r['fps_s']:>10,.0f}{r['server_us']:>15.2f}{script:>15}{r['client_us']:>15.2f}"
        f"  {r['keys']:,}"
    )


if __name__ == "__main__":
    main()
