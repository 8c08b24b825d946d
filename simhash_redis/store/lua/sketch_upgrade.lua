-- Marks a verified index of format 1 (sketches kept by id) as format 3 (sketches beside the ids in the
-- fingerprint map), being upgraded: versions that know only format 1 refuse it from now on, and every
-- opener of this version moves the old sketches (idempotent) until one finds none left and ends it.
-- KEYS[1] = the meta hash; ARGV[1] = 'begin' or 'end'.
-- Returns the meta's 'upgrading' field ('1' while sketches may be left to move), false without a meta.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
if ARGV[1] == 'begin' then
  if redis.call('HGET', KEYS[1], 'format') == '1' and redis.call('HEXISTS', KEYS[1], 'verified') == 1 then
    redis.call('HSET', KEYS[1], 'format', '3', 'upgrading', '1')
  end
else
  redis.call('HDEL', KEYS[1], 'upgrading')
end
return redis.call('HGET', KEYS[1], 'upgrading') or ''
