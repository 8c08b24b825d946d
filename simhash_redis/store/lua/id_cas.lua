-- Sets (or removes) one document id's fingerprint in the id map if it still has the expected one.
-- Used on Redis Cluster, where a document's keys live in different slots and one script cannot
-- touch them all: this is the commit point of a document's write there.
-- KEYS[1] = the id-map hash; ARGV = id, new ('' removes), old ('' = none expected); in an index with a
-- retention window also the period's length (ms), the period written into and its expiry (Unix ms): a
-- write whose period is not the one of this node's clock is refused with 'w' .. the clock's time (ms),
-- and a key written gets the period's expiry if it has none.
-- Returns 'u' unchanged, 'n' nothing to remove, 'c' .. current on a mismatch, else 'a', 'r' or 'd'.
local id, new, old = ARGV[1], ARGV[2], ARGV[3]
local period, window, expire_at = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
if period and new ~= '' then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  if math.floor(now / period) ~= window then
    return 'w' .. now
  end
end
local cur = redis.call('HGET', KEYS[1], id) or ''
if cur == new then
  return (new == '') and 'n' or 'u'
end
if cur ~= old then
  return 'c' .. cur
end
if new == '' then
  redis.call('HDEL', KEYS[1], id)
  return 'd'
end
redis.call('HSET', KEYS[1], id, new)
if expire_at and redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIREAT', KEYS[1], expire_at)
end
return (old == '') and 'a' or 'r'
