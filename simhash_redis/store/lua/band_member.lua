-- Adds ('+') a fingerprint to a band value of verified mode unless it is there, or removes ('-') it;
-- idempotent, one key (a cluster's writes and repairs; a standalone server's write script adds in its
-- own step). KEYS[1] = the band's bucket hash; ARGV = op, the band's bytes (the field), the packed
-- fingerprint, and in an index with a retention window the period's expiry (Unix ms, set on a key that
-- has none). Returns 1 when the value changed, else 0.

--! include bands

local op, field, fp = ARGV[1], ARGV[2], ARGV[3]
local value = redis.call('HGET', KEYS[1], field)
if op == '+' and value and #value % #fp ~= 0 then
  value = false  -- malformed (verify reports it): the repair that puts its members back starts it again
end
local expire_at = ARGV[4]
if op == '+' and not (value and packed_at(value, fp)) then
  redis.call('HSET', KEYS[1], field, (value or '') .. fp)
  if expire_at and redis.call('PTTL', KEYS[1]) == -1 then
    redis.call('PEXPIREAT', KEYS[1], expire_at)
  end
  return 1
end
if op == '-' then
  return remove_packed(KEYS[1], field, value, fp)
end
return 0
