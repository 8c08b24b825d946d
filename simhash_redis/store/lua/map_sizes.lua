-- The sizes of map buckets that share one hash slot, for count() on a cluster (which keeps no counts
-- hash): KEYS = id-map buckets, then fingerprint-map buckets; ARGV[1] = how many of KEYS are id-map
-- buckets; ARGV[2] = '1' where the fingerprint map also holds sketches (fields 's:' .. fingerprint, not
-- counted). Returns {documents, fingerprints}.
local ids = tonumber(ARGV[1])
local docs, fps = 0, 0
for i = 1, ids do
  docs = docs + redis.call('HLEN', KEYS[i])
end
for i = ids + 1, #KEYS do
  if ARGV[2] == '1' then
    for _, field in ipairs(redis.call('HKEYS', KEYS[i])) do
      if string.sub(field, 1, 2) ~= 's:' then
        fps = fps + 1
      end
    end
  else
    fps = fps + redis.call('HLEN', KEYS[i])
  end
end
return {docs, fps}
