"""A design probe for #15: table buckets as hashes from fingerprint to ids, beside today's sets.

Run from the repository root::

    python -m benchmarks.probe_id_tables [--n 1000000] [--queries 8000]

Today a hit at distance 1..k needs a second round trip for its ids (HGET of the fingerprint map). If
each table bucket were a hash whose values are the fingerprint's ids, the first reply would carry them.
This stores N fingerprints as today's index, then writes the same table buckets a second time as such
hashes, and prints what that would cost: memory per document, the raw socket round trip of 4 HGETALL
against 4 SMEMBERS (interleaved, same queries), the replies' sizes and hiredis's time to parse them,
and today's near() in the same loop. Nothing of the library reads or writes the hashes.
"""

from __future__ import annotations

import argparse
import statistics
import time

import hiredis

from benchmarks import corpus, percentile
from benchmarks.bench_load import load_index
from benchmarks.bench_near import RawSocket
from simhash_redis import SimhashIndex
from simhash_redis.codec import encode_fp, encode_ids
from simhash_redis.transport import wire


def _hash_key(table_key: bytes) -> bytes:
    return table_key.replace(b":t", b":h", 1)


def _replies(port: int, payload: bytes, count: int) -> bytes:
    """The raw bytes of `count` replies to `payload`."""
    import socket

    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(payload)
    data = b""
    while True:
        data += sock.recv(1 << 16)
        reader = hiredis.Reader()
        reader.feed(data)
        if all(reader.gets() is not False for _ in range(count)):
            sock.close()
            return data


def _parse_us(blobs: list[bytes], count: int) -> float:
    started = time.perf_counter_ns()
    for blob in blobs:
        reader = hiredis.Reader()
        reader.feed(blob)
        for _ in range(count):
            reader.gets()
    return (time.perf_counter_ns() - started) / 1000 / len(blobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=8000)
    args = parser.parse_args()
    with corpus.server() as server:
        client = server.client()
        index = SimhashIndex(client, "bench", k=3)
        stored = corpus.fingerprints(args.n)
        before = client.info("memory")["used_memory"]
        load_index(index, stored)
        loaded = client.info("memory")["used_memory"]
        tables = index.keys.tables
        pipe = client.pipeline(transaction=False)
        for i, fp in enumerate(stored):
            raw, ids = encode_fp(fp, 64), encode_ids([corpus.id_of(i)])
            for key in tables(fp):
                pipe.hset(_hash_key(key), raw, ids)
            if i % 2000 == 1999:
                pipe.execute()
        pipe.execute()
        hashed = client.info("memory")["used_memory"]
        sample = [tables(fp)[0] for fp in stored[:2000]]
        set_bytes = statistics.mean(client.memory_usage(key) or 0 for key in sample)
        hash_bytes = statistics.mean(client.memory_usage(_hash_key(key)) or 0 for key in sample)
        print(
            f"N={args.n:,}: today's index {(loaded - before) / args.n:.0f} B per document; the 4 table "
            f"hashes {(hashed - loaded) / args.n:.0f} B more; one table key: set {set_bytes:.0f} B "
            f"({client.object('encoding', sample[0]).decode()}), hash {hash_bytes:.0f} B "
            f"({client.object('encoding', _hash_key(sample[0])).decode()})"
        )
        corpus.pin(0)
        queries = corpus.queries(stored, args.queries)
        floor = RawSocket(server.port)
        smembers = [wire.pack(wire.CommandPerKey(b"SMEMBERS", tables(q))) for q in queries]
        hgetall = [
            wire.pack(wire.CommandPerKey(b"HGETALL", [_hash_key(k) for k in tables(q)])) for q in queries
        ]
        index.near_many(queries[:2000])
        sets_us, hashes_us, near_us = [], [], []
        clock = time.perf_counter_ns
        for i, query in enumerate(queries):
            t0 = clock()
            floor.round_trip(smembers[i])
            t1 = clock()
            floor.round_trip(hgetall[i])
            t2 = clock()
            index.near(query)
            t3 = clock()
            sets_us.append((t1 - t0) / 1000)
            hashes_us.append((t2 - t1) / 1000)
            near_us.append((t3 - t2) / 1000)
        floor.close()
        p_sets, p_hashes, p_near = (percentile(x, 50) for x in (sets_us, hashes_us, near_us))
        print(
            f"p50 raw 4 SMEMBERS {p_sets:.1f} us, raw 4 HGETALL {p_hashes:.1f} us "
            f"({p_hashes / p_sets:.2f}x), today's near() {p_near:.1f} us ({p_near / p_sets:.2f}x)"
        )
        set_replies = [_replies(server.port, smembers[i], 4) for i in range(300)]
        hash_replies = [_replies(server.port, hgetall[i], 4) for i in range(300)]
        print(
            f"reply bytes: SMEMBERS {statistics.mean(map(len, set_replies)):.0f}, HGETALL "
            f"{statistics.mean(map(len, hash_replies)):.0f}; hiredis parse {_parse_us(set_replies, 4):.2f} "
            f"/ {_parse_us(hash_replies, 4):.2f} us"
        )
        client.close()


if __name__ == "__main__":
    main()
