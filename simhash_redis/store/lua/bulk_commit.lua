-- Commits the documents of a verified index's bulk window (store/bulk.py, step 5): each id is attached
-- to its fingerprint's netstring list unless the list holds it (bulk_fp.lua's work), and its sketch is
-- set beside it (bulk_sketch.lua's) when the id lacks it or has another, in the same atomic step. Step
-- 3a set the sketches already; a concurrent writer that removed or replaced the id since (its write
-- script detaches the id and deletes its sketch) would otherwise leave a committed id without one.
-- Running a call again changes nothing more.
--
-- KEYS = fingerprint-map hashes (on a cluster, one per call), then on a standalone server the counts
-- hash; ARGV = for each fingerprint-map key in turn: the number m of its ids, then m quadruples: a
-- fingerprint, the field of its sketches, an id's netstring, and the id's sketch in the field's stored
-- form (as bulk_sketch.lua's; '' stores the id without one).
-- Returns {created: the fingerprints that got an entry they did not have, dropped: flat (fingerprint,
-- sketch) of each sketch replaced that no other id of the fingerprint keeps (the client drops its band
-- values), set: the ids whose sketch this call had to set (the client puts back their band values)}.

--! include netstrings

local groups, a = 0, 1
while a <= #ARGV do
  groups, a = groups + 1, a + 1 + 4 * tonumber(ARGV[a])
end
local counts = #KEYS > groups and KEYS[#KEYS]
if counts then
  -- An increment by nothing first refuses a counts key of the wrong type, an ACL user without HINCRBY
  -- or a server out of memory before anything is written.
  redis.call('HINCRBY', counts, 'fingerprints', 0)
end

-- Each id of the netstring list `raw`, as a set of their netstrings.
local function listed_in(raw)
  local set, pos = {}, 1
  while pos <= #raw do
    local id, after = item_at(raw, pos)
    if not id then
      break -- malformed: read up to the fault (verify() reports it)
    end
    set[string.sub(raw, pos, after - 1)] = true
    pos = after
  end
  return set
end

-- The values of the m fingerprints and sketch fields of the quadruples from ARGV[first], in turn, by
-- HMGET in slices (unpack() of thousands of values would overflow Lua's C stack). Each distinct field is
-- read once: copies of one page name its fingerprint and sketches by the thousand, and each read of
-- their long values would copy them.
local function read(key, first, m)
  if m == 1 then
    return redis.call('HMGET', key, ARGV[first], ARGV[first + 1])
  end
  local fields, slot, where = {}, {}, {}
  for i = 0, m - 1 do
    for j = 0, 1 do
      local field = ARGV[first + 4 * i + j]
      local n = slot[field]
      if not n then
        fields[#fields + 1] = field
        n = #fields
        slot[field] = n
      end
      where[2 * i + j + 1] = n
    end
  end
  local values = {}
  for from = 1, #fields, 1000 do
    local part = redis.call('HMGET', key, unpack(fields, from, math.min(from + 999, #fields)))
    for j = 1, #part do
      values[from + j - 1] = part[j]
    end
  end
  local got = {}
  for p = 1, 2 * m do
    got[p] = values[where[p]]
  end
  return got
end

local created, dropped, set = 0, {}, {}
a = 1
-- A key that fails (of the wrong type, or one the ACL user may not write) stops the call, but the
-- keys before it stay written: their entries are counted all the same, then the error is returned.
local ok, err = pcall(function()
  for k = 1, groups do
    local key, m = KEYS[k], tonumber(ARGV[a])
    local got = read(key, a + 1, m)
    -- The common case, a new fingerprint with the sketch 3a set: one HSET.
    if m == 1 and not got[1] and (got[2] or '') == ARGV[a + 4] then
      redis.call('HSET', key, ARGV[a + 1], ARGV[a + 3])
      created = created + 1
    else
      local values, listed, order, new = {}, {}, {}, 0
      -- The ids appended to each fingerprint's list, joined once at the end: appending each to a list of
      -- thousands (copies of one page) copied it each time.
      local more = {}
      local function change(field, value)
        if values[field] == nil then
          order[#order + 1] = field
        end
        values[field] = value
      end
      -- A sketch field's one group, while the field is unchanged: its sketch and its ids' netstrings
      -- (copies of one page share one sketch, which step 3a set: each id found there, not spliced).
      local single = {}
      local function in_group(field, cur, sketch, item)
        local one = single[field]
        if not one or one.cur ~= cur then
          local group, ids, after = group_at(cur, 1)
          one = { cur = cur }
          if group and after == #cur + 1 then
            one.sketch, one.ids = group, listed_in(ids)
          end
          single[field] = one
        end
        return one.sketch == sketch and one.ids[item]
      end
      for i = 1, m do
        local at = a + 4 * i - 3
        local fp, field, item, value = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
        -- The id into its fingerprint's list.
        local list = values[fp] or got[2 * i - 1]
        if not list then
          change(fp, item)
          listed[fp] = { [item] = true }
          new = new + 1
        else
          local ids = listed[fp] or listed_in(list)
          listed[fp] = ids
          if not ids[item] then
            ids[item] = true
            local tail = more[fp]
            if not tail then
              tail = {}
              more[fp] = tail
              change(fp, list)
            end
            tail[#tail + 1] = item
          end
        end
        -- Its sketch, unless the field holds exactly it (the common case: the fingerprint's only id), or
        -- its one group has it with this id.
        local cur = values[field] or got[2 * i] or ''
        local sketch = value ~= '' and item_at(value, 1) or ''
        if cur ~= value and not (sketch ~= '' and in_group(field, cur, sketch, item)) then
          local id = item_at(item, 1)
          local rest, had, kept = sketches_with(cur, id, sketch)
          if had ~= sketch and (had or sketch ~= '') then
            if had and not kept then
              dropped[#dropped + 1] = string.sub(field, 3)
              dropped[#dropped + 1] = had
            end
            change(field, rest)
            set[#set + 1] = id
          end
        end
      end
      for fp, tail in pairs(more) do
        values[fp] = values[fp] .. table.concat(tail)
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
      created = created + new -- once written: a refused HSET counts nothing
    end
    a = a + 1 + 4 * m
  end
end)
if counts and created > 0 then
  redis.call('HINCRBY', counts, 'fingerprints', created)
end
if not ok then
  return redis.error_reply(type(err) == 'table' and err.err or tostring(err))
end
return { created, dropped, set }
