-- Sets a field of an index's meta hash unless it is set; returns the field's value either way.
-- Never creates the meta: an index dropped meanwhile must not come back as a meta of one field.
-- KEYS[1] = the meta hash; ARGV[1] = the field, ARGV[2] = its value.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
return redis.call('HGET', KEYS[1], ARGV[1])
