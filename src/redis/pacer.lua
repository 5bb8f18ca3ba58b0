-- pacer.lua: the pacer's per-key state machine, run by Redis for RedisStore.
--
-- It is the state machine of src/memory_store.cpp (the rules are described in
-- include/abide/pacer.h), written again for Redis so that one operation on a
-- key is one atomic script call: one round trip per acquire, shared by every
-- process that uses the same Redis. The store conformance suite
-- (tests/support/quota_store_conformance.h) runs against both: keep them in step.
--
-- Call: EVALSHA <digest> 1 <key> <op> <arguments of op...>
--
-- Build: this file is a template. Each placeholder below (a constant's name
-- between two at signs) is replaced by CMake with that constant's value from
-- kScriptConstants in src/redis/pacer_script.h, the list the C++ side uses
-- too, and the result is embedded in the library. No at sign may appear
-- anywhere else in this file, comments included.
--
-- Units: every time and duration is a whole number of microseconds. Lua numbers
-- are doubles, exact up to 2^53 us (about 285 years). "Now" comes from the
-- caller (its monotonic clock) or, when the caller sends '', from Redis's TIME,
-- which every client of this Redis shares.

-- ---- shared with C++ (pacer_script.h) -----------------------------------------

local OP_ACQUIRE = @OP_ACQUIRE@
local OP_RECORD = @OP_RECORD@
local OP_CHECK = @OP_CHECK@
local OP_ABANDON = @OP_ABANDON@

local ACQUIRE_ARGS = @ACQUIRE_ARGS@
local RECORD_FIXED_ARGS = @RECORD_FIXED_ARGS@
local POLICY_ARGS = @POLICY_ARGS@
local CHECK_ARGS = @CHECK_ARGS@
local ABANDON_ARGS = @ABANDON_ARGS@

local GRANT_GRANTED = @GRANT_GRANTED@
local GRANT_PROBE = @GRANT_PROBE@
local GRANT_AWAIT_PROBE = @GRANT_AWAIT_PROBE@
local GRANT_TOO_LATE = @GRANT_TOO_LATE@

local MAX_POLICIES = @MAX_POLICIES@
local MAX_ID_BYTES = @MAX_ID_BYTES@
local MICROS_PER_SECOND = @MICROS_PER_SECOND@

-- ---- this script's own numbers ---------------------------------------------------

-- The cooldown spread steps through [0, 1) by the golden ratio from a random
-- seed (a low-discrepancy sequence), as memory_store.cpp does (kGolden).
local GOLDEN = 0.6180339887498949
local SPREAD_CYCLE = 1000000
-- A key's state is kept this long after the last instant it matters (at least;
-- the longest policy window when longer), and never longer than a year.
local MIN_GRACE = MICROS_PER_SECOND
local MAX_TTL_MS = 365 * 24 * 3600 * 1000

-- ---- the state ------------------------------------------------------------------
--
-- One Redis string per key: a MessagePack table. The short field names are
-- the stored format: states written by an older build must still read.
--
--   e    epoch: +1 whenever a cooldown starts or grows. A slot reserved under
--        one epoch is void under the next (OP_CHECK).
--   tat  the key's next free slot ("theoretical arrival time"); slots are handed
--        out in order, each at or after the one before.
--   ce   cooldown end: nothing is sent before it (Retry-After and the like).
--   se   spread end: slots before it are spaced by a random step, so workers
--        released together do not all start in the same millisecond.
--   ss   spread seed in [0, 1), from the caller's random source.
--   sn   how many spread steps were drawn since the release.
--   pn   probe needed (1): the next grant must be a probe (a cooldown ended and
--        nothing fresh is known yet).
--   po   probe out (1): a probe was handed out and not yet answered.
--   ps   probe start: the probe's slot. A response received after it is its answer.
--   pu   probe until: waiting for the probe ends here (it may never be answered).
--   pol  up to MAX_POLICIES quota policies, each an array indexed below.
--
-- A policy is what responses said about one quota (RateLimit, X-RateLimit-*):
local P_ID = 1         -- policy name and partition
local P_LIMIT = 2      -- units per window; 0: unknown
local P_WINDOW = 3     -- the window's length; 0: unknown
local P_REMAINING = 4  -- units left in the current window; -1: no window being counted
local P_RESET = 5      -- when the current window ends (when P_REMAINING >= 0)
local P_NEXT = 6       -- this policy's next free slot (smooth or GCRA spacing)
local P_AIM = 7        -- smooth pacing spends the window's quota by this (<= P_RESET);
                       -- a state saved before it existed reads it as P_RESET

local function fresh_state()
  return {e = 0, tat = 0, ce = 0, se = 0, ss = 0, sn = 0, pn = 0, po = 0, ps = 0, pu = 0, pol = {}}
end

-- The key's state, and whether there was one. Anything unreadable (another
-- program's value, a damaged one) counts as no state: the pacer starts afresh
-- rather than fail. A key of another Redis type is an error (GET refuses it),
-- reported to the caller.
local function load(key)
  local raw = redis.call('GET', key)
  if raw then
    local ok, st = pcall(cmsgpack.unpack, raw)
    if ok and type(st) == 'table' and type(st.pol) == 'table' then
      local blank = fresh_state()
      for field, zero in pairs(blank) do
        if field ~= 'pol' and type(st[field]) ~= 'number' then st[field] = zero end
      end
      return st, true
    end
  end
  return fresh_state(), false
end

-- Stores the state until nothing in it matters any more: the latest of its
-- instants, plus a grace of the longest window.
local function save(key, st, now)
  local last = math.max(now, st.tat, st.ce, st.se, st.pu)
  local grace = MIN_GRACE
  for _, p in ipairs(st.pol) do
    last = math.max(last, p[P_NEXT])
    if p[P_REMAINING] >= 0 then last = math.max(last, p[P_RESET]) end
    if p[P_WINDOW] > grace then grace = p[P_WINDOW] end
  end
  local ttl = math.ceil((last - now + grace) / 1000)
  if ttl < 1 then ttl = 1 end
  if ttl > MAX_TTL_MS then ttl = MAX_TTL_MS end
  redis.call('SET', key, cmsgpack.pack(st), 'PX', string.format('%d', ttl))
end

local function now_us(arg)
  if arg ~= '' then return tonumber(arg) end
  -- Before Redis 5 a script had to ask for effects replication to write
  -- after a non-deterministic command (TIME); later versions always do it.
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  return tonumber(t[1]) * MICROS_PER_SECOND + tonumber(t[2])
end

-- ---- acquire ---------------------------------------------------------------------

-- Takes the slot for one send at `slot`: every policy spends one unit, and
-- the key's schedule moves on.
local function commit(st, slot, smooth, stretch, spread)
  for _, p in ipairs(st.pol) do
    if p[P_REMAINING] >= 0 then
      if slot < p[P_RESET] and p[P_REMAINING] > 0 then
        if smooth then
          -- Divide what is left of the window among what is left of the quota,
          -- stretched by the safety margin, so the quota lasts to the window's
          -- earliest possible end (the aim).
          local left = math.max((p[P_AIM] or p[P_RESET]) - slot, 0)
          p[P_NEXT] = slot + math.ceil(left * stretch / p[P_REMAINING])
        end
        p[P_REMAINING] = p[P_REMAINING] - 1
      end
    elseif p[P_LIMIT] > 0 and p[P_WINDOW] > 0 then
      -- Only the policy is known (no count): an even spacing of limit per
      -- window (GCRA).
      p[P_NEXT] = slot + math.ceil(p[P_WINDOW] / p[P_LIMIT] * stretch)
    end
  end
  st.tat = slot
  if slot < st.se and spread > 0 then
    -- Released workers: the next slot is a step in [spread/4, spread) later.
    local u = st.ss + (st.sn % SPREAD_CYCLE) * GOLDEN
    u = u - math.floor(u)
    st.sn = st.sn + 1
    st.tat = slot + math.ceil(spread / 4 + u * spread * 0.75)
  end
end

-- ARGV: op, now ('' for Redis's TIME), max_wait (negative: only report),
-- smooth (1) or burst (0), safety margin in [0, 1], probe timeout, spread.
-- Returns {grant kind, wait, epoch}.
--
-- The decision, in order:
--   1. The earliest slot is the latest of: now, the key's next free slot, the
--      cooldown's end, and for each policy its own constraint (a spent window
--      waits for its reset; smooth pacing waits for the policy's next slot, but
--      never past the reset; a policy without a count waits for its GCRA slot).
--   2. If that slot lies at or past the end of a counted window, nothing fresh
--      is known about the quota then; likewise right after a cooldown. Such a
--      slot goes to one probe: while a probe is out (and not timed out) every
--      other caller is told to wait for its answer (GRANT_AWAIT_PROBE).
--   3. A slot further away than max_wait is not reserved (GRANT_TOO_LATE, with
--      the wait), so a caller with a deadline learns when it could go.
--   4. Otherwise the slot is reserved (GRANT_GRANTED or GRANT_PROBE).
local function acquire(key)
  local now = now_us(ARGV[2])
  local max_wait = tonumber(ARGV[3])
  local smooth = ARGV[4] == '1'
  local stretch = 1 + tonumber(ARGV[5])
  local probe_timeout = tonumber(ARGV[6])
  local spread = tonumber(ARGV[7])
  local st = load(key)

  local slot = math.max(now, st.tat, st.ce)
  for _, p in ipairs(st.pol) do
    if p[P_REMAINING] >= 0 then
      if p[P_REMAINING] == 0 then
        slot = math.max(slot, p[P_RESET])
      elseif smooth then
        -- A smooth slot past the reset means: the next send is the probe, at the reset.
        slot = math.max(slot, math.min(p[P_NEXT], p[P_RESET]))
      end
    elseif p[P_LIMIT] > 0 and p[P_WINDOW] > 0 then
      slot = math.max(slot, p[P_NEXT])
    end
  end

  local ended = false  -- a counted window ends by this slot: its count is stale then
  for _, p in ipairs(st.pol) do
    if p[P_REMAINING] >= 0 and slot >= p[P_RESET] then ended = true end
  end

  local wait = slot - now
  local kind = GRANT_GRANTED
  if ended or st.pn == 1 then
    if st.po == 1 and st.pu > now then return {GRANT_AWAIT_PROBE, st.pu - now, st.e} end
    if wait > max_wait then return {GRANT_TOO_LATE, wait, st.e} end
    -- This caller is the probe. Its answer (any record received after its
    -- slot) releases the others; if none comes by pu, the next caller probes.
    st.po = 1
    st.ps = slot
    st.pu = slot + probe_timeout
    kind = GRANT_PROBE
  elseif wait > max_wait then
    return {GRANT_TOO_LATE, wait, st.e}
  end
  commit(st, slot, smooth, stretch, spread)
  save(key, st, now)
  return {kind, wait, st.e}
end

-- ---- record ----------------------------------------------------------------------

-- ARGV: op, now, age (how long ago the response was received), cooldown (''
-- none), spread seed, probe after cooldown (1|0), spread period, n; then n
-- policy updates of POLICY_ARGS each: id, limit, window, remaining, reset
-- (from now), reset resolution ('' where unknown).
-- Returns {blocked, released}: a cooldown started or grew (reservations made
-- before are void); an outstanding probe was answered (waiters may go on).
local function record(key)
  local now = now_us(ARGV[2])
  local age = tonumber(ARGV[3]) or 0
  if age < 0 then age = 0 end
  if age > now then age = now end
  local received = now - age
  local cooldown = tonumber(ARGV[4])
  local seed = tonumber(ARGV[5]) or 0
  if not (seed >= 0 and seed < 1) then seed = 0 end
  local probe_after = ARGV[6] == '1'
  local period = tonumber(ARGV[7]) or 0
  local n = tonumber(ARGV[8]) or -1
  if #ARGV ~= RECORD_FIXED_ARGS + n * POLICY_ARGS then
    return redis.error_reply('ERR abide pacer: a record has RECORD_FIXED_ARGS + n * POLICY_ARGS arguments')
  end
  local st = load(key)
  local blocked, released = 0, 0

  -- A response received after a window ended is fresh information about it:
  -- the window's count no longer applies.
  for _, p in ipairs(st.pol) do
    if p[P_REMAINING] >= 0 and received >= p[P_RESET] then p[P_REMAINING] = -1 end
  end

  -- The probe's answer, or any response received after the cooldown ended, is
  -- the fresh information the waiters wait for.
  if (st.po == 1 and received >= st.ps) or (st.pn == 1 and received >= st.ce) then
    st.po = 0
    st.pn = 0
    released = 1
  end

  -- Workers released at `at` are spread over the period after it.
  local function release(at)
    st.se = at + period
    st.ss = seed
    st.sn = 0
  end

  if cooldown ~= nil and cooldown > 0 then
    local e = now + cooldown
    if e > st.ce then
      -- A cooldown only ever grows. It voids every reservation (a new epoch),
      -- the outstanding probe included; at its end either one probe goes
      -- first or everyone is released together, spread.
      st.ce = e
      st.e = st.e + 1
      blocked = 1
      st.po = 0
      if probe_after then st.pn = 1 else release(e) end
    end
  end
  if released == 1 and blocked == 0 then release(now) end

  for i = 0, n - 1 do
    local b = RECORD_FIXED_ARGS + 1 + i * POLICY_ARGS
    local id = string.sub(ARGV[b], 1, MAX_ID_BYTES)
    local limit = tonumber(ARGV[b + 1])
    local window = tonumber(ARGV[b + 2])
    local rem = tonumber(ARGV[b + 3])
    local reset = tonumber(ARGV[b + 4])
    local res = tonumber(ARGV[b + 5]) or 0
    local has_policy = limit ~= nil and limit > 0 and window ~= nil and window > 0
    local has_window = rem ~= nil and reset ~= nil
    if has_policy or rem ~= nil then
      local p = nil
      for _, q in ipairs(st.pol) do
        if q[P_ID] == id then
          p = q
          break
        end
      end
      -- A new policy needs a limit and window, or a count and reset; beyond
      -- MAX_POLICIES further ones are ignored (the state stays bounded).
      if p == nil and #st.pol < MAX_POLICIES and (has_policy or has_window) then
        p = {id, 0, 0, -1, 0, 0, 0}
        st.pol[#st.pol + 1] = p
      end
      if p ~= nil then
        if limit ~= nil and limit > 0 then p[P_LIMIT] = limit end
        if window ~= nil and window > 0 then p[P_WINDOW] = window end
        if rem ~= nil then
          if rem < 0 then rem = 0 end
          if reset ~= nil then
            local ra = now + math.max(reset, 0)
            -- A reset at or before now is a stale answer about a window already over.
            if ra > now then
              res = math.max(res, 0)
              -- A reset a whole window after the one being counted is the next
              -- window. (Two answers about one window differ by less than the
              -- server's rounding.)
              local next_window = p[P_WINDOW] > 0 and ra >= p[P_RESET] + p[P_WINDOW]
              if p[P_REMAINING] >= 0 and not next_window then
                -- The same window. Counts only go down (a late response
                -- reports too much), and the earliest reset is the closest:
                -- servers round times up, so every answer's reset is at or
                -- after the true one. A reset stated in steps of `res` (whole
                -- seconds) ends at most a step early, so ra - res bounds the
                -- true end from below: later answers only tighten the aim.
                p[P_REMAINING] = math.min(p[P_REMAINING], rem)
                p[P_RESET] = math.min(p[P_RESET], ra)
                local bound = ra - math.min(res, ra - now)
                local aim = p[P_AIM] or p[P_RESET]
                if bound < p[P_RESET] then aim = math.max(aim, bound) end
                p[P_AIM] = math.min(aim, p[P_RESET])
              else
                -- A window starts. Its first answer is aimed at most half way,
                -- so a window shorter than the step is still spread.
                p[P_REMAINING] = rem
                p[P_RESET] = ra
                p[P_AIM] = ra - math.min(res, math.floor((ra - now) / 2))
              end
            end
          elseif p[P_REMAINING] >= 0 then
            p[P_REMAINING] = math.min(p[P_REMAINING], rem)
          end
        end
      end
    end
  end
  save(key, st, now)
  return {blocked, released}
end

-- ---- check and abandon -------------------------------------------------------------

-- ARGV: op, epoch. Returns {1} when no cooldown began since that epoch.
local function check(key)
  local st = load(key)
  if st.e == tonumber(ARGV[2]) then return {1} end
  return {0}
end

-- ARGV: op, now. Forgets the outstanding probe: it will get no answer, so the
-- next acquire probes.
local function abandon(key)
  local st, found = load(key)
  if found then
    st.po = 0
    st.pu = 0
    save(key, st, now_us(ARGV[2]))
  end
  return {0}
end

-- ---- dispatch ----------------------------------------------------------------------

local operations = {
  [OP_ACQUIRE] = {acquire, ACQUIRE_ARGS},
  [OP_RECORD] = {record, nil},  -- variable: checked by record()
  [OP_CHECK] = {check, CHECK_ARGS},
  [OP_ABANDON] = {abandon, ABANDON_ARGS},
}
local operation = operations[tonumber(ARGV[1])]
if operation == nil then return redis.error_reply('ERR abide pacer: unknown operation') end
if operation[2] ~= nil and #ARGV ~= operation[2] then
  return redis.error_reply('ERR abide pacer: wrong number of arguments')
end
return operation[1](KEYS[1])
