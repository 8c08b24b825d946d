"""A design probe: add_if_new in one round trip, its distance check made by the write script itself.

Run from the repository root::

    python -m benchmarks.probe_lua_check [--calls 3000]

add_if_new of a new document takes two round trips: the client reads the table sets and checks the
distances, then the write script stores the document if the sets are unchanged. One round trip would
need the script to check the distances itself. Table members are stored as signed decimal text (Redis
keeps small sets of them as compact intsets) and Lua 5.1 numbers are doubles, so the script must parse
each member into two 32-bit halves before its popcounts. This fills 4 table sets as the index stores
them, 15 members each (N = 10^6 at the default layout) and 150 (N = 10^7), checks that the script's
count of members within k equals Python's, and prints the server's time per call (`INFO commandstats`)
against the same 4 SMEMBERS alone. Nothing of the library uses the script.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

import redis

from benchmarks import corpus
from simhash_redis.codec import encode_fp

K = 3

_CHECK = r"""
local q_hi, q_lo, k = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local TWO32 = 4294967296
-- A signed decimal as its 64 bits' two unsigned 32-bit halves (doubles hold every step exactly).
local function halves(s)
  local neg = string.sub(s, 1, 1) == '-'
  local hi, lo = 0, 0
  for i = neg and 2 or 1, #s do
    lo = lo * 10 + (string.byte(s, i) - 48)
    local carry = math.floor(lo / TWO32)
    lo = lo - carry * TWO32
    hi = (hi * 10 + carry) % TWO32
  end
  if neg then
    lo = (TWO32 - lo) % TWO32
    hi = (TWO32 - 1 - hi + (lo == 0 and 1 or 0)) % TWO32
  end
  return hi, lo
end
local function pop(x)
  local c = 0
  x = bit.tobit(x)
  while x ~= 0 do
    x = bit.band(x, x - 1)
    c = c + 1
  end
  return c
end
local near = 0
for t = 1, #KEYS do
  for _, m in ipairs(redis.call('SMEMBERS', KEYS[t])) do
    local hi, lo = halves(m)
    local dist = pop(bit.bxor(hi, q_hi))
    if dist <= k then
      dist = dist + pop(bit.bxor(lo, q_lo))
    end
    if dist <= k then
      near = near + 1
    end
  end
end
return near
"""


def _per_call(client: redis.Redis, command: str, send: Callable[[], object], calls: int) -> float:
    """The server's microseconds per call of `command` over `calls` calls of `send`."""
    client.config_resetstat()
    for _ in range(calls):
        send()
    return float(client.info("commandstats")[f"cmdstat_{command}"]["usec_per_call"])


def run(calls: int) -> None:
    """Fill the sets, check the script against Python, print the server's time per call."""
    rng = random.Random(3)
    with corpus.server() as server:
        client = server.client()
        sha = client.script_load(_CHECK)
        keys = [f"t{t}" for t in range(4)]
        for per in (15, 150):
            client.delete(*keys)
            query = rng.getrandbits(64)
            # A few members within k of the query, so the check has something to find.
            near = [query ^ (1 << b) for b in (0, 31, 32, 63)]
            stored = [rng.getrandbits(64) for _ in range(4 * per - len(near))] + near
            for t, key in enumerate(keys):
                client.sadd(key, *[encode_fp(fp, 64) for fp in stored[t * per : (t + 1) * per]])
            args = (query >> 32, query & 0xFFFFFFFF, K)
            expected = sum(bin(fp ^ query).count("1") <= K for fp in stored)
            assert client.evalsha(sha, len(keys), *keys, *args) == expected

            def check(args: tuple[int, int, int] = args) -> None:
                client.evalsha(sha, len(keys), *keys, *args)

            def read() -> None:
                pipe = client.pipeline(transaction=False)
                for key in keys:
                    pipe.smembers(key)
                pipe.execute()

            scripted = _per_call(client, "evalsha", check, calls)
            sets = 4 * _per_call(client, "smembers", read, calls)
            print(
                f"{4 * per:4d} members: the script's check {scripted:7.1f} us a call "
                f"({scripted / (4 * per):.2f} us a member), the 4 SMEMBERS alone {sets:5.1f} us"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=3000, help="calls timed per set size")
    run(parser.parse_args().calls)


if __name__ == "__main__":
    main()
