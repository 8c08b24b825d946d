-- Adds ('+') a fingerprint to a band value of verified mode unless it is there, or removes ('-') it;
-- idempotent, one key (a cluster's writes and repairs; a standalone server's write script adds in its
-- own step). KEYS[1] = the band's bucket hash; ARGV = op, the band's bytes (the field), the packed
-- fingerprint. Returns 1 when the value changed, else 0.

--! include bands

local op, field, fp = ARGV[1], ARGV[2], ARGV[3]
local value = redis.call('HGET', KEYS[1], field) or ''
local at = packed_at(value, fp)
if op == '+' and not at then
  redis.call('HSET', KEYS[1], field, value .. fp)
  return 1
end
if op == '-' and at then
  local rest = packed_without(value, fp)
  if rest == '' then
    redis.call('HDEL', KEYS[1], field)
  else
    redis.call('HSET', KEYS[1], field, rest)
  end
  return 1
end
return 0
