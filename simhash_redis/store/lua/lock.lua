-- Takes a bucket lock for this worker, or keeps it: a lock it already holds (its token) gets a new
-- time to live, so a lock kept from an earlier round stays and a resent call after a lost reply still
-- answers 1. With ARGV[3] = 'hold', only a lock it still holds is kept, as ARGV[4] (its writer's record)
-- and with no time to live: the document is written under it, and a lock that expired meanwhile
-- answers 0 even if free, since another worker may have held it in between.
-- Refused, it answers the holder's token or record (0 for a free lock in hold mode), so that a waiter
-- tells a lock that changes hands (others progress) from one held all along, and finds its writer.
-- KEYS[1] = the lock; ARGV[1] = the token; ARGV[2] = the time to live in milliseconds; ARGV[3] = 'take'
-- or 'hold'; ARGV[4] = the writer's record (hold mode).
local holder = redis.call('GET', KEYS[1])
if ARGV[3] == 'hold' then
  if holder == ARGV[1] or holder == ARGV[4] then
    redis.call('SET', KEYS[1], ARGV[4])
    return 1
  end
  return holder or 0
end
if holder == ARGV[1] or not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return holder
