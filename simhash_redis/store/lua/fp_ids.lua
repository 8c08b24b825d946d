-- Adds ('+') or removes ('-') one id in the netstring list of ids having a fingerprint; idempotent.
-- Used on Redis Cluster, one key per call. KEYS[1] = the fingerprint-map hash; ARGV = op, fp, id, and
-- in an index with a retention window the period's expiry (Unix ms), set on a key that has none.
-- Returns the number of ids left with the fingerprint.
local op, fp, id, expire_at = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local raw = redis.call('HGET', KEYS[1], fp) or ''
local kept, found, count, pos, n = {}, false, 0, 1, #raw
while pos <= n do
  local colon = string.find(raw, ':', pos, true)
  local len = colon and tonumber(string.sub(raw, pos, colon - 1))
  if not len or colon + len > n then
    break  -- a malformed list is cut at the fault; verify() reports it
  end
  local item = string.sub(raw, colon + 1, colon + len)
  if item == id then
    found = true
  end
  if item ~= id or op == '+' then
    kept[#kept + 1] = #item .. ':' .. item
    count = count + 1
  end
  pos = colon + len + 1
end
if op == '+' and not found then
  redis.call('HSET', KEYS[1], fp, raw .. #id .. ':' .. id)
  if expire_at and redis.call('PTTL', KEYS[1]) == -1 then
    redis.call('PEXPIREAT', KEYS[1], expire_at)
  end
  return count + 1
end
if op == '-' and found then
  if count == 0 then
    redis.call('HDEL', KEYS[1], fp)
  else
    redis.call('HSET', KEYS[1], fp, table.concat(kept))
  end
end
return count
