-- Creates an index's meta hash unless it exists; returns the stored fields either way.
-- KEYS[1] = the meta hash; ARGV = field, value, field, value, ...
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV))
end
return redis.call('HGETALL', KEYS[1])
