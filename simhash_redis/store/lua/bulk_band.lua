-- Adds fingerprints to band values of verified mode, for a bulk load (store/bulk.py): each packed
-- fingerprint is appended to its band value unless the value holds it already (band_member.lua's '+',
-- for many at once), so running a call again changes nothing more. A bulk load writes them before it
-- attaches the ids (bulk_fp.lua, the commit point): readers skip a band member that has no ids.
--
-- KEYS = band bucket hashes (on a cluster, one per call); ARGV = for each key in turn: the number m of
-- its entries, then m pairs: a band's bytes (the field) and a packed fingerprint (all of one width).
-- Returns how many values grew.

local grown = 0
local a = 1
for k = 1, #KEYS do
  local key, m = KEYS[k], tonumber(ARGV[a])
  -- A key with one entry (most, in a window smaller than the band tables): one HSETNX, unless the
  -- field exists.
  local size = m
  if m == 1 and redis.call('HSETNX', key, ARGV[a + 1], ARGV[a + 2]) == 1 then
    grown, m = grown + 1, 0
  end
  local got = {}
  -- In slices: unpack() of thousands of values would overflow Lua's C stack.
  for from = 1, m, 1000 do
    local fields = {}
    for i = from, math.min(from + 999, m) do
      fields[#fields + 1] = ARGV[a + 2 * i - 1]
    end
    local part = redis.call('HMGET', key, unpack(fields))
    for j = 1, #fields do
      got[from + j - 1] = part[j]
    end
  end
  -- Each field's value as it grows, and the members of those read non-empty (a band of a site's
  -- template holds thousands of fingerprints: one pass over it, not one per entry).
  local values, members, changed, order = {}, {}, {}, {}
  local function mark(field)
    if not changed[field] then
      changed[field] = true
      order[#order + 1] = field
    end
  end
  for i = 1, m do
    local field, fp = ARGV[a + 2 * i - 1], ARGV[a + 2 * i]
    if values[field] == nil then
      local cur = got[i] or ''
      if #cur % #fp ~= 0 then
        cur = ''  -- malformed (verify reports it): started again, as band_member.lua does
        mark(field)
      end
      local listed = {}
      for pos = 1, #cur, #fp do
        listed[string.sub(cur, pos, pos + #fp - 1)] = true
      end
      values[field], members[field] = cur, listed
    end
    local listed = members[field]
    if not listed[fp] then
      listed[fp] = true
      values[field] = values[field] .. fp
      mark(field)
    end
  end
  local sets = {}
  for _, field in ipairs(order) do
    sets[#sets + 1] = field
    sets[#sets + 1] = values[field]
  end
  grown = grown + #order
  for from = 1, #sets, 1000 do
    redis.call('HSET', key, unpack(sets, from, math.min(from + 999, #sets)))
  end
  a = a + 1 + 2 * size
end
return grown
