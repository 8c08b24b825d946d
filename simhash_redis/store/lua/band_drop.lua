-- Takes a fingerprint out of one band value of verified mode, unless a sketch still kept for it (one of
-- its other ids') holds the same values in that band; idempotent, and atomic against the writes that
-- add it (a standalone server: both keys in one script).
-- KEYS[1] = the band's bucket hash, KEYS[2] = the fingerprint's map hash; ARGV = the fingerprint (as
-- stored), the band's first byte in a sketch (from 0), the band's bytes (its field), the packed
-- fingerprint.

--! include netstrings
--! include bands

local fp, offset, field, packed = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local raw = redis.call('HGET', KEYS[2], 's:' .. fp) or ''
local pos = 1
while pos <= #raw do
  local sketch, _, after = group_at(raw, pos)
  if not sketch then
    break
  end
  if string.sub(sketch, offset + 1, offset + #field) == field then
    return 0
  end
  pos = after
end
return remove_packed(KEYS[1], field, redis.call('HGET', KEYS[1], field), packed)
