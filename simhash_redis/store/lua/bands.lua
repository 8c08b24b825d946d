-- A band value is a concatenation of packed fingerprints of one width (the width of `fp`).
-- Where `fp` starts in `value`, or nil.
local function packed_at(value, fp)
  local width = #fp
  for at = 1, #value, width do
    if string.sub(value, at, at + width - 1) == fp then
      return at
    end
  end
  return nil
end
-- `value` without `fp`.
local function packed_without(value, fp)
  local at = packed_at(value, fp)
  if not at then
    return value
  end
  return string.sub(value, 1, at - 1) .. string.sub(value, at + #fp)
end
-- Takes `fp` out of band value `field` of hash `key` (its current `value`, false if none): 1 if it was
-- there, else 0; a value left empty is deleted.
local function remove_packed(key, field, value, fp)
  local rest = value and packed_without(value, fp) or ''
  if not value or rest == value then
    return 0
  elseif rest == '' then
    redis.call('HDEL', key, field)
  else
    redis.call('HSET', key, field, rest)
  end
  return 1
end
