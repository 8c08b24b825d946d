-- Adds ('+') or removes ('-') one id in the netstring list of ids having a fingerprint; idempotent.
-- With 'm', sets the sketch of an id listed with the fingerprint unless it has one (an upgrade moving
-- format 1's sketches: a sketch written since by a document write is newer). Used on Redis Cluster (and
-- by upgrades and repairs), one key per call. KEYS[1] = the fingerprint-map hash; ARGV = op, fp, id, then
-- in an index with a retention window the period's expiry (Unix ms, set on a key that has none; else
-- ''), then in verified mode the id's MinHash sketch ('' for none). The sketch is set with the id
-- (field 's:' .. fp, netstring pairs of id and sketch), in the same step, and leaves with it.
-- Returns the number of ids left with the fingerprint ('m': whether the id is listed with it).

-- A netstring's length: its digits only (a sign, a fraction or a space would stall the parse).
local function digits(s, from, to)
  local text = string.sub(s, from, to)
  return string.find(text, '^%d+$') and tonumber(text)
end
local op, fp, id, expire_at, sketch = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local raw = redis.call('HGET', KEYS[1], fp) or ''
local kept, found, count, pos, n = {}, false, 0, 1, #raw
while pos <= n do
  local colon = string.find(raw, ':', pos, true)
  local len = colon and digits(raw, pos, colon - 1)
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

-- The id's sketch: set to `value` ('' removes it) among the netstring pairs of the fingerprint's ids,
-- in its place (a new pair goes last); with `only_new`, only if the id has none. Nothing is written
-- when nothing changes.
local function set_sketch(value, only_new)
  local field = 's:' .. fp
  local prev = redis.call('HGET', KEYS[1], field)
  if not prev and value == '' then
    return
  end
  local pairs_kept, had, at, size = {}, nil, 1, #(prev or '')
  while prev and at <= size do
    local c1 = string.find(prev, ':', at, true)
    local l1 = c1 and digits(prev, at, c1 - 1)
    local c2 = l1 and string.find(prev, ':', c1 + l1 + 1, true)
    local l2 = c2 and digits(prev, c1 + l1 + 1, c2 - 1)
    if not l2 or c2 + l2 > size then
      break
    end
    if string.sub(prev, c1 + 1, c1 + l1) ~= id then
      pairs_kept[#pairs_kept + 1] = string.sub(prev, at, c2 + l2)
    elseif not had then
      had = string.sub(prev, c2 + 1, c2 + l2)
      if value ~= '' then
        pairs_kept[#pairs_kept + 1] = #id .. ':' .. id .. #value .. ':' .. value
      end
    end
    at = c2 + l2 + 1
  end
  if had == value or (not had and value == '') or (had and only_new) then
    return
  end
  if not had then
    pairs_kept[#pairs_kept + 1] = #id .. ':' .. id .. #value .. ':' .. value
  end
  local rest = table.concat(pairs_kept)
  if rest == '' then
    redis.call('HDEL', KEYS[1], field)
  else
    redis.call('HSET', KEYS[1], field, rest)
  end
end

if op == 'm' then
  -- 1 when the id is listed here (its sketch moved, or a newer one kept), else 0: the old entry stays.
  if found and sketch ~= '' then
    set_sketch(sketch, true)
  end
  return found and 1 or 0
end
if op == '+' and sketch then
  set_sketch(sketch, false)
elseif op == '-' then
  set_sketch('', false)
end
if op == '+' and not found then
  redis.call('HSET', KEYS[1], fp, raw .. #id .. ':' .. id)
  if expire_at and expire_at ~= '' and redis.call('PTTL', KEYS[1]) == -1 then
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
