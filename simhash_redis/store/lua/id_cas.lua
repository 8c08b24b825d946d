-- Sets (or removes) one document id's fingerprint in the id map if it still has the expected one.
-- Used on Redis Cluster, where a document's keys live in different slots and one script cannot
-- touch them all: this is the commit point of a document's write there.
-- KEYS[1] = the id-map hash; ARGV = id, new ('' removes), old ('' = none expected).
-- Returns 'u' unchanged, 'n' nothing to remove, 'c' .. current on a mismatch, else 'a', 'r' or 'd'.
local id, new, old = ARGV[1], ARGV[2], ARGV[3]
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
return (old == '') and 'a' or 'r'
