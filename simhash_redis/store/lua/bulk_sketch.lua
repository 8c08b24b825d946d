-- Sets sketches beside their ids in the fingerprint map, for a bulk load of a verified index
-- (store/bulk.py): each id's sketch joins the sketches of its fingerprint (field 's:' .. fingerprint of
-- the fingerprint's map hash) as write.lua's set_sketch sets it, before the id is attached to the
-- fingerprint (bulk_fp.lua, the commit point), so no reader finds an id without its sketch. An id that
-- has this sketch there already changes nothing, so running a call again changes nothing more.
--
-- KEYS = fingerprint-map hashes (on a cluster, one per call); ARGV = for each key in turn: the number m
-- of its entries, then m triples: a fingerprint (as stored), an id, its sketch (stored form; '' removes
-- the id's). Returns, flat, (fingerprint, sketch) of each sketch the call replaced and no other id of
-- that fingerprint keeps, so the client takes the fingerprint out of that sketch's band tables
-- (band_drop.lua).

--! include netstrings

-- The fields of ARGV's entries from `first`, each 's:' .. its fingerprint, read in slices (unpack() of
-- thousands of values would overflow Lua's C stack).
local function read(key, first, m)
  local got = {}
  for from = 1, m, 1000 do
    local fields = {}
    for i = from, math.min(from + 999, m) do
      fields[#fields + 1] = 's:' .. ARGV[first + 3 * (i - 1)]
    end
    local part = redis.call('HMGET', key, unpack(fields))
    for j = 1, #fields do
      got[from + j - 1] = part[j]
    end
  end
  return got
end

local dropped = {}
local a = 1
for k = 1, #KEYS do
  local key, m = KEYS[k], tonumber(ARGV[a])
  -- A key with one entry (most, in a window smaller than the map): one HSETNX, unless the field exists.
  local size, sketch = m, ARGV[a + 3]
  if m == 1 and sketch ~= '' then
    local value = netstring(sketch) .. netstring(netstring(ARGV[a + 2]))
    if redis.call('HSETNX', key, 's:' .. ARGV[a + 1], value) == 1 then
      m = 0
    end
  end
  local got = m > 0 and read(key, a + 1, m) or {}
  local values, changed, order = {}, {}, {}
  for i = 1, m do
    local at = a + 1 + 3 * (i - 1)
    local fp, id, sketch = ARGV[at], ARGV[at + 1], ARGV[at + 2]
    local field = 's:' .. fp
    local cur = values[field]
    if cur == nil then
      cur = got[i] or ''
      values[field] = cur
    end
    if cur ~= '' or sketch ~= '' then
      local rest, had, kept = sketches_with(cur, id, sketch)
      if had ~= sketch and (had or sketch ~= '') then
        if had and not kept then
          dropped[#dropped + 1] = fp
          dropped[#dropped + 1] = had
        end
        values[field] = rest
        if not changed[field] then
          changed[field] = true
          order[#order + 1] = field
        end
      end
    end
  end
  local sets, gone = {}, {}
  for _, field in ipairs(order) do
    if values[field] == '' then
      gone[#gone + 1] = field
    else
      sets[#sets + 1] = field
      sets[#sets + 1] = values[field]
    end
  end
  for from = 1, #sets, 1000 do
    redis.call('HSET', key, unpack(sets, from, math.min(from + 999, #sets)))
  end
  for from = 1, #gone, 1000 do
    redis.call('HDEL', key, unpack(gone, from, math.min(from + 999, #gone)))
  end
  a = a + 1 + 3 * size
end
return dropped
