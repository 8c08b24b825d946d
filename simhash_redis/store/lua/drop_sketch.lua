-- Deletes a removed document's MinHash sketch, unless the id was stored again meanwhile.
-- KEYS[1] = the id-map hash, KEYS[2] = the sketch hash; ARGV[1] = the id.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return redis.call('HDEL', KEYS[2], ARGV[1])
end
return 0
