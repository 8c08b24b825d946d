-- Sets an index's counts to what its data holds, in one atomic step (store/bulk.py, after a bulk load):
-- docs = the entries of every id-map bucket, fingerprints = those of every fingerprint-map bucket.
-- Atomic, so it is exact with respect to the write scripts running before and after it, which move the
-- counts only by what they change themselves. Standalone servers only (a cluster counts on demand).
-- KEYS[1] = the counts hash; KEYS[2 .. B + 1] = the id-map buckets; KEYS[B + 2 .. 2B + 1] = the
-- fingerprint-map buckets; ARGV[1] = B. Returns {docs, fingerprints}.
local b = tonumber(ARGV[1])
local docs, fps = 0, 0
for i = 2, b + 1 do
  docs = docs + redis.call('HLEN', KEYS[i])
end
for i = b + 2, 2 * b + 1 do
  fps = fps + redis.call('HLEN', KEYS[i])
end
redis.call('HSET', KEYS[1], 'docs', docs, 'fingerprints', fps)
return {docs, fps}
