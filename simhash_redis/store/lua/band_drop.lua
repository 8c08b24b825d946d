-- Takes a fingerprint out of one band table of verified mode, unless a sketch still kept for it (one of
-- its other ids') holds the same values in that band; idempotent, and atomic against the writes that
-- add it (a standalone server: both keys in one script).
-- KEYS[1] = the band table, KEYS[2] = the fingerprint's map hash; ARGV = the fingerprint, the band's
-- first byte in a sketch (from 0), the band's bytes.
-- A netstring's length: its digits only (a sign, a fraction or a space would stall the parse).
local function digits(s, from, to)
  local text = string.sub(s, from, to)
  return string.find(text, '^%d+$') and tonumber(text)
end
local fp, offset, value = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local raw = redis.call('HGET', KEYS[2], 's:' .. fp) or ''
local pos, n = 1, #raw
while pos <= n do
  local colon = string.find(raw, ':', pos, true)
  local len = colon and digits(raw, pos, colon - 1)
  local after = len and colon + len + 1
  local colon2 = after and string.find(raw, ':', after, true)
  local len2 = colon2 and digits(raw, after, colon2 - 1)
  if not len2 or colon2 + len2 > n then
    break
  end
  if string.sub(raw, colon2 + 1 + offset, colon2 + offset + #value) == value then
    return 0
  end
  pos = colon2 + len2 + 1
end
return redis.call('SREM', KEYS[1], fp)
