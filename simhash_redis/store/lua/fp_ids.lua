-- Adds ('+') or removes ('-') one id in the netstring list of ids having a fingerprint; idempotent.
-- With 'm', sets the sketch of an id listed with the fingerprint unless it has one (an upgrade moving
-- format 1's sketches: a sketch written since by a document write is newer). Used on Redis Cluster (and
-- by upgrades and repairs), one key per call. KEYS[1] = the fingerprint-map hash; ARGV = op, fp, id, then
-- in an index with a retention window the period's expiry (Unix ms, set on a key that has none; else
-- ''), then in verified mode the id's MinHash sketch ('' for none). The sketch is set with the id
-- (field 's:' .. fp: groups of a sketch and the netstring list of the ids having it), in the same
-- step, and leaves with it.
-- Returns 1 when the id list changed ('m': when the id is listed with the fingerprint), else 0.

-- The netstring of `raw` at `pos`: its item and the position after it; nil where the value is malformed
-- (a length of digits only: a sign or a space would stall the parse). verify() reports such values.
local function item_at(raw, pos)
  local colon = string.find(raw, ':', pos, true)
  local digits = colon and string.sub(raw, pos, colon - 1)
  local len = digits and string.find(digits, '^%d+$') and tonumber(digits)
  if not len or colon + len > #raw then
    return nil
  end
  return string.sub(raw, colon + 1, colon + len), colon + len + 1
end
local function netstring(item)
  return #item .. ':' .. item
end
-- Where the netstring `item` is in the list `raw` (its start and the position after it), or nil. A plain
-- search first: an item that is not there, the common case of an attach, costs no walk in Lua.
local function find_item(raw, item)
  if not string.find(raw, netstring(item), 1, true) then
    return nil
  end
  local pos = 1
  while pos <= #raw do
    local value, after = item_at(raw, pos)
    if not value then
      return nil
    end
    if value == item then
      return pos, after
    end
    pos = after
  end
  return nil
end
-- The netstring list `raw` without `item` (a malformed list cut at the fault).
local function without(raw, item)
  local kept, pos = {}, 1
  while pos <= #raw do
    local value, after = item_at(raw, pos)
    if not value then
      break
    end
    if value ~= item then
      kept[#kept + 1] = netstring(value)
    end
    pos = after
  end
  return table.concat(kept)
end

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
  local groups, had, joined, pos = {}, nil, false, 1
  while prev and pos <= #prev do
    local group, middle = item_at(prev, pos)
    local ids, after
    if group then
      ids, after = item_at(prev, middle)
    end
    if not ids then
      break
    end
    local left, start, after_id = ids, find_item(ids, id)
    if start then
      left = string.sub(ids, 1, start - 1) .. string.sub(ids, after_id)
      if not had then
        had = group
      end
    end
    if group == value and not joined then
      left = left .. netstring(id)
      joined = true
    end
    if left ~= '' then
      groups[#groups + 1] = netstring(group) .. netstring(left)
    end
    pos = after
  end
  if had == value or (not had and value == '') or (had and only_new) then
    return
  end
  if not joined and value ~= '' then
    groups[#groups + 1] = netstring(value) .. netstring(netstring(id))
  end
  local stored = table.concat(groups)
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
