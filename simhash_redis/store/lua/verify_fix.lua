-- One problem verify found on a standalone server, checked again and (ARGV[2] = '1') fixed in the same
-- atomic step, so that a writer's work done since verify read the keys is neither reported nor undone.
-- Returns 1 if the problem was still there, else 0. ARGV[1] = the problem, ARGV[3] = fp, ARGV[4] = id:
--   'listed' (an id missing from its fingerprint's id list): KEYS = the id-map hash, the fingerprint-map
--     hash. Still there if the id still has fp and is not listed; fixed by listing it.
--   'tabled' (a fingerprint missing from a table): KEYS = the id-map hash, the table set. Still there if
--     the id still has fp and the set lacks it; fixed by adding it.
--   'stale' (an id listed under a fingerprint it no longer has): KEYS = the fingerprint-map hash, the
--     id-map hash, then fp's table sets. Still there if listed and the id has another fingerprint or
--     none; fixed by unlisting it, and with the last id the entry and its table members go.
--   'orphan' (a table member without a fingerprint-map entry): KEYS = the table set, the fingerprint-map
--     hash. Fixed by removing the member.
--   'sketched' (verified mode: a sketch kept for an id that has another fingerprint or none): KEYS = the
--     fingerprint-map hash, the id-map hash. Fixed as fp_ids.lua's '-' does: the id and its sketch go.

--! include netstrings

local problem, fix, fp, id = ARGV[1], ARGV[2] == '1', ARGV[3], ARGV[4]
if problem == 'listed' or problem == 'stale' then
  local map, ids = KEYS[problem == 'listed' and 2 or 1], KEYS[problem == 'listed' and 1 or 2]
  local raw = redis.call('HGET', map, fp) or ''
  local listed, has = find_item(raw, id) ~= nil, redis.call('HGET', ids, id) == fp
  if problem == 'listed' then
    if listed or not has then
      return 0
    end
    if fix then
      redis.call('HSET', map, fp, raw .. netstring(id))
    end
    return 1
  end
  if not listed or has then
    return 0
  end
  if fix then
    local rest = without(raw, id)
    if rest ~= '' then
      redis.call('HSET', map, fp, rest)
    else
      redis.call('HDEL', map, fp)
      for i = 3, #KEYS do
        redis.call('SREM', KEYS[i], fp)
      end
    end
  end
  return 1
end
if problem == 'sketched' then
  local field = 's:' .. fp
  local raw = redis.call('HGET', KEYS[1], field)
  if not raw or redis.call('HGET', KEYS[2], id) == fp then
    return 0
  end
  local stored, had = sketches_with(raw, id, '')
  if not had then
    return 0
  end
  if fix then
    if stored == '' then
      redis.call('HDEL', KEYS[1], field)
    else
      redis.call('HSET', KEYS[1], field, stored)
    end
    local ids = redis.call('HGET', KEYS[1], fp)
    local rest, listed = without(ids or '', id)
    if listed and rest == '' then
      redis.call('HDEL', KEYS[1], fp)
    elseif listed then
      redis.call('HSET', KEYS[1], fp, rest)
    end
  end
  return 1
end
if problem == 'tabled' then
  if redis.call('HGET', KEYS[1], id) ~= fp or redis.call('SISMEMBER', KEYS[2], fp) == 1 then
    return 0
  end
  if fix then
    redis.call('SADD', KEYS[2], fp)
  end
  return 1
end
if redis.call('SISMEMBER', KEYS[1], fp) == 0 or redis.call('HEXISTS', KEYS[2], fp) == 1 then
  return 0
end
if fix then
  redis.call('SREM', KEYS[1], fp)
end
return 1
