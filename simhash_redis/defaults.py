"""Every default value of simhash-redis, in one place."""

from __future__ import annotations

#: Fingerprint width in bits; 32 and 128 are supported too.
F = 64
#: Supported fingerprint widths.
SUPPORTED_F = (32, 64, 128)
#: Maximum Hamming distance an index answers for.
K = 3
#: Prefix of every Redis key the library writes: ``{PREFIX}:{name}:...``.
PREFIX = "simhash"
#: Feature extraction: shingles of this many tokens (a CJK character is one token).
SHINGLE_SIZE = 3
#: Default feature kind, see `simhash_redis.fingerprinting.tokens.FEATURE_KINDS`.
FEATURES = "shingles"
#: Seed of every xxhash call: fixed, so fingerprints are identical on every machine and process.
SEED = 0
#: New indexes whose layout makes a query read back this share of the fingerprints (`Layout.read_fraction`)
#: are refused, and `plan` never recommends one.
MAX_READ_FRACTION = 0.25
#: Number of hash buckets for the id map; each stays a compact listpack while it holds <= 128 ids.
ID_BUCKETS = 1 << 17
#: The verified mode's Jaccard threshold when none is given (F1 0.983 at 0.8, docs/quality.md).
THRESHOLD = 0.8
#: Documents per pipelined write batch in add_many / load.
BATCH_SIZE = 1000
#: Longest document id accepted, in UTF-8 bytes.
MAX_ID_BYTES = 512
#: Socket timeout in seconds for every Redis command; a stalled server raises RedisTimeout.
SOCKET_TIMEOUT = 10.0
#: Connect timeout in seconds.
CONNECT_TIMEOUT = 5.0
#: Retries after a connection error or timeout, with exponential backoff.
RETRIES = 3
#: Backoff base and cap in seconds.
BACKOFF_BASE = 0.05
BACKOFF_CAP = 2.0
#: Environment variable naming the Redis URL the CLI uses.
URL_ENV = "SIMHASH_REDIS_URL"
