-- Applies a batch of document writes atomically: add, replace or remove ids.
--
-- ARGV[1] = number of tables T; ARGV[2] = the argument format: 'a' (a bulk load's adds: per document id,
-- new, with old = '' and no guard), 'g' (add-if-new's guarded adds: per document id, new, and the
-- members read from new's T table sets together, in one argument, each between spaces: ' m1 m2 ', or
-- ' ' for none; old = '') or '' (per document: id, new, old, guard).
--   new: the stored fingerprint to give the id ('' removes the id).
--   old: the fingerprint the client believes the id has now ('' = none).
--   guard: '', '1', 's' or 'k'. With '1', T counts follow, then the members the client read from each
--     of new's T table sets. The document is written only if none of those sets holds anything but
--     those members; otherwise it is reported as 'g' and the client reads again. Any fingerprint
--     within distance k of new shares at least one table set with it, so a set of tables that gained
--     nothing means no near-duplicate arrived since the client checked (add-if-new without a race); a
--     member that left (a fingerprint whose last id moved, a document of the call not written in it)
--     can bring none. With 's'
--     (verified mode), the number B of the sketch's band tables first, then (B > 0) new packed and the
--     B bands' fields, then the guard over T + B sets (new's tables, then the band values, whose
--     members are packed), then the document's sketch; with 'k', B, new packed and the fields, then
--     only the sketch (no guard). The sketch is set for the id beside new's ids (field 's:' .. new of
--     new's fingerprint-map hash) whenever the document is stored (added, replaced or unchanged), in
--     the same step (the field holds groups: a sketch, then the netstring list of the ids having it),
--     and new joins the sketch's B band values (appended, packed, to the field of each band's bucket
--     hash): never one without the other, and a document not
--     written leaves the id's sketch as it was. An empty sketch removes the id's (a document stored
--     without one). An id leaving a fingerprint takes its sketch with it. The status of a document whose
--     sketch was dropped or replaced so ('r', 'd', or 'u' with another sketch), and is kept by no other
--     id of that fingerprint, is followed by that old sketch, so the client can take the fingerprint out
--     of its band tables (`band_drop.lua`).
-- KEYS[1] = the counts hash; then per document: the id-map hash, [if new ~= '': the fingerprint-map
-- hash of new and its T table keys], [if old ~= '' and old ~= new: the same for old], [the bucket
-- hashes of the sketch's B bands].
--
-- Format 'w' (an index with a retention window, see store/windows.py): ARGV[3] = the period and
-- ARGV[4] = the retention, in milliseconds; ARGV[5] = the number W of live periods; ARGV[6] = the
-- position (1..W) of the current period, into which documents are written; ARGV[7 .. 6 + W] = the
-- periods' numbers, oldest first. Then per document: id, new, old, the position of old's period ('' with
-- no old), guard ('', '1', 's', 'k' or 'm'); with 's', 'k' and 'm' (verified mode), B, then (B > 0) new
-- packed and the B bands' fields; with '1' and 's', the number G of guarded sets, G counts, their
-- members (with 's', the table sets of each period read, then its band values: G / (T + B) periods);
-- with 's', 'k' and 'm', the sketch. KEYS[1 .. W] = each period's counts hash; then per document: its
-- id-map hash in each period, [if new ~= '': new's fingerprint-map hash and T tables in the current
-- period], [if old ~= '' and old is not new in the current period: old's in its period], [the bucket
-- hashes of the B bands in the current period], [the G guarded sets, then band hashes]. The sketch is
-- set (and new joins its bands, each key expiring with the current period) as the non-windowed formats
-- do, also for a document already in the current period; 'm' (a sliding window's move) writes it only
-- with a move: a document found in the current period is left as it is. A sketch dropped is reported
-- after the status as its period's position, ':', the fingerprint, ':', the sketch (`band_drop.lua`
-- takes the fingerprint out of that period's bands). The script finds the id in the newest
-- period that has it; a document written moves there from an older period (its entries there are
-- removed in the same step). If the server's clock is not in the current period, or the first period
-- of the call is newer than the oldest live one, nothing is written and the reply is {'w' .. the
-- server's time in milliseconds}: the client adopts that time and builds the call again.
-- Every key written in a period expires with it (PEXPIREAT (period + 1) x length + retention).
--
-- A document whose current fingerprint is not `old` is left untouched and reported as 'c' .. current,
-- so the client can resend it with the right keys. Each document is checked against the data before it
-- is changed, so re-running the script after a lost reply changes nothing more: the counts move only
-- when an id really appears or disappears.
--
-- In every format the last key, after the documents', is the call's reply record (`{base}:reply:` and a
-- name the client makes unique to the call): a call that changed something keeps its reply there for
-- REPLY_MS, and the same call resent after its reply was lost answers that reply again, changing
-- nothing, so a document it added or replaced is not reported unchanged (judged against its own write).
-- The record is best effort: kept only where TIME, HSET and PEXPIREAT may run.
local REPLY_MS = 60000
local record = KEYS[#KEYS]
if not string.find(record, ':reply:', 1, true) then
  return redis.error_reply('ERR the last key of a write call must be its reply record')
end
local kept = redis.call('HGET', record, 'r')
if kept then
  -- The statuses as netstrings, as written below.
  local replay, pos = {}, 1
  while pos <= #kept do
    local colon = string.find(kept, ':', pos, true)
    if not colon then
      break
    end
    local len = tonumber(string.sub(kept, pos, colon - 1))
    replay[#replay + 1] = string.sub(kept, colon + 1, colon + len)
    pos = colon + len + 1
  end
  return replay
end

local T = tonumber(ARGV[1])
local windowed = ARGV[2] == 'w'
local counts = KEYS[1]
local period, retention, W, ci
if windowed then
  period, retention, W, ci = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  -- Written only into the period of the server's clock, by a call that names every live period (the
  -- id is looked for in each of them): else the client adopts the server's time and builds it again.
  if math.floor(now / period) ~= tonumber(ARGV[6 + ci]) or tonumber(ARGV[7]) > math.floor((now - retention) / period) then
    return {'w' .. now}
  end
  counts = KEYS[ci]
  -- Every period's counts move at the end: refuse a counts key of the wrong type before anything is
  -- written (the current one's is checked below).
  for w = 1, W do
    local kind = redis.call('TYPE', KEYS[w])['ok']
    if kind ~= 'hash' and kind ~= 'none' then
      return redis.error_reply('WRONGTYPE the counts key ' .. KEYS[w] .. ' holds a ' .. kind .. ', not a hash')
    end
  end
end

-- The counts move after the documents: a counts key of the wrong type would fail the script once they
-- are written, so it is refused before anything is.
local counts_type = redis.call('TYPE', counts)['ok']
if counts_type ~= 'hash' and counts_type ~= 'none' then
  return redis.error_reply('WRONGTYPE the counts key ' .. counts .. ' holds a ' .. counts_type .. ', not a hash')
end
-- Format 'w': an ACL user that may not set expiries is refused here, before anything is written (an
-- expiry of a key that does not exist changes nothing); the counts key the probe below creates is
-- given its period's expiry then.
local counts_expire
if windowed then
  counts_expire = (tonumber(ARGV[6 + ci]) + 1) * period + retention
  if redis.call('EXISTS', counts) == 0 then
    redis.call('PEXPIREAT', counts, counts_expire)
  end
end
-- The same for an ACL user that may not run HINCRBY: an increment by nothing finds out first. Out of
-- memory it is refused too, but a batch of removals frees memory before its counts move: go on then.
local counted, refusal = pcall(redis.call, 'HINCRBY', counts, 'docs', 0)
if not counted then
  local reason = type(refusal) == 'table' and refusal.err or tostring(refusal)
  if not string.find(reason, 'OOM', 1, true) then
    return redis.error_reply(reason)
  end
elseif windowed and redis.call('PTTL', counts) == -1 then
  redis.call('PEXPIREAT', counts, counts_expire)
end

--! include netstrings
--! include bands

-- Whether table set `key` holds nothing but (some of) the `count` distinct members starting at ARGV[at]:
-- as many of them present as it has members. Members that left are no near-duplicate: a replacement
-- moving its id off a fingerprint, or a document of the same call not written in it (an id found with
-- another fingerprint is written in the next call), must not fail the guards of the documents after it.
local function unchanged(key, count, at)
  local size = redis.call('SCARD', key)
  if size > count then
    return false
  end
  if size == 0 then
    return true
  end
  local present = 0
  -- In slices: unpack() of thousands of values would overflow Lua's C stack.
  for first = at, at + count - 1, 1000 do
    local last = math.min(first + 999, at + count - 1)
    local found = redis.call('SMISMEMBER', key, unpack(ARGV, first, last))
    for i = 1, #found do
      present = present + found[i]
    end
  end
  return present == size
end

-- Whether band value `field` of hash `key` holds nothing but (some of) the `count` packed members
-- starting at ARGV[at]: `unchanged` for a band (one pass over each: a band of a site's template holds
-- thousands of fingerprints).
local function unchanged_band(key, field, count, at)
  local value = redis.call('HGET', key, field)
  if not value then
    return true
  end
  local width = count > 0 and #ARGV[at] or 8
  if #value > count * width then
    return false
  end
  local listed = {}
  for i = at, at + count - 1 do
    listed[ARGV[i]] = true
  end
  for pos = 1, #value, width do
    if not listed[string.sub(value, pos, pos + width - 1)] then
      return false
    end
  end
  return true
end

local out = {}
local doc_delta, fp_delta = 0, 0
local k = 2

-- What the current document has changed, to undo if one of its commands fails (a key of the wrong type,
-- a command the ACL user may not run): each document is written whole or not at all. Flat arrays reused
-- from one document to the next: a table per entry would cost the server more than the writes.
local j_kind, j_key, j_field, j_prev, j_n = {}, {}, {}, {}, 0
-- Format 'w': the period (its position) of the keys being changed, journaled too, so that a key the undo
-- creates again expires with its period.
local j_at, j_period = {}, 0
-- Whether the call changed anything (then its reply is recorded).
local wrote = false
local function log(kind, key, field, prev)
  wrote = true
  j_n = j_n + 1
  j_kind[j_n], j_key[j_n], j_field[j_n], j_prev[j_n], j_at[j_n] = kind, key, field, prev, j_period
end
local function hset(key, field, value, prev)
  redis.call('HSET', key, field, value)
  log('h', key, field, prev)
end
local function hsetnx(key, field, value)
  local set = redis.call('HSETNX', key, field, value)
  if set == 1 then
    log('h', key, field, false)
  end
  return set
end
local function hdel(key, field, prev)
  redis.call('HDEL', key, field)
  log('h', key, field, prev)
end
local function sadd(key, member)
  if redis.call('SADD', key, member) == 1 then
    log('s', key, member, false)
  end
end
local function srem(key, member)
  if redis.call('SREM', key, member) == 1 then
    log('s', key, member, true)
  end
end
-- Puts back, newest first, what the journal says was there before.
local function undo()
  for i = j_n, 1, -1 do
    local key, field, prev = j_key[i], j_field[i], j_prev[i]
    if j_kind[i] == 'h' then
      if prev then
        redis.call('HSET', key, field, prev)
      else
        redis.call('HDEL', key, field)
      end
    elseif prev then
      redis.call('SADD', key, field)
    else
      redis.call('SREM', key, field)
    end
  end
end

-- How many members a document's guard lists, from its `sets` counts at ARGV[guard_counts].
local function guard_total(guard_counts, sets)
  local total = 0
  for t = 0, sets - 1 do
    total = total + tonumber(ARGV[guard_counts + t])
  end
  return total
end

-- Sets (or with sketch '' removes) the sketch of `id` among those of fingerprint `fp` in map hash `key`.
-- The sketch it replaces or removes, if another and no other id of `fp` keeps it, is left in `dropped`
-- (an exact copy's removal leaves the band tables alone: the copies still have its bands).
local dropped, dropped_w, dropped_fp = '', 0, ''
local function set_sketch(key, fp, id, sketch)
  local field = 's:' .. fp
  local prev = redis.call('HGET', key, field)
  if not prev and sketch == '' then
    return
  end
  local rest, had, kept = sketches_with(prev or '', id, sketch)
  if had == sketch or (not had and sketch == '') then
    return  -- unchanged: nothing written (a resent or repeated write adds nothing to the AOF)
  end
  if had and not kept then
    dropped, dropped_w, dropped_fp = had, j_period, fp
  end
  if rest == '' then
    hdel(key, field, prev)
  else
    hset(key, field, rest, prev)
  end
end
-- Adds `id` to the ids of fingerprint `fp` (map hash KEYS[at], tables KEYS[at + 1 .. at + T]).
local function attach(at, fp, id)
  if hsetnx(KEYS[at], fp, netstring(id)) == 1 then
    for t = 1, T do
      sadd(KEYS[at + t], fp)
    end
    return 1
  end
  local raw = redis.call('HGET', KEYS[at], fp)
  if not find_item(raw, id) then
    hset(KEYS[at], fp, raw .. netstring(id), raw)
  end
  return 0
end
-- Removes `id` from the ids of fingerprint `fp` (map hash KEYS[at], tables KEYS[at + 1 .. at + T]); the
-- fingerprint leaves the tables with its last id. Returns -1 then, else 0.
local function detach(at, fp, id)
  set_sketch(KEYS[at], fp, id, '')
  local raw = redis.call('HGET', KEYS[at], fp) or ''
  local rest = without(raw, id)
  if rest ~= '' then
    hset(KEYS[at], fp, rest, raw)
    return 0
  end
  hdel(KEYS[at], fp, raw ~= '' and raw)
  for t = 1, T do
    srem(KEYS[at + t], fp)
  end
  return -1
end
-- Applies one document; its keys start at KEYS[k], its guard (if any) at ARGV[guard_counts]; `nb` band
-- hashes follow its other keys, new packed at ARGV[band_args] and their fields after it.
local function write(id, new, old, guard, guard_counts, nb, band_args)
  j_n = 0
  dropped = ''
  local sets = T + nb
  local guard_members = guard_counts + sets
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
  local band_at = k
  k = k + nb
  local guarded = guard == '1' or guard == 's'
  local sketched = guard == 's' or guard == 'k'
  -- A bulk load's common case, a new id, costs one HSETNX instead of a read and a write.
  local fresh = old == '' and new ~= '' and guard == '' and hsetnx(id_key, id, new) == 1
  local cur = fresh and '' or (redis.call('HGET', id_key, id) or '')
  local intact = true
  if guarded and cur ~= new then
    local at = guard_members
    for t = 1, sets do
      local count = tonumber(ARGV[guard_counts + t - 1])
      if intact then
        if t <= T then
          intact = unchanged(KEYS[new_at + t], count, at)
        else
          intact = unchanged_band(KEYS[band_at + t - T - 1], ARGV[band_args + t - T], count, at)
        end
      end
      at = at + count
    end
  end
  if sketched and intact and (cur == new or cur == old) and new ~= '' then
    local sketch = guarded and ARGV[guard_members + guard_total(guard_counts, sets)] or ARGV[guard_counts]
    set_sketch(KEYS[new_at], new, id, sketch)
    if sketch ~= '' then
      local packed = ARGV[band_args]
      for b = 0, nb - 1 do
        local key, field = KEYS[band_at + b], ARGV[band_args + 1 + b]
        local value = redis.call('HGET', key, field)
        if not value or not packed_at(value, packed) then
          hset(key, field, (value or '') .. packed, value or false)
        end
      end
    end
  end
  if cur == new then
    out[#out + 1] = (new == '') and 'n' or 'u' .. dropped
  elseif not intact then
    out[#out + 1] = 'g'
  elseif cur ~= old then
    out[#out + 1] = 'c' .. cur
  else
    local fps = 0
    if old ~= '' then
      fps = detach(old_at, old, id)
    end
    if new ~= '' then
      if not fresh then
        hset(id_key, id, new, cur ~= '' and cur)
      end
      fps = fps + attach(new_at, new, id)
    else
      hdel(id_key, id, cur)
    end
    -- The document is whole: only now do its counts move.
    fp_delta = fp_delta + fps
    if old == '' then
      doc_delta = doc_delta + 1
      out[#out + 1] = 'a'
    elseif new == '' then
      doc_delta = doc_delta - 1
      out[#out + 1] = 'd' .. dropped
    else
      out[#out + 1] = 'r' .. dropped
    end
  end
end

-- Whether the T table sets from KEYS[first] together hold nothing but (some of) the members listed,
-- each between spaces, in `listed` (members read are decimals: a read refuses any other member, so
-- none holds a space): format 'g''s guard, one SUNION for the T sets. As strong as
-- `unchanged` of each set: a fingerprint within distance k of new that arrived in one of its sets since
-- the client read them is among none of the members read from any of them, since each member read was
-- compared with new (one within k would have been reported, and the document not sent).
local function unchanged_sets(first, listed)
  local members = redis.call('SUNION', unpack(KEYS, first, first + T - 1))
  if #members <= 8 then
    -- A few members (the common case): each found in the list, no table made.
    for i = 1, #members do
      if not string.find(listed, ' ' .. members[i] .. ' ', 1, true) then
        return false
      end
    end
    return true
  end
  local read = {}
  for member in string.gmatch(listed, '[^ ]+') do
    read[member] = true
  end
  for i = 1, #members do
    if not read[members[i]] then
      return false
    end
  end
  return true
end

-- Format 'g': a guarded add (old '') whose keys start at KEYS[k], its guard's members in `listed`.
-- `write`'s outcome for it, in fewer calls: the guard is checked first, and an id that is not stored is
-- set by the HSETNX that finds so; the id's current fingerprint is read only when one of them fails (a
-- resent write, say: its own fingerprint is in its sets now, and it is 'u').
local function write_guarded(id, new, listed)
  j_n = 0
  local id_key, new_at = KEYS[k], k + 1
  k = k + 2 + T
  local intact = unchanged_sets(new_at + 1, listed)
  if intact and hsetnx(id_key, id, new) == 1 then
    local fps = attach(new_at, new, id)
    -- The document is whole: only now do its counts move.
    fp_delta = fp_delta + fps
    doc_delta = doc_delta + 1
    out[#out + 1] = 'a'
    return
  end
  local cur = redis.call('HGET', id_key, id) or ''
  if cur == new then
    out[#out + 1] = 'u'
  elseif not intact then
    out[#out + 1] = 'g'
  else
    out[#out + 1] = 'c' .. cur
  end
end

-- Format 'w': a document of an index with a retention window (see the header). Its keys start at
-- KEYS[k]; `old_w` is the position of old's period; its guard (if any) starts at ARGV[guard_at].
local w_docs, w_fps = {}, {}
for w = 1, (W or 0) do
  w_docs[w], w_fps[w] = 0, 0
end
local function expires(w)
  return (tonumber(ARGV[6 + w]) + 1) * period + retention
end
-- Sets a key's expiry unless it has one (a period's keys all have the same): PTTL is a read, so the
-- common case, a key written before in the period, adds nothing to the AOF or the replicas' stream.
local function expire(key, at)
  if redis.call('PTTL', key) == -1 then
    redis.call('PEXPIREAT', key, at)
  end
end
-- Format 'w' in verified mode: the sketch of `id` set among those of `fp` in the current period (map
-- hash KEYS[at]), and fp into the sketch's `nb` band values (hashes from KEYS[band_at], new packed at
-- ARGV[band_args], the fields after it), each key written expiring with the period.
local function sketch_in(at, fp, id, sketch, nb, band_at, band_args)
  set_sketch(KEYS[at], fp, id, sketch)
  local expiry = expires(ci)
  expire(KEYS[at], expiry)
  if sketch == '' then
    return
  end
  local packed = ARGV[band_args]
  for b = 0, nb - 1 do
    local key, field = KEYS[band_at + b], ARGV[band_args + 1 + b]
    local value = redis.call('HGET', key, field)
    if not value or not packed_at(value, packed) then
      hset(key, field, (value or '') .. packed, value or false)
    end
    expire(key, expiry)
  end
end
-- The status of a document written, with the sketch it dropped (see the header).
local function with_dropped(status)
  if dropped == '' then
    return status
  end
  return status .. dropped_w .. ':' .. dropped_fp .. ':' .. dropped
end
local function write_windowed(id, new, old, old_w, guard, guard_at, nb, band_args, sketch)
  j_n = 0
  dropped = ''
  local ids_at = k
  k = k + W
  local new_at, old_at, sets_at, sets, band_at
  if new ~= '' then
    new_at = k
    k = k + 1 + T
  end
  if old ~= '' and not (old == new and old_w == ci) then
    old_at = k
    k = k + 1 + T
  end
  band_at = k
  k = k + nb
  if guard == '1' or guard == 's' then
    sets = tonumber(ARGV[guard_at])
    sets_at = k
    k = k + sets
  end
  -- The guarded sets: the table sets of each period read, then (format 's') its band values.
  local tabled = sets
  if sets and guard == 's' and nb > 0 then
    tabled = sets / (T + nb) * T
  end
  local cur, cur_w = '', 0
  for w = W, 1, -1 do
    local value = redis.call('HGET', KEYS[ids_at + w - 1], id)
    if value then
      cur, cur_w = value, w
      break
    end
  end
  local here = cur ~= '' and cur == new and cur_w == ci
  local intact = true
  if sets and not here then
    local at = guard_at + 1 + sets
    for g = 1, sets do
      local count = tonumber(ARGV[guard_at + g])
      if intact then
        if g <= tabled then
          intact = unchanged(KEYS[sets_at + g - 1], count, at)
        else
          local field = ARGV[band_args + 1 + (g - tabled - 1) % nb]
          intact = unchanged_band(KEYS[sets_at + g - 1], field, count, at)
        end
      end
      at = at + count
    end
  end
  if here then
    if sketch and guard ~= 'm' then
      j_period = ci
      sketch_in(new_at, new, id, sketch, nb, band_at, band_args)
    end
    out[#out + 1] = with_dropped('u')
  elseif new == '' and cur == '' then
    out[#out + 1] = 'n'
  elseif not intact then
    out[#out + 1] = 'g'
  elseif cur ~= old or (cur ~= '' and cur_w ~= old_w) then
    out[#out + 1] = 'c' .. (cur == '' and '' or (cur_w .. ':' .. cur))
  else
    -- The new side first, its expiries set before anything of the old period is touched: should an
    -- expiry be refused (an ACL user without PEXPIREAT), the undo finds no key of the old period
    -- deleted, so none is created again without its expiry.
    local docs_new, fps_new, docs_old, fps_old = 0, 0, 0, 0
    if new ~= '' then
      j_period = ci
      local id_key = KEYS[ids_at + ci - 1]
      local stays = old ~= '' and old_w == ci
      hset(id_key, id, new, stays and cur)
      fps_new = attach(new_at, new, id)
      if sketch then
        sketch_in(new_at, new, id, sketch, nb, band_at, band_args)
      end
      if not stays then
        docs_new = 1
      end
      local at = expires(ci)
      expire(id_key, at)
      for i = new_at, new_at + T do
        expire(KEYS[i], at)
      end
    end
    if old ~= '' then
      j_period = old_w
      fps_old = detach(old_at, old, id)
      if old_w ~= ci or new == '' then
        hdel(KEYS[ids_at + old_w - 1], id, cur)
        docs_old = -1
      end
    end
    -- The document is whole: only now do its counts move.
    if new ~= '' then
      w_docs[ci], w_fps[ci] = w_docs[ci] + docs_new, w_fps[ci] + fps_new
    end
    if old ~= '' then
      w_docs[old_w], w_fps[old_w] = w_docs[old_w] + docs_old, w_fps[old_w] + fps_old
    end
    if old == '' then
      out[#out + 1] = 'a'
    elseif new == '' then
      out[#out + 1] = with_dropped('d')
    elseif old == new then
      out[#out + 1] = with_dropped('u')
    else
      out[#out + 1] = with_dropped('r')
    end
  end
end

-- Documents are applied one after another, each whole or not at all: if one fails (a key of the wrong
-- type, a command the ACL user may not run), its own changes are undone, those before it stay applied,
-- and their counts are written before the error is returned.
local ok, err = pcall(function()
  local n = #ARGV
  if windowed then
    k = W + 1
    local a = 7 + W
    while a <= n do
      local id, new, old, old_w, guard = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
      a = a + 5
      local sketched = guard == 's' or guard == 'k' or guard == 'm'
      local nb, band_args = 0, 0
      if sketched then
        nb = tonumber(ARGV[a])
        a = a + 1
        if nb > 0 then
          band_args = a
          a = a + 1 + nb
        end
      end
      local guard_at = a
      if guard == '1' or guard == 's' then
        local sets = tonumber(ARGV[a])
        a = a + 1 + sets
        for g = 1, sets do
          a = a + tonumber(ARGV[guard_at + g])
        end
      end
      local sketch
      if sketched then
        sketch = ARGV[a]
        a = a + 1
      end
      write_windowed(id, new, old, tonumber(old_w) or 0, guard, guard_at, nb, band_args, sketch)
    end
    return
  end
  if ARGV[2] == 'a' then
    for a = 3, n, 2 do
      write(ARGV[a], ARGV[a + 1], '', '', 0, 0, 0)
    end
    return
  end
  if ARGV[2] == 'g' then
    for a = 3, n, 3 do
      write_guarded(ARGV[a], ARGV[a + 1], ARGV[a + 2])
    end
    return
  end
  local a = 3
  while a <= n do
    local id, new, old, guard = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
    a = a + 4
    local nb, band_args = 0, 0
    if guard == 's' or guard == 'k' then
      nb = tonumber(ARGV[a])
      a = a + 1
      if nb > 0 then
        band_args = a
        a = a + 1 + nb
      end
    end
    local guard_counts = a
    if guard == '1' or guard == 's' then
      a = a + T + nb + guard_total(guard_counts, T + nb)
    end
    if guard == 's' or guard == 'k' then
      a = a + 1  -- the sketch
    end
    write(id, new, old, guard, guard_counts, nb, band_args)
  end
end)
if not ok then
  pcall(undo)  -- the failed document's own changes; those before it are complete
  if windowed then
    for i = 1, j_n do
      pcall(redis.call, 'PEXPIREAT', j_key[i], expires(j_at[i]))
    end
  end
end
if windowed then
  -- The whole documents' counts move even when a later one failed; the first error is reported.
  local function count(key, field, delta)
    if delta ~= 0 then
      local moved, refusal = pcall(redis.call, 'HINCRBY', key, field, delta)
      if not moved and ok then
        ok, err = false, refusal
      end
    end
  end
  for w = 1, W do
    count(KEYS[w], 'docs', w_docs[w])
    count(KEYS[w], 'fingerprints', w_fps[w])
    if w == ci or w_docs[w] ~= 0 or w_fps[w] ~= 0 then
      pcall(expire, KEYS[w], expires(w))
    end
  end
end
if doc_delta ~= 0 then
  redis.call('HINCRBY', counts, 'docs', doc_delta)
end
if fp_delta ~= 0 then
  redis.call('HINCRBY', counts, 'fingerprints', fp_delta)
end
if not ok then
  return redis.error_reply(type(err) == 'table' and err.err or tostring(err))
end
if wrote then
  -- A call that changed nothing needs no record: sent again, it answers the same.
  local timed, clock = pcall(redis.call, 'TIME')
  if timed then
    local parts = {}
    for i = 1, #out do
      parts[i] = #out[i] .. ':' .. out[i]
    end
    local expiry = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) + REPLY_MS
    if pcall(redis.call, 'HSET', record, 'r', table.concat(parts)) then
      if not pcall(redis.call, 'PEXPIREAT', record, expiry) then
        pcall(redis.call, 'HDEL', record, 'r')  -- never a record without its expiry
      end
    end
  end
end
return out
