-- Adds ('+') or removes ('-') one id in the netstring list of ids having a fingerprint; idempotent.
-- With 'm', sets the sketch of an id listed with the fingerprint unless it has one (a repair moving a
-- misplaced sketch: one written since by a document write is newer). Used on Redis Cluster (and by
-- repairs), one key per call. KEYS[1] = the fingerprint-map hash; ARGV = op, fp, id, then
-- in an index with a retention window the period's expiry (Unix ms, set on a key that has none; else
-- ''), then in verified mode the id's MinHash sketch ('' for none). The sketch is set with the id
-- (field 's:' .. fp: groups of a sketch and the netstring list of the ids having it), in the same
-- step, and leaves with it.
-- Returns 1 when the id list changed ('m': when the id is listed with the fingerprint), else 0.

--! include netstrings

local op, fp, id, expire_at, sketch = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local raw = redis.call('HGET', KEYS[1], fp) or ''
local found = find_item(raw, id) ~= nil

-- The id's sketch: set to `value` ('' removes it), the id moved to the group of that sketch (a new group
-- goes last); with `only_new`, only if the id has none. Nothing is written when nothing changes.
local function set_sketch(value, only_new)
  local field = 's:' .. fp
  local prev = redis.call('HGET', KEYS[1], field)
  if not prev and value == '' then
    return
  end
  local stored, had = sketches_with(prev or '', id, value)
  if had == value or (not had and value == '') or (had and only_new) then
    return
  end
  if stored == '' then
    redis.call('HDEL', KEYS[1], field)
  else
    redis.call('HSET', KEYS[1], field, stored)
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
  redis.call('HSET', KEYS[1], fp, raw .. netstring(id))
  if expire_at and expire_at ~= '' and redis.call('PTTL', KEYS[1]) == -1 then
    redis.call('PEXPIREAT', KEYS[1], expire_at)
  end
  return 1
end
if op == '-' and found then
  local rest = without(raw, id)
  if rest == '' then
    redis.call('HDEL', KEYS[1], fp)
  else
    redis.call('HSET', KEYS[1], fp, rest)
  end
  return 1
end
return 0
