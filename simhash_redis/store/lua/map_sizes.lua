-- The sizes of map buckets: KEYS = id-map buckets, then fingerprint-map buckets (on a cluster, those of
-- one hash slot, for count(), as a cluster keeps no counts hash); ARGV[1] = how many of KEYS are id-map
-- buckets; ARGV[2] = '1' where the fingerprint map also holds sketches (fields 's:' .. fingerprint, not
-- counted). Returns {documents, fingerprints}. With ARGV[3] ('1' or '0': verify on a standalone server,
-- every bucket at once), KEYS[#KEYS] is the counts hash: the reply goes on with the docs and fingerprints
-- it says, and with ARGV[3] = '1' it is set to the sizes if it differs, in the same atomic step.
local ids, last = tonumber(ARGV[1]), #KEYS
if ARGV[3] then
  last = last - 1
end
local docs, fps = 0, 0
for i = 1, ids do
  docs = docs + redis.call('HLEN', KEYS[i])
end
for i = ids + 1, last do
  if ARGV[2] == '1' then
    -- HGETALL, not HKEYS: the commands the documented minimal ACL allows (docs/security.md).
    local entries = redis.call('HGETALL', KEYS[i])
    for j = 1, #entries, 2 do
      if string.sub(entries[j], 1, 2) ~= 's:' then
        fps = fps + 1
      end
    end
  else
    fps = fps + redis.call('HLEN', KEYS[i])
  end
end
if not ARGV[3] then
  return {docs, fps}
end
local said = redis.call('HMGET', KEYS[#KEYS], 'docs', 'fingerprints')
said = {tonumber(said[1]) or 0, tonumber(said[2]) or 0}
if ARGV[3] == '1' and (said[1] ~= docs or said[2] ~= fps) then
  redis.call('HSET', KEYS[#KEYS], 'docs', docs, 'fingerprints', fps)
end
return {docs, fps, said[1], said[2]}
