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
local a = 1
for k = 1, #KEYS do
  local key, m = KEYS[k], tonumber(ARGV[a])
  -- The values of the fields found set already, as they change.
  local values, changed, order = nil, nil, nil
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
      local rest, had, kept = sketches_with(cur, id, sketch)
      if had ~= sketch and (had or sketch ~= '') then
        if had and not kept then
          dropped[#dropped + 1] = string.sub(field, 3)
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
  if order then
    for _, field in ipairs(order) do
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
