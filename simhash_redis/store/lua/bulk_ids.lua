-- Commits ids to the id map for a bulk load (store/bulk.py, step 4 on a standalone server) and moves
-- the documents count by exactly the ids it adds, in one atomic step: a call run again after a lost
-- reply adds no id and counts none, so the count stays the data's.
--
-- KEYS = id-map buckets, then the counts hash (always given); ARGV = for each bucket in turn: the
-- number m of its ids, then m pairs: an id and its fingerprint. Returns how many ids were added.

-- An increment by nothing first: a counts key of the wrong type, an ACL user without HINCRBY or a
-- server out of memory refuse the call before it writes anything (once a script has written, the server
-- lets it finish).
local counts = KEYS[#KEYS]
redis.call('HINCRBY', counts, 'docs', 0)
local a, added = 1, 0
-- A bucket that fails (a key of the wrong type, one the ACL user may not write) stops the call, but the
-- buckets before it stay written: they are counted all the same, then the error is returned.
local ok, err = pcall(function()
  for k = 1, #KEYS - 1 do
    local m = tonumber(ARGV[a])
    -- In slices of whole pairs: unpack() of thousands of values would overflow Lua's C stack.
    for first = a + 1, a + 2 * m, 1000 do
      added = added + redis.call('HSET', KEYS[k], unpack(ARGV, first, math.min(first + 999, a + 2 * m)))
    end
    a = a + 1 + 2 * m
  end
end)
if added > 0 then
  redis.call('HINCRBY', counts, 'docs', added)
end
if not ok then
  return redis.error_reply(type(err) == 'table' and err.err or tostring(err))
end
return added
