-- Takes a bucket lock for this worker, or keeps it: a lock it already holds (its token) gets a new
-- time to live, so a lock kept from an earlier round stays and a resent call after a lost reply still
-- answers 1. With ARGV[3] = 'renew', only a lock it still holds is extended: one that expired meanwhile
-- answers 0 even if free, since another worker may have held it in between.
-- Refused, it answers the holder's token (0 for a free lock in renew mode), so that a waiter tells a
-- lock that changes hands (others progress) from one held all along.
-- KEYS[1] = the lock; ARGV[1] = the token; ARGV[2] = the time to live in milliseconds.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] or (not holder and ARGV[3] ~= 'renew') then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return holder or 0
