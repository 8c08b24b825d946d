-- Attaches ids to their fingerprints in the fingerprint map, for a bulk load (store/bulk.py): each id is
-- appended to its fingerprint's netstring list unless the list holds it already, so running a call
-- again changes nothing more (fp_ids.lua's '+', for many fingerprints at once). This is the commit point
-- of a bulk-loaded document for near(): readers skip a table member that has no ids here.
--
-- KEYS = fingerprint-map hashes (on a cluster, one per call), then on a standalone server the counts
-- hash; ARGV = for each fingerprint-map key in turn: the number m of
-- its fingerprints (each once per key), the m fingerprints, then m pairs: a fingerprint and the netstring
-- list of the ids to attach to it (the fingerprints come twice so that the common case, none of them has
-- an entry yet, is one HMGET and one HSET of ARGV slices, with no work per fingerprint in Lua).
-- Returns how many fingerprints got an entry they did not have.

-- A netstring's length: its digits only (a sign, a fraction or a space would stall the parse).
local function digits(s, from, to)
  local text = string.sub(s, from, to)
  return string.find(text, '^%d+$') and tonumber(text)
end

-- Each netstring of the list `raw`, as (the netstring, its id); a malformed list is read up to the fault
-- (verify() reports it).
local function items(raw)
  local pos, size = 1, #raw
  return function()
    if pos > size then
      return nil
    end
    local colon = string.find(raw, ':', pos, true)
    local len = colon and digits(raw, pos, colon - 1)
    if not len or colon + len > size then
      pos = size + 1
      return nil
    end
    local start = pos
    pos = colon + len + 1
    return string.sub(raw, start, colon + len), string.sub(raw, colon + 1, colon + len)
  end
end

-- Calls `command` on `key` with ARGV[first .. last], in slices (unpack() of thousands of values would
-- overflow Lua's C stack); returns the replies concatenated.
local function call(command, key, first, last, step)
  if last - first < step then
    return redis.call(command, key, unpack(ARGV, first, last))
  end
  local out = {}
  for from = first, last, step do
    local part = redis.call(command, key, unpack(ARGV, from, math.min(from + step - 1, last)))
    if type(part) == 'table' then
      for j = 1, #part do
        out[#out + 1] = part[j]
      end
    end
  end
  return out
end

-- The groups in ARGV; a key after theirs (a standalone server) is the counts hash, whose 'fingerprints'
-- move by the entries created, in the same atomic step. An increment by nothing first refuses a counts
-- key of the wrong type, an ACL user without HINCRBY or a server out of memory before anything is
-- written (once a script has written, the server lets it finish).
local groups, a = 0, 1
while a <= #ARGV do
  groups, a = groups + 1, a + 1 + 3 * tonumber(ARGV[a])
end
local counts = #KEYS > groups and KEYS[#KEYS]
if counts then
  redis.call('HINCRBY', counts, 'fingerprints', 0)
end

local created = 0
a = 1
-- A key that fails (of the wrong type, or one the ACL user may not write) stops the call, but the
-- keys before it stay written: their entries are counted all the same, then the error is returned.
local ok, err = pcall(function()
  for k = 1, groups do
    local key, m = KEYS[k], tonumber(ARGV[a])
    local at = a + 1 + m -- the pairs
    -- A key with one fingerprint (small windows): one HSETNX, unless the entry exists.
    local done = m == 1 and redis.call('HSETNX', key, ARGV[at], ARGV[at + 1]) == 1
    local got = done and {} or call('HMGET', key, a + 1, a + m, 1000)
    local fresh = true
    for i = 1, m do
      if got[i] then
        fresh = false
        break
      end
    end
    if done then
      created = created + 1
    elseif fresh then
      call('HSET', key, at, at + 2 * m - 1, 1000)
      created = created + m
    else
      local out, new = {}, 0
      for i = 1, m do
        local fp, list, raw = ARGV[at + 2 * i - 2], ARGV[at + 2 * i - 1], got[i]
        if not raw then
          out[#out + 1] = fp
          out[#out + 1] = list
          new = new + 1
        else
          local listed = {}
          for _, id in items(raw) do
            listed[id] = true
          end
          -- Joined once: appending each to a list of thousands (copies of one page) copied it each time.
          local more = {}
          for item, id in items(list) do
            if not listed[id] then
              listed[id] = true
              more[#more + 1] = item
            end
          end
          if #more > 0 then
            out[#out + 1] = fp
            out[#out + 1] = raw .. table.concat(more)
          end
        end
      end
      for from = 1, #out, 1000 do
        redis.call('HSET', key, unpack(out, from, math.min(from + 999, #out)))
      end
      created = created + new -- once written: a refused HSET counts nothing
    end
    a = at + 2 * m
  end
end)
if counts and created > 0 then
  redis.call('HINCRBY', counts, 'fingerprints', created)
end
if not ok then
  return redis.error_reply(type(err) == 'table' and err.err or tostring(err))
end
return created
