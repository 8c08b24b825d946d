"""Redis memory per document of a verified index: today's layout and prototype layouts, beside plain.

Run from the repository root::

    python -m benchmarks.bench_verified_memory [--n 100000] [--layouts plain,today,b,c,d] [--sketch 256]
        [--id-buckets B] [--band-buckets B]

Each layout gets its own private server (loopback, no persistence, default listpack thresholds) and N
synthetic documents: random 64-bit fingerprints, 16-byte ids (``doc:000000000042``), random sketches
and random 32-bit band values (sketches of different documents look random; at this N nearly every
band value has one member, as in a real corpus). The figure is the growth of ``used_memory`` (after
``MEMORY PURGE``) per document, split by the step that wrote it:

* ``plain``: the plain index (`SimhashIndex`, k = 3, loaded through `add_many`).
* ``default``: the library's verified index as a new one is made (`VerifiedIndex(index).add_sketched`
  with random 160-byte stored sketches: 32 band values and a 128-byte odd sketch beside the ids in the
  fingerprint map, 8 band tables of 4 values in bucketed hashes).
* ``today``: the library's verified index with 1,024-byte MinHash sketches (`MinHasher(num_perm=1024)`,
  the default before the odd sketch; band tables in bucketed hashes since, one set per band value
  before); ``today256``: the same with 256-permutation sketches.
* ``b``: the plain index, the sketch (``--sketch`` bytes, b-bit values packed) in the fingerprint map's
  bucket in chunks of at most 64 bytes (field: the fingerprint's 8 bytes and the chunk's number), and
  today's band tables (a set per band value). ``b1`` keeps the sketch whole in one field, as today.
* ``c``: as b, with the band tables in bucketed hashes: key ``b{i}:{top bits of the value}``, field the
  band value's 4 bytes, value the 8-byte fingerprints having it (sized for about 64 fields a bucket).
* ``d``: as c, with the band fields in the fingerprint map's own buckets (placed by band value, field
  the band number's byte and the value's 4 bytes): one hash family holds ids, sketches and bands.

The prototype layouts are written with pipelined redis-py commands, not by the library; each field is
written once (idempotent). The encodings of a sample of each kind of key are printed: a hash whose
values pass ``hash-max-listpack-value`` (64 bytes) or whose fields pass ``hash-max-listpack-entries``
(128) is a hashtable, several times larger than a listpack.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import redis

from benchmarks import corpus
from benchmarks.bench_load import load_index
from simhash_redis import MinHasher, SimhashIndex, VerifiedIndex
from simhash_redis.codec import encode_fp

_BANDS = 8
_PIPE = 2000  # commands per pipeline execute
_U64 = npt.NDArray[np.uint64]


def used_memory(client: redis.Redis) -> int:
    """used_memory after MEMORY PURGE (allocator caches returned), in bytes."""
    client.execute_command("MEMORY PURGE")  # type: ignore[no-untyped-call]
    return int(client.info("memory")["used_memory"])


def _send(client: redis.Redis, commands: Iterable[tuple[Any, ...]]) -> None:
    pipe = client.pipeline(transaction=False)
    for count, command in enumerate(commands, 1):
        pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        if count % _PIPE == 0:
            pipe.execute()
    pipe.execute()


def _grouped(
    keys: list[bytes], numbers: npt.NDArray[Any], pairs: Callable[[int], list[bytes]]
) -> Iterable[tuple[Any, ...]]:
    """One HSET per bucket: numbers[i] is entry i's bucket, pairs(i) its field and value."""
    order = np.argsort(numbers, kind="stable")
    sorted_numbers = numbers[order]
    bounds = np.flatnonzero(np.diff(sorted_numbers)) + 1
    for part in np.split(order, bounds):
        if not len(part):
            continue
        args: list[bytes] = []
        for i in part.tolist():
            args.extend(pairs(i))
        yield (b"HSET", keys[int(numbers[part[0]])], *args)


class Data:
    """The synthetic documents: fingerprints, ids, sketches and band values."""

    def __init__(self, n: int, sketch_bytes: int, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        self.n = n
        self.fps = corpus.fingerprints(n)
        self.fp_array: _U64 = np.array(self.fps, dtype=np.uint64)
        self.fp_bytes = [fp.to_bytes(8, "little") for fp in self.fps]
        self.sketch_bytes = sketch_bytes
        self.sketches = rng.integers(0, 256, size=(n, sketch_bytes), dtype=np.uint8)
        self.bands = rng.integers(0, 1 << 32, size=(n, _BANDS), dtype=np.uint64).astype(np.uint32)


def _fp_map_keys(index: SimhashIndex) -> list[bytes]:
    return [index.keys.fp_form.key(b) for b in range(index.keys.id_buckets)]


def write_sketches(client: redis.Redis, index: SimhashIndex, data: Data, chunk: int) -> None:
    """Each sketch in its fingerprint's fingerprint-map bucket, in fields of at most `chunk` bytes."""
    buckets = index.keys.fp_bucket_numbers(data.fp_array).astype(np.int64)
    parts = math.ceil(data.sketch_bytes / chunk)
    keys = _fp_map_keys(index)
    for c in range(parts):
        tag = bytes([c])
        column = data.sketches[:, c * chunk : (c + 1) * chunk]

        def pairs(i: int, tag: bytes = tag, column: Any = column) -> list[bytes]:
            return [data.fp_bytes[i] + tag, column[i].tobytes()]

        _send(client, _grouped(keys, buckets, pairs))


def _band_groups(data: Data, band: int) -> tuple[npt.NDArray[np.uint32], list[bytes]]:
    """The distinct values of one band and the packed fingerprints of each (collisions share a field)."""
    values = data.bands[:, band]
    order = np.argsort(values, kind="stable")
    distinct, starts = np.unique(values[order], return_index=True)
    ends = [*starts[1:].tolist(), len(order)]
    members = [
        b"".join(data.fp_bytes[j] for j in order[s:e].tolist())
        for s, e in zip(starts.tolist(), ends, strict=True)
    ]
    return distinct, members


def write_band_sets(client: redis.Redis, index: SimhashIndex, data: Data) -> None:
    """Today's band tables: one set per band value, members the stored (decimal) fingerprints."""
    base = index.keys.base.encode()
    stored = [b"%d" % (fp - (1 << 64) if fp >= 1 << 63 else fp) for fp in data.fps]

    def commands() -> Iterable[tuple[Any, ...]]:
        for band in range(_BANDS):
            for i, value in enumerate(data.bands[:, band].tolist()):
                yield (b"SADD", b"%s:b%d:%08x" % (base, band, value), stored[i])

    _send(client, commands())


def write_band_hashes(
    client: redis.Redis, index: SimhashIndex, data: Data, shared: bool, fill: int = 64
) -> int:
    """Band tables in bucketed hashes; returns the number of buckets of one family.

    Args:
        shared: in the fingerprint map's buckets (d), else a family of buckets per band (c).
        fill: the fields a bucket of a band's family holds on average (c).
    """
    base = index.keys.base.encode()
    if shared:
        count = index.keys.id_buckets
        keys = _fp_map_keys(index)
    else:
        bits = max(1, round(math.log2(max(2, data.n / fill))))
        count = 1 << bits
    for band in range(_BANDS):
        distinct, members = _band_groups(data, band)
        fields = [v.to_bytes(4, "big") for v in distinct.tolist()]
        if shared:
            numbers = (distinct.astype(np.uint64) * np.uint64(_BANDS) + np.uint64(band)) % np.uint64(count)
            tag = bytes([band])

            def pairs(
                i: int, tag: bytes = tag, fields: list[bytes] = fields, members: list[bytes] = members
            ) -> list[bytes]:
                return [tag + fields[i], members[i]]

            _send(client, _grouped(keys, numbers.astype(np.int64), pairs))
        else:
            numbers = (distinct >> np.uint32(32 - bits)).astype(np.int64)
            band_keys = [b"%s:b%d:%x" % (base, band, b) for b in range(count)]

            def own_pairs(
                i: int, fields: list[bytes] = fields, members: list[bytes] = members
            ) -> list[bytes]:
                return [fields[i], members[i]]

            _send(client, _grouped(band_keys, numbers, own_pairs))
    return count


def encodings(client: redis.Redis, pattern: str, sample: int = 3000) -> dict[str, dict[str, int]]:
    """Encodings of a sample of the keys matching `pattern`, by kind (the part after the index name)."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    seen = 0
    cursor = 0
    while seen < sample:
        cursor, keys = client.scan(cursor, match=pattern, count=1000)
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.object("ENCODING", key)
        for key, encoding in zip(keys, pipe.execute(), strict=True):
            name = key if isinstance(key, bytes) else str(key).encode()
            kind = name.split(b":")[2].rstrip(b"0123456789").decode() or "?"
            out[kind][encoding.decode() if isinstance(encoding, bytes) else str(encoding)] += 1
        seen += len(keys)
        if cursor == 0:
            break
    return {kind: dict(counter) for kind, counter in out.items()}


def _payload(reply: Any) -> int:
    """Bytes of the values in a reply (RESP framing left out)."""
    if isinstance(reply, bytes):
        return len(reply)
    if isinstance(reply, (list, tuple, set)):
        return sum(_payload(item) for item in reply)
    return 0


def lookup_reads(
    client: redis.Redis, index: SimhashIndex, layout: str, data: Data, extra: Any, sample: int = 500
) -> dict[str, float]:
    """What a lookup of a stored document's own text reads beyond the table sets (the same in every
    layout): its band tables (round trip 1), then its fingerprint's ids and sketch (round trip 2).

    Args:
        extra: the library's layouts: (the verified index, the sketches); c: the band buckets of a band.

    Returns:
        Commands and value bytes read per lookup, in each round trip.
    """
    keys = index.keys
    base = keys.base.encode()
    rows = np.random.default_rng(3).choice(data.n, size=min(sample, data.n), replace=False).tolist()
    first: list[tuple[Any, ...]] = []
    second: list[tuple[Any, ...]] = []
    for i in rows:
        fp = data.fps[i]
        stored = encode_fp(fp, 64)
        bucket = keys.fp_bucket_of(fp)
        values = data.bands[i].tolist()
        if layout.startswith("today") or layout == "default":
            verified, sketches = extra
            mode = verified.verification
            first += [(b"HGET", *place) for place in keys.band_places(sketches[i].tobytes(), mode)]
            second.append((b"HMGET", bucket, stored, keys.sketch_field(stored)))
            continue
        parts = 1 if layout == "b1" else math.ceil(data.sketch_bytes / 64)
        second.append((b"HMGET", bucket, stored, *(data.fp_bytes[i] + bytes([c]) for c in range(parts))))
        for band, value in enumerate(values):
            field = value.to_bytes(4, "big")
            if layout in ("b", "b1"):
                first.append((b"SMEMBERS", b"%s:b%d:%08x" % (base, band, value)))
            elif layout == "c":
                first.append((b"HGET", b"%s:b%d:%x" % (base, band, value >> (32 - extra)), field))
            else:
                number = (value * _BANDS + band) % keys.id_buckets
                first.append((b"HGET", keys.fp_form.key(number), bytes([band]) + field))
    out: dict[str, float] = {}
    for name, commands in (("round trip 1 (bands)", first), ("round trip 2 (ids, sketch)", second)):
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        replies = pipe.execute()
        out[f"{name}: commands"] = len(commands) / len(rows)
        out[f"{name}: bytes"] = _payload(replies) / len(rows)
    return out


def queries_per_second(
    index: SimhashIndex, verified: tuple[VerifiedIndex, Any] | None, data: Data, count: int
) -> float:
    """near_many of stored fingerprints (each finds itself), batches of 1,000, one client core: for the
    verified index `near_sketched` with a query sketch made of the stored one (the other levels empty)."""
    rows = np.random.default_rng(5).choice(data.n, size=min(count, data.n), replace=False).tolist()
    fps = [data.fps[i] for i in rows]
    started = time.perf_counter()
    for s in range(0, len(fps), 1000):
        part = fps[s : s + 1000]
        if verified is None:
            index.near_many(part)
        else:
            judge, sketches = verified
            empty = bytes(judge.hasher.query_bytes - judge.hasher.sketch_bytes)
            queries = [sketches[i].tobytes() + empty for i in rows[s : s + 1000]]
            judge.near_sketched(part, queries)
    return len(fps) / (time.perf_counter() - started)


def measure(
    layout: str,
    data: Data,
    fill: int = 64,
    near_many: int = 0,
    listpack_value: int | None = None,
    sizing: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Write one layout into a fresh server; bytes per document by step (and, for the library's layouts,
    near_many's queries/s, with `near_many` queries). `sizing`: the library's `id_buckets` and
    `band_buckets` (its defaults where absent)."""
    sizing = sizing or {}
    steps: dict[str, float] = {}
    extra: Any = None
    config = {} if listpack_value is None else {"hash-max-listpack-value": listpack_value}
    with corpus.server(**config) as server:
        client = server.client()
        start = used_memory(client)
        t0 = time.perf_counter()
        index = SimhashIndex(client, "bench", k=3, id_buckets=sizing.get("id_buckets"))
        if layout.startswith("today") or layout == "default":
            perms = 256 if layout == "today256" else 1024
            verified = (
                VerifiedIndex(index, band_buckets=sizing.get("band_buckets"))
                if layout == "default"
                else VerifiedIndex(index, MinHasher(num_perm=perms))
            )
            size = verified.hasher.sketch_bytes
            sketches = np.random.default_rng(11).integers(0, 256, size=(data.n, size), dtype=np.uint8)
            ids = [corpus.id_of(i) for i in range(data.n)]
            step = 20_000
            for s in range(0, data.n, step):
                rows = [sketches[i].tobytes() for i in range(s, min(data.n, s + step))]
                verified.add_sketched(ids[s : s + step], data.fps[s : s + step], rows)
            extra = (verified, sketches)
            steps["everything (library)"] = used_memory(client) - start
        else:
            load_index(index, data.fps)
            steps["plain index"] = used_memory(client) - start
            if layout != "plain":
                mark = used_memory(client)
                write_sketches(client, index, data, data.sketch_bytes if layout == "b1" else 64)
                steps["sketches"] = used_memory(client) - mark
                mark = used_memory(client)
                if layout in ("b", "b1"):
                    write_band_sets(client, index, data)
                else:
                    count = write_band_hashes(client, index, data, shared=layout == "d", fill=fill)
                    extra = count.bit_length() - 1  # c: the bucket bits of a band value
                steps["band tables"] = used_memory(client) - mark
        seconds = time.perf_counter() - t0
        total = used_memory(client) - start
        keys = int(client.dbsize())
        sample = encodings(client, index.keys.pattern)
        reads = lookup_reads(client, index, layout, data, extra) if layout != "plain" else {}
        rate = 0.0
        if near_many and layout in ("plain", "default"):
            rate = queries_per_second(index, extra if layout == "default" else None, data, near_many)
    return {
        "near_many_qps": rate,
        "layout": layout,
        "n": data.n,
        "bytes_per_doc": total / data.n,
        "steps_per_doc": {name: value / data.n for name, value in steps.items()},
        "keys": keys,
        "encodings": sample,
        "seconds": seconds,
        "lookup": reads,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000, help="documents")
    parser.add_argument("--layouts", default="plain,today,b,c,d", help="layouts to measure, in turn")
    parser.add_argument("--sketch", type=int, default=256, help="stored sketch bytes of layouts b, c, d")
    parser.add_argument("--fill", type=int, default=64, help="band fields a bucket holds on average (c)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument(
        "--listpack-value",
        type=int,
        metavar="BYTES",
        help="the server's hash-max-listpack-value (default 64)",
    )
    parser.add_argument(
        "--near-many",
        type=int,
        default=0,
        metavar="Q",
        help="also time Q queries of near_many (plain, default)",
    )
    parser.add_argument("--id-buckets", type=int, help="the library's id_buckets (default: its own)")
    parser.add_argument(
        "--band-buckets", type=int, help="the verified index's band_buckets (default: its own)"
    )
    args = parser.parse_args()
    sizing = {
        name: value
        for name, value in (("id_buckets", args.id_buckets), ("band_buckets", args.band_buckets))
        if value is not None
    }
    data = Data(args.n, args.sketch)
    results = []
    for layout in args.layouts.split(","):
        result = measure(layout, data, args.fill, args.near_many, args.listpack_value, sizing)
        results.append(result)
        steps = ", ".join(f"{name} {value:.0f}" for name, value in result["steps_per_doc"].items())
        print(
            f"{layout:>9} N={args.n:,}: {result['bytes_per_doc']:7.1f} B/doc ({steps}); "
            f"{result['keys']:,} keys; {result['seconds']:.0f} s; encodings {result['encodings']}",
            flush=True,
        )
        if result["near_many_qps"]:
            print(f"           near_many of stored fingerprints: {result['near_many_qps']:,.0f} queries/s")
        if result["lookup"]:
            print(
                "           a lookup reads " + ", ".join(f"{k} {v:.1f}" for k, v in result["lookup"].items())
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"args": vars(args), "results": results}, out, indent=1)


if __name__ == "__main__":
    main()
