-- Applies a batch of document writes atomically: add, replace or remove ids.
--
-- ARGV[1] = number of tables T; then per document three values: id, new, old.
--   new: the stored fingerprint to give the id ('' removes the id).
--   old: the fingerprint the client believes the id has now ('' = none).
-- KEYS[1] = the counts hash; then per document: the id-map hash, [if new ~= '': the fingerprint-map
-- hash of new and its T table keys], [if old ~= '' and old ~= new: the same for old].
--
-- A document whose current fingerprint is not `old` is left untouched and reported as 'c' .. current,
-- so the client can resend it with the right keys. Each document is checked against the data before it
-- is changed, so re-running the script after a lost reply changes nothing more: the counts move only
-- when an id really appears or disappears.
local T = tonumber(ARGV[1])
local counts = KEYS[1]

local function netstring(id)
  return #id .. ':' .. id
end

-- The netstring list `raw` without `id`, and whether `id` was in it.
local function without(raw, id)
  local kept, found, pos, n = {}, false, 1, #raw
  while pos <= n do
    local colon = string.find(raw, ':', pos, true)
    local len = tonumber(string.sub(raw, pos, colon - 1))
    local item = string.sub(raw, colon + 1, colon + len)
    if item == id then
      found = true
    else
      kept[#kept + 1] = netstring(item)
    end
    pos = colon + len + 1
  end
  return table.concat(kept), found
end

local out = {}
local doc_delta, fp_delta = 0, 0
local k = 2
for a = 2, #ARGV, 3 do
  local id, new, old = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local id_key = KEYS[k]
  k = k + 1
  local new_at, old_at
  if new ~= '' then
    new_at = k
    k = k + 1 + T
  end
  if old ~= '' and old ~= new then
    old_at = k
    k = k + 1 + T
  end
  local cur = redis.call('HGET', id_key, id) or ''
  if cur == new then
    out[#out + 1] = (new == '') and 'n' or 'u'
  elseif cur ~= old then
    out[#out + 1] = 'c' .. cur
  else
    if old ~= '' then
      local fp_key = KEYS[old_at]
      local rest = without(redis.call('HGET', fp_key, old) or '', id)
      if rest == '' then
        redis.call('HDEL', fp_key, old)
        for t = 1, T do
          redis.call('SREM', KEYS[old_at + t], old)
        end
        fp_delta = fp_delta - 1
      else
        redis.call('HSET', fp_key, old, rest)
      end
    end
    if new ~= '' then
      redis.call('HSET', id_key, id, new)
      local fp_key = KEYS[new_at]
      local raw = redis.call('HGET', fp_key, new)
      if raw then
        local _, found = without(raw, id)
        if not found then
          redis.call('HSET', fp_key, new, raw .. netstring(id))
        end
      else
        redis.call('HSET', fp_key, new, netstring(id))
        for t = 1, T do
          redis.call('SADD', KEYS[new_at + t], new)
        end
        fp_delta = fp_delta + 1
      end
    else
      redis.call('HDEL', id_key, id)
    end
    if old == '' then
      doc_delta = doc_delta + 1
      out[#out + 1] = 'a'
    elseif new == '' then
      doc_delta = doc_delta - 1
      out[#out + 1] = 'd'
    else
      out[#out + 1] = 'r'
    end
  end
end
if doc_delta ~= 0 then
  redis.call('HINCRBY', counts, 'docs', doc_delta)
end
if fp_delta ~= 0 then
  redis.call('HINCRBY', counts, 'fingerprints', fp_delta)
end
return out
