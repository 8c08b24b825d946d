-- Adds fingerprints to band values of verified mode, for a bulk load (store/bulk.py): each packed
-- fingerprint is appended to its band value unless the value holds it already (band_member.lua's '+',
-- for many at once), so running a call again changes nothing more. A bulk load writes them before it
-- attaches the ids (bulk_fp.lua, the commit point): readers skip a band member that has no ids.
--
-- KEYS = band bucket hashes (on a cluster, one per call); ARGV = for each key in turn: the number m of
-- its band values (each once per key), then m triples: the band's bytes (the field), a packed
-- fingerprint (all of one width), and '' or, where several fingerprints of the call share the band
-- value, all of them packed end to end (each once; the given one first).
-- Returns how many fingerprints were added.

--! include bands

-- Members from which a value's are looked up in a table rather than by a scan (a band of a site's
-- template holds thousands of fingerprints: one pass over it, not one per fingerprint).
local LISTED = 32

-- `cur` with each of `list`'s fingerprints (of `width` bytes) it does not hold appended, and how many.
local function merged(cur, list, width)
  local set
  if #cur > LISTED * width then
    set = {}
    for pos = 1, #cur, width do
      set[string.sub(cur, pos, pos + width - 1)] = true
    end
  end
  local parts, added = { cur }, 0
  for pos = 1, #list, width do
    local fp = string.sub(list, pos, pos + width - 1)
    local there
    if set then
      there = set[fp]
      set[fp] = true
    else
      there = packed_at(cur, fp)
    end
    if not there then
      parts[#parts + 1] = fp
      added = added + 1
      if not set then
        cur = cur .. fp
      end
    end
  end
  return set and table.concat(parts) or cur, added
end

local added, a = 0, 1
for k = 1, #KEYS do
  local key, m = KEYS[k], tonumber(ARGV[a])
  -- A key with one band value (most, in a window smaller than the band tables): one HSETNX, unless
  -- the value is set already.
  local list = m == 1 and (ARGV[a + 3] ~= '' and ARGV[a + 3] or ARGV[a + 2])
  if list and redis.call('HSETNX', key, ARGV[a + 1], list) == 1 then
    added = added + #list / #ARGV[a + 2]
  else
    -- In slices: unpack() of thousands of values would overflow Lua's C stack.
    local got = {}
    for from = 1, m, 1000 do
      local fields = {}
      for i = from, math.min(from + 999, m) do
        fields[#fields + 1] = ARGV[a + 3 * i - 2]
      end
      local part = redis.call('HMGET', key, unpack(fields))
      for j = 1, #fields do
        got[from + j - 1] = part[j]
      end
    end
    local sets = {}
    for i = 1, m do
      local at = a + 3 * i - 2
      local field, fp = ARGV[at], ARGV[at + 1]
      local all = ARGV[at + 2] ~= '' and ARGV[at + 2] or fp
      local cur = got[i]
      if cur and #cur % #fp ~= 0 then
        cur = false -- malformed (verify reports it): started again, as band_member.lua does
      end
      local value, more = all, #all / #fp
      if cur then
        value, more = merged(cur, all, #fp)
      end
      if value ~= got[i] then
        sets[#sets + 1] = field
        sets[#sets + 1] = value
        added = added + more
      end
    end
    for from = 1, #sets, 1000 do
      redis.call('HSET', key, unpack(sets, from, math.min(from + 999, #sets)))
    end
  end
  a = a + 1 + 3 * m
end
return added
