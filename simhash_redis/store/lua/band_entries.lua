-- The band values of one verified query and, when they list few fingerprints, the fingerprint-map entry
-- of each one: a single verified near() in one round trip. Read-only; standalone servers only (the
-- entries' hashes are known only once the values are read, so they are not in KEYS).
-- KEYS = the query's band hashes; ARGV = their fields (the band values' names), then the fingerprint
-- map's key prefix, its number of buckets, the most fingerprints (counted with repeats) whose entries are
-- read, and the query's own fingerprint packed (its entry is read beside the script). Band values are
-- packed 8-byte little-endian fingerprints (`codec.pack_fps`).
-- Returns each band value ('' for none), then, unless they list more fingerprints than that (or a value
-- is not whole fingerprints), for each distinct fingerprint in the order met but the query's own: its
-- stored form (the signed decimal text of `codec.encode_fp`), its ids and its sketches ('' for none:
-- RESP3 would turn false into a boolean, and this library never stores an empty value).

local bands = #KEYS
local prefix, buckets, bound = ARGV[bands + 1], tonumber(ARGV[bands + 2]), tonumber(ARGV[bands + 3])
local out, total, whole = {}, 0, true
for i = 1, bands do
  local value = redis.call('HGET', KEYS[i], ARGV[i]) or ''
  out[i] = value
  total = total + #value
  whole = whole and #value % 8 == 0
end
if not whole or total > 8 * bound then
  return out
end

-- Lua numbers are doubles: the 64 bits are kept as two 32-bit halves, every step exact (below 2^53).
local TWO32 = 4294967296
-- With buckets dividing 2^32 (a power of two, as by default), the bucket is the low half's.
local low_only = TWO32 % buckets == 0

-- The stored form of the fingerprint packed at `at`, and its map hash (`KeySchema.fp_bucket`: the
-- unsigned value modulo `buckets`).
local function entry_of(value, at)
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(value, at, at + 7)
  local lo = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
  local hi = b5 + b6 * 256 + b7 * 65536 + b8 * 16777216
  local bucket = lo % buckets
  if not low_only then -- buckets <= 2^30: each product stays below 2^46
    bucket = (((hi % buckets) * 65536 % buckets) * 65536 % buckets + lo) % buckets
  end
  local key = string.format('%s%d', prefix, bucket)
  local sign = ''
  if hi >= 2147483648 then -- negative: its magnitude is 2^64 minus the unsigned value
    sign = '-'
    if lo == 0 then
      hi = TWO32 - hi
    else
      hi, lo = TWO32 - 1 - hi, TWO32 - lo
    end
  end
  if hi < 2097152 then -- below 2^53: exact as one double
    return string.format('%s%.0f', sign, hi * TWO32 + lo), key
  end
  -- The last 6 digits apart: (hi % 10^6) * 2^32 + lo < 2^53.
  local rest = (hi % 1000000) * TWO32 + lo
  local head = math.floor(hi / 1000000) * TWO32 + math.floor(rest / 1000000)
  return string.format('%s%.0f%06d', sign, head, rest % 1000000), key
end

local seen, n = { [ARGV[bands + 4]] = true }, bands
for i = 1, bands do
  local value = out[i]
  for at = 1, #value, 8 do
    local packed = string.sub(value, at, at + 7)
    if not seen[packed] then
      seen[packed] = true
      local fp, key = entry_of(value, at)
      local found = redis.call('HMGET', key, fp, 's:' .. fp)
      out[n + 1], out[n + 2], out[n + 3] = fp, found[1] or '', found[2] or ''
      n = n + 3
    end
  end
end
return out
