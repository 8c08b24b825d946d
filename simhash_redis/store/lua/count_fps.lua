-- The number of fingerprints in a fingerprint-map hash of a verified index: its fields but those that
-- hold a fingerprint's sketches ('s:' .. fingerprint). KEYS[1] = the hash.
local count = 0
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(field, 1, 2) ~= 's:' then
    count = count + 1
  end
end
return count
