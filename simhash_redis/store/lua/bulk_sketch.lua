-- Sets sketches beside their ids in the fingerprint map, for a bulk load of a verified index
-- (store/bulk.py): each id's sketch joins the sketches of its fingerprint (field 's:' .. fingerprint of
-- the fingerprint's map hash) as write.lua's set_sketch sets it, before the id is attached to the
-- fingerprint (bulk_fp.lua, the commit point), so no reader finds an id without its sketch. An id that
-- has its sketch there already changes nothing, so running a call again changes nothing more.
--
-- KEYS = fingerprint-map hashes (on a cluster, one per call); ARGV = for each key in turn: the number m
-- of its entries, then m triples: the field of a fingerprint's sketches, an id, and the id's sketch in
-- the field's stored form (`codec.encode_sketches` of the id alone: what the field holds when the id
-- is its only one; '' removes the id's sketch). Returns, flat, (fingerprint, sketch) of each sketch the
-- call replaced and no other id of that fingerprint keeps, so the client takes the fingerprint out of
-- that sketch's band tables (band_drop.lua).

--! include netstrings

local dropped = {}

-- The ids of a call joining their sketch's group in a field, kept aside and joined once per field (the
-- common case of copies of one page: one rebuild of its field, not one per id): field -> {by = sketch ->
-- the ids' netstrings, sketches = those sketches in the order met, ids = the ids}.
local pending, values = {}, nil
-- The fields this call rewrote (`sketches_with` or `flush`): no group without ids, none malformed, so that
-- joining ids once per field gives what joining each in turn gives.
local normal = {}

-- The field's value with its pending ids joined, as `sketches_with` of each in turn would make it: each
-- joins the first group of its sketch, a sketch without one makes a group after the others, a group left
-- without ids goes, and a malformed value is cut at its fault.
local function flush(field)
  local p = pending[field]
  if not p then
    return
  end
  pending[field] = nil
  normal[field] = true
  local cur, out, pos = values[field], {}, 1
  while pos <= #cur do
    local group, ids, after = group_at(cur, pos)
    if not group then
      break
    end
    local more = p.by[group]
    if more then
      ids = ids .. table.concat(more)
      p.by[group] = nil
    end
    if ids ~= '' then
      out[#out + 1] = netstring(group) .. netstring(ids)
    end
    pos = after
  end
  for _, sketch in ipairs(p.sketches) do
    local more = p.by[sketch]
    if more then
      out[#out + 1] = netstring(sketch) .. netstring(table.concat(more))
    end
  end
  values[field] = table.concat(out)
end

local a = 1
for k = 1, #KEYS do
  local key, m = KEYS[k], tonumber(ARGV[a])
  -- The values of the fields found set already, as they change.
  local changed, order = nil, nil
  values, pending, normal = nil, {}, {}
  for i = 1, m do
    local at = a + 3 * i - 2
    local field, id, value = ARGV[at], ARGV[at + 1], ARGV[at + 2]
    -- The common case, a fingerprint without sketches yet: one HSETNX.
    local fresh = value ~= '' and not (values and values[field])
    if not (fresh and redis.call('HSETNX', key, field, value) == 1) then
      if not values then
        values, changed, order = {}, {}, {}
      end
      local cur = values[field] or redis.call('HGET', key, field) or ''
      values[field] = cur
      local sketch = value ~= '' and item_at(value, 1) or ''
      local p = pending[field]
      -- An id whose netstring the field does not hold is in none of its groups: it joins its sketch's
      -- group, with nothing dropped (a false match, in a sketch's bytes, takes the general way).
      local joins = normal[field] and sketch ~= '' and not (p and p.ids[id])
      if joins and not string.find(cur, netstring(id), 1, true) then
        if not p then
          p = { by = {}, sketches = {}, ids = {} }
          pending[field] = p
        end
        local more = p.by[sketch]
        if not more then
          more = {}
          p.by[sketch] = more
          p.sketches[#p.sketches + 1] = sketch
        end
        more[#more + 1] = netstring(id)
        p.ids[id] = true
        if not changed[field] then
          changed[field] = true
          order[#order + 1] = field
        end
      else
        flush(field)
        cur = values[field]
        local rest, had, kept = sketches_with(cur, id, sketch)
        if had ~= sketch and (had or sketch ~= '') then
          if had and not kept then
            dropped[#dropped + 1] = string.sub(field, 3)
            dropped[#dropped + 1] = had
          end
          values[field] = rest
          normal[field] = true
          if not changed[field] then
            changed[field] = true
            order[#order + 1] = field
          end
        end
      end
    end
  end
  if order then
    for _, field in ipairs(order) do
      flush(field)
      if values[field] == '' then
        redis.call('HDEL', key, field)
      else
        redis.call('HSET', key, field, values[field])
      end
    end
  end
  a = a + 1 + 3 * m
end
return dropped
