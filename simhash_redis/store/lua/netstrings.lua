-- Netstring lists, as the fingerprint map stores them: the ids of a fingerprint (`5:doc-1` `5:doc-2`),
-- and in verified mode its sketches (groups of a sketch's netstring and the netstring list of the ids
-- having it). Included by the scripts that read or change them (`--! include netstrings`).
-- A malformed value (a bad restore, a hand edit) is read up to the fault rather than raising an error
-- in the middle of a write; verify() reports such values.

-- The netstring of `raw` at `pos`: its item and the position after it; nil where the value is
-- malformed: a length of digits only (a sign or a space would stall the parse), without a leading zero
-- (an id is found by its netstring's bytes), within the value.
local function item_at(raw, pos)
  local colon = string.find(raw, ':', pos, true)
  local digits = colon and string.sub(raw, pos, colon - 1)
  local len = digits and string.find(digits, '^%d+$') and not string.find(digits, '^0.') and tonumber(digits)
  if not len or colon + len > #raw then
    return nil
  end
  return string.sub(raw, colon + 1, colon + len), colon + len + 1
end
local function netstring(id)
  return #id .. ':' .. id
end

-- The position after the netstring at `pos`, its item not copied; nil where the value is malformed (as
-- for `item_at`).
local function skip_at(raw, pos)
  local _, colon, digits = string.find(raw, '^(%d+):', pos)
  local after = colon and not string.find(digits, '^0.') and colon + tonumber(digits) + 1
  if not after or after > #raw + 1 then
    return nil
  end
  return after
end

-- Every STRIDE-th item start of the long lists a script has searched or spliced lately, by list: Lua
-- strings are interned, so a list read again (the value it wrote back, or the same list elsewhere: a
-- verified fingerprint's ids and its sketch group's) finds its marks. A script that removes many ids of
-- one list (copies of one text) then walks it once, not once per id. The last KEPT lists only: each
-- splice makes another.
local LONG, STRIDE, KEPT = 4096, 64, 8
local marks_of, marked = {}, {}

local function keep_marks(raw, found)
  marks_of[raw] = found
  marked[#marked + 1] = raw
  if #marked > KEPT then
    marks_of[table.remove(marked, 1)] = nil
  end
end

local function marks(raw)
  local found = marks_of[raw]
  if not found then
    found = {}
    local pos, n = 1, 0
    while pos and pos <= #raw do
      if n % STRIDE == 0 then
        found[#found + 1] = pos
      end
      n = n + 1
      pos = skip_at(raw, pos)
    end
    keep_marks(raw, found)
  end
  return found
end

-- The last mark at or before `at` (marks[1] is 1).
local function mark_before(found, at)
  local lo, hi = 1, #found
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if found[mid] <= at then
      lo = mid
    else
      hi = mid - 1
    end
  end
  return found[lo] or 1
end

-- Where the netstring `item` is in the list `raw` (its start and the position after it), or nil. A plain
-- search first: an item that is not there, the common case of an attach, costs no walk in Lua. A match
-- is the item only at an item's start (an id may hold another's netstring), which a walk of the lengths
-- before it confirms, from the last mark before it in a long list.
local function find_item(raw, item)
  local needle = netstring(item)
  local at = string.find(raw, needle, 1, true)
  local found = at and #raw > LONG and marks(raw)
  local pos = 1
  while at do
    if found then
      pos = math.max(pos, mark_before(found, at))
    end
    while pos < at do
      pos = skip_at(raw, pos)
      if not pos then
        return nil
      end
    end
    if pos == at then
      return at, at + #needle
    end
    at = string.find(raw, needle, pos, true)
  end
  return nil
end

-- `raw` without the item from `start` to before `after`; a long list's marks move with it.
local function spliced(raw, start, after)
  local rest = string.sub(raw, 1, start - 1) .. string.sub(raw, after)
  local found = marks_of[raw]
  if found and #rest > LONG and not marks_of[rest] then
    local cut, moved = after - start, {}
    for i = 1, #found do
      local mark = found[i]
      if mark <= start then
        moved[#moved + 1] = mark -- at `start` now begins the next item
      else
        moved[#moved + 1] = mark - cut
      end
    end
    keep_marks(rest, moved)
  end
  return rest
end

-- The netstring list `raw` without `id`, and whether `id` was in it. Spliced out, not rebuilt: removing
-- one of thousands of ids makes no string per item, and walks at most a stride of them.
-- A malformed list is no longer cut at its fault: what cannot be read is left for verify to report.
local function without(raw, id)
  local start, after = find_item(raw, id)
  if not start then
    return raw, false
  end
  -- A list never holds an id twice, but a restored or edited one might: every copy goes.
  return (without(spliced(raw, start, after), id)), true
end

-- The group of a fingerprint's sketches at `pos` in `raw`: the sketch, the netstring list of the ids
-- having it, and the position after them; nil where the value is malformed.
local function group_at(raw, pos)
  local sketch, middle = item_at(raw, pos)
  if not sketch then
    return nil
  end
  local ids, after = item_at(raw, middle)
  if not ids then
    return nil
  end
  return sketch, ids, after
end

-- The sketches of a fingerprint's ids `raw` (groups of a sketch's netstring and the netstring of the
-- list of ids having it: exact copies share one) with `id` moved to the group of `sketch` ('' drops it;
-- a new group goes last), the sketch it had (nil: none), and whether another id keeps that sketch. A
-- malformed value is cut at its fault.
local function sketches_with(raw, id, sketch)
  local groups, had, kept, joined, pos = {}, nil, false, false, 1
  while pos <= #raw do
    local group, ids, after = group_at(raw, pos)
    if not group then
      break
    end
    local left, start, after_id = ids, find_item(ids, id)
    if start then
      left = spliced(ids, start, after_id)
      if not had then
        had, kept = group, left ~= ''
      end
    end
    if group == sketch and not joined then
      left = left .. netstring(id)
      joined = true
    end
    if left ~= '' then
      groups[#groups + 1] = netstring(group) .. netstring(left)
    end
    pos = after
  end
  if not joined and sketch ~= '' then
    groups[#groups + 1] = netstring(sketch) .. netstring(netstring(id))
  end
  return table.concat(groups), had, kept
end
