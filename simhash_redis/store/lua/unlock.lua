-- Releases a bucket lock only if this worker still holds it (its token), so an expired lock that
-- another worker has taken since is left alone. KEYS[1] = the lock; ARGV[1] = the token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
