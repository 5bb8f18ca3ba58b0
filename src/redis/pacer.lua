-- pacer.lua: the pacer's per-key state machine, run by Redis for RedisStore.
--
-- It is the state machine of src/pacing/kernel.cpp (the rules are described in
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
-- The learned policy (a key whose server announces no quota): this script
-- keeps the kernel's part of it alone, as pacing/kernel.cpp does. It
-- enforces what is learned (`L`) as a counted window, burst or smooth, its
-- first send a probe (with a Retry-After nothing is sent in a window's last
-- second: its boundary may be stated up to a second late); every
-- LEARNED_RAISE_AFTER windows spent in full and quiet raise n by n/16, and
-- with bare 429s each shortens the length by 1/LEARNED_BARE_SHRINK. It keeps
-- the learner's evidence (accepted answers, the probe's round trip). What an
-- answer teaches is decided in C++ only (pacing/learner.cpp): a record whose
-- answer teaches (teaches()) returns the lesson, and the caller's learner
-- publishes the new policy with OP_PUBLISH, a compare-and-set.
-- Units: every time and duration is a whole number of microseconds, the
-- kernel's own unit, rounded by the caller as src/pacing/units.h says; the
-- arithmetic is the kernel's, step for step, so both answer alike to the
-- microsecond (tests/store_differential_test.cpp). Lua numbers are doubles,
-- exact up to 2^53 us (about 285 years). "Now" comes from the
-- caller (its monotonic clock) or, when the caller sends '', from Redis's TIME,
-- which every client of this Redis shares.

-- ---- shared with C++ (pacer_script.h) -----------------------------------------

local OP_ACQUIRE = @OP_ACQUIRE@
local OP_RECORD = @OP_RECORD@
local OP_CHECK = @OP_CHECK@
local OP_ABANDON = @OP_ABANDON@
local OP_LEARNED = @OP_LEARNED@
local OP_PUBLISH = @OP_PUBLISH@
local OP_SETTLE = @OP_SETTLE@

local ACQUIRE_FIXED_ARGS = @ACQUIRE_FIXED_ARGS@
local COST_ARGS = @COST_ARGS@
local RECORD_FIXED_ARGS = @RECORD_FIXED_ARGS@
local POLICY_ARGS = @POLICY_ARGS@
local CHECK_ARGS = @CHECK_ARGS@
local ABANDON_ARGS = @ABANDON_ARGS@
local LEARNED_ARGS = @LEARNED_ARGS@
local PUBLISH_ARGS = @PUBLISH_ARGS@
local LEARNED_FIELDS = @LEARNED_FIELDS@

local GRANT_GRANTED = @GRANT_GRANTED@
local GRANT_PROBE = @GRANT_PROBE@
local GRANT_AWAIT_PROBE = @GRANT_AWAIT_PROBE@
local GRANT_TOO_LATE = @GRANT_TOO_LATE@

local CAUSE_NONE = @CAUSE_NONE@
local CAUSE_COOLDOWN = @CAUSE_COOLDOWN@
local CAUSE_QUOTA = @CAUSE_QUOTA@
local CAUSE_QUEUE = @CAUSE_QUEUE@
local CAUSE_PROBE = @CAUSE_PROBE@

local MAX_POLICIES = @MAX_POLICIES@
local MAX_ID_BYTES = @MAX_ID_BYTES@
local MICROS_PER_SECOND = @MICROS_PER_SECOND@

local LEARNED_MAX = @LEARNED_MAX@
local LEARNED_MIN_WINDOW = @LEARNED_MIN_WINDOW@
local LEARNED_MAX_WINDOW = @LEARNED_MAX_WINDOW@
local LEARNED_MAX_HOLD = @LEARNED_MAX_HOLD@
local LEARNED_RAISE_AFTER = @LEARNED_RAISE_AFTER@
local LEARNED_BARE_SHRINK = @LEARNED_BARE_SHRINK@
local STATED_STEP = @STATED_STEP@

-- ---- this script's own numbers ---------------------------------------------------

-- The cooldown spread steps through [0, 1) by the golden ratio from a random
-- seed (a low-discrepancy sequence), as pacing/kernel.cpp does (kGolden).
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
--   cc   what set it: 1 an exhausted quota's reset, 0 a cooldown the server
--        asked for (a state saved before cc existed reads 0).
--   se   spread end: slots before it are spaced by a random step, so workers
--        released together do not all start in the same millisecond.
--   ss   spread seed in [0, 1), from the caller's random source.
--   sn   how many spread steps were drawn since the release.
--   pn   probe needed (1): the next grant must be a probe (a cooldown ended and
--        nothing fresh is known yet).
--   po   probe out (1): a probe was handed out and not yet answered.
--   ps   probe start: the probe's slot. A response received after it is its answer.
--   pu   probe until: waiting for the probe ends here (it may never be answered).
--   bl   grants no counted window covered (nothing was known, or their slot was
--        past every window's end), not yet answered.
--   ba   the last blind grant's slot.
--   bu   the same for units other than requests: the amounts blind grants
--        reserved, an array of {unit, amount} in the order the units came
--        (absent: none; at most MAX_POLICIES units).
--   pol  up to MAX_POLICIES quota policies, each an array indexed below.
--   lc   accepted answers so far, while nothing is learned (absent: none).
--   L    the learned policy, an array indexed below (absent: nothing learned).
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
-- The window's first answer counts the sends in flight as spent, its later
-- answers give them back (pacing/kernel.cpp): a state saved before these
-- existed reads them as nil, and gives nothing back.
local P_SEEN = 8       -- the least remaining an answer reported in the current window
local P_OUT = 9        -- sends that may not be in it yet (those, and the window's own, not answered)
local P_OWED = 10      -- how many of the units the first answer took may still be given back
-- What the policy counts: '' requests (one per send), else a unit such as
-- tokens, of which a send takes the amount it stated. A state saved before
-- units existed reads nil: requests.
local P_UNIT = 11
-- When the answer that started the counted window was received: a send
-- answered before it was counted in an earlier window (OP_SETTLE). A state
-- saved before it existed reads nil: 0.
local P_BEGUN = 12

-- The learned policy (the same fields as pacing/kernel.cpp's Learned):
local L_MODE = 1       -- MODE_RA (from Retry-After) or MODE_BARE (from bare 429s)
local L_N = 2          -- sends per window
local L_LEN = 3        -- the window's length; 0 until two boundaries were seen
local L_GUESS = 4      -- the length used before then
local L_START = 5      -- the current window's start
local L_ANCHOR = 6     -- the last boundary an answer stated (or a probe found); 0: none
local L_SINCE = 7      -- windows rolled since the anchor
local L_ACCEPTED = 8   -- accepted answers received since the window's start
local L_USED = 9       -- sends granted in the current window
local L_QUIET = 10     -- windows ended without a limited answer since n last changed
local L_NEXT = 11      -- smooth pacing's next slot in the window
local L_HOLD = 12      -- bare: the hold while a window's end is searched for (0: not searching)
local L_HOLD_END = 13  -- bare: the next probe's slot
local L_SEARCH = 14    -- bare: when the search began
local L_WINDOWS = 15   -- windows it was learned from
local L_OPEN = 16      -- 0 from a window's first send (its probe) until a probe is answered
local L_RTT = 17       -- the last probe's round trip: answers sooner after a window began are the last one's
local L_FIRST = 18     -- 1: n is the first window's count, still open to answers that come back late
local L_FOUND = 19     -- bare: how late the anchor may be (its search's last hold and round trip)
local MODE_RA = 1
local MODE_BARE = 2

local function fresh_state()
  return {e = 0, tat = 0, ce = 0, cc = 0, se = 0, ss = 0, sn = 0, pn = 0, po = 0, ps = 0, pu = 0, bl = 0, ba = 0, pol = {}}
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
      if st.lc ~= nil and type(st.lc) ~= 'number' then st.lc = nil end
      if st.bu ~= nil then
        local ok_b = type(st.bu) == 'table' and #st.bu <= MAX_POLICIES
        for _, b in ipairs(ok_b and st.bu or {}) do
          ok_b = ok_b and type(b) == 'table' and type(b[1]) == 'string' and type(b[2]) == 'number'
        end
        if not ok_b then st.bu = nil end
      end
      if st.L ~= nil then
        -- A state saved before L_FIRST or L_FOUND existed reads them as 0.
        if type(st.L) == 'table' and #st.L == L_FOUND - 2 then st.L[L_FIRST] = 0 end
        if type(st.L) == 'table' and #st.L == L_FOUND - 1 then st.L[L_FOUND] = 0 end
        local ok_l = type(st.L) == 'table' and #st.L == LEARNED_FIELDS
        for i = 1, LEARNED_FIELDS do ok_l = ok_l and type(st.L[i]) == 'number' end
        if not ok_l then st.L = nil end
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
  local L = st.L
  if L ~= nil then
    local len = L[L_LEN] > 0 and L[L_LEN] or L[L_GUESS]
    last = math.max(last, L[L_START] + len, L[L_HOLD_END], L[L_NEXT])
    if len > grace then grace = len end
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

-- ---- the learned policy --------------------------------------------------------

local function clamp_len(d) return math.max(LEARNED_MIN_WINDOW, math.min(d, LEARNED_MAX_WINDOW)) end

local function learned_length(L)
  local len = L[L_LEN] > 0 and L[L_LEN] or L[L_GUESS]
  return math.max(len, LEARNED_MIN_WINDOW)
end

-- A send at `slot`: past the window's end the windows roll on at the learned
-- length (the send is the new window's probe), and the send counts.
local function commit_learned(L, slot, smooth, stretch)
  if L[L_HOLD] > 0 then return end  -- the probe for a window's end: counted when answered
  local len = learned_length(L)
  if slot >= L[L_START] + len then
    local k = math.floor((slot - L[L_START]) / len)
    -- Only a window spent in full that ended quiet says the limit may be
    -- higher; idle windows say nothing.
    local full = L[L_USED] >= L[L_N]
    L[L_FIRST] = 0  -- late answers of the first window are counted no more
    L[L_START] = L[L_START] + len * k
    L[L_SINCE] = math.min(L[L_SINCE] + k, LEARNED_MAX)
    if full then L[L_QUIET] = math.min(L[L_QUIET] + 1, LEARNED_MAX) end
    L[L_USED] = 0
    L[L_ACCEPTED] = 0
    L[L_OPEN] = 0
    if L[L_MODE] == MODE_BARE and full then
      -- Bare 429s tell no end: a quiet window shortens the found one, a
      -- slow raise of the rate until a probe is limited and a search runs.
      local shorter = len - math.floor(len / LEARNED_BARE_SHRINK)
      if L[L_LEN] > 0 then L[L_LEN] = clamp_len(shorter) else L[L_GUESS] = clamp_len(shorter) end
    end
    if L[L_QUIET] >= LEARNED_RAISE_AFTER then
      -- Probing upward, slowly: a raised limit is found again.
      L[L_N] = math.min(LEARNED_MAX, L[L_N] + math.max(1, math.floor(L[L_N] / 16)))
      L[L_QUIET] = 0
    end
  end
  if smooth and L[L_USED] < L[L_N] then
    -- What is left of n, up to the window's earliest possible end (its
    -- boundary was stated in whole seconds: it may be up to one late).
    -- A stated window is not stretched by the safety margin (the aim is that
    -- margin already); a found one (bare 429s) keeps it.
    local aim = L[L_START] + len - math.min(STATED_STEP, math.floor(len / 2))
    local left = math.max(aim - slot, 0)
    local k = L[L_MODE] == MODE_RA and 1 or stretch
    L[L_NEXT] = slot + math.ceil(left * k / (L[L_N] - L[L_USED]))
  end
  L[L_USED] = math.min(L[L_USED] + 1, LEARNED_MAX)
end

-- Whether an answer is the learner's (pacing/learner.cpp, teaches()): the
-- limited ones (but a first one with nothing accepted before it), and the
-- accepted ones that place the first window's count, end a bare 429's search
-- or confirm a guessed length. Such an answer goes back to the caller, whose
-- learner publishes what it teaches (OP_PUBLISH).
local function teaches(st, received, limited)
  local L = st.L
  if limited then return L ~= nil or (st.lc or 0) > 0 end
  if L == nil then return false end
  local searching = L[L_MODE] == MODE_BARE and L[L_HOLD] > 0
  if L[L_FIRST] == 1 and searching and received < L[L_HOLD_END] then return true end
  if L[L_FIRST] == 1 and L[L_MODE] == MODE_RA and received < L[L_START] then return true end
  if searching and received >= L[L_HOLD_END] then return true end
  return L[L_LEN] == 0 and L[L_SINCE] > 0 and received >= L[L_START]
end

-- The kernel's part of an answer for the learner (pacing/kernel.cpp,
-- learn_from()): an announced quota drops what was learned (the server's word
-- wins); a probe's answer opens the learned window and measures the round
-- trip; an accepted answer that teaches nothing is counted in the window its
-- request was sent in, as far as the round trip tells. True: it teaches.
local function learn_from(st, received, limited, probe_answered)
  if #st.pol > 0 then
    st.L = nil
    st.lc = nil
    return false
  end
  local L = st.L
  if L ~= nil and probe_answered then
    L[L_OPEN] = 1
    if st.ps > 0 and received >= st.ps then L[L_RTT] = math.min(received - st.ps, LEARNED_MAX_HOLD) end
  end
  if teaches(st, received, limited) then return true end
  if not limited then
    if L == nil then
      st.lc = math.min((st.lc or 0) + 1, LEARNED_MAX)
    elseif received >= L[L_START] + L[L_RTT] then
      L[L_ACCEPTED] = math.min(L[L_ACCEPTED] + 1, LEARNED_MAX)
    end
  end
  return false
end

-- The learned policy as the learner reads it: LEARNED_FIELDS numbers in L's order;
-- mode 0 while nothing is learned, with the answers accepted so far.
local function learned_fields(st)
  if st.L ~= nil then return st.L end
  local f = {}
  for i = 1, LEARNED_FIELDS do f[i] = 0 end
  f[L_ACCEPTED] = st.lc or 0
  f[L_OPEN] = 1
  return f
end

-- ---- acquire ---------------------------------------------------------------------

-- A send's costs in units other than requests, from ARGV[first] (a count)
-- on: {list = the {unit, amount} pairs in order, by = amount per unit}. The
-- caller sends each unit once, normalized (pacing::unit_of).
local function read_costs(first)
  local n = tonumber(ARGV[first]) or 0
  local c = {list = {}, by = {}}
  for i = 0, n - 1 do
    local unit = ARGV[first + 1 + i * COST_ARGS]
    local amount = math.max(math.min(tonumber(ARGV[first + 2 + i * COST_ARGS]) or 0, LEARNED_MAX), 0)
    c.list[#c.list + 1] = {unit, amount}
    if c.by[unit] == nil then c.by[unit] = amount end
  end
  return c, first + 1 + n * COST_ARGS
end

local function unit_of(p) return p[P_UNIT] or '' end

-- What a send needs of policy p: one unit of a request quota, its stated
-- amount of any other (none stated: nothing).
local function need(p, costs)
  local u = unit_of(p)
  if u == '' then return 1 end
  return costs.by[u] or 0
end

local function blind_amount(st, unit)
  for _, b in ipairs(st.bu or {}) do
    if b[1] == unit then return b[2] end
  end
  return 0
end

-- A grant's amounts that no counted window of their unit covered are blind
-- (kernel.cpp, note_blind_units).
local function note_blind_units(st, slot, costs)
  for _, c in ipairs(costs.list) do
    local unit, n = c[1], c[2]
    if n > 0 and unit ~= '' then
      local covered = false
      for _, p in ipairs(st.pol) do
        if p[P_REMAINING] >= 0 and slot < p[P_RESET] and unit_of(p) == unit then covered = true end
      end
      if not covered then
        st.bu = st.bu or {}
        local b = nil
        for _, x in ipairs(st.bu) do
          if x[1] == unit then b = x end
        end
        if b == nil and #st.bu < MAX_POLICIES then
          b = {unit, 0}
          st.bu[#st.bu + 1] = b
        end
        if b ~= nil then
          b[2] = math.min(b[2] + n, LEARNED_MAX)
          st.ba = math.max(st.ba, slot)
        end
      end
    end
  end
end

-- Takes what a send at `slot` needs of every policy (one unit of a request
-- quota, the stated amount of any other), and the key's schedule moves on.
local function commit(st, slot, smooth, stretch, spread, costs)
  if st.L ~= nil and #st.pol == 0 then commit_learned(st.L, slot, smooth, stretch) end
  local counted = false  -- by a request quota's window
  for _, p in ipairs(st.pol) do
    local n = need(p, costs)
    if p[P_REMAINING] >= 0 then
      if slot < p[P_RESET] and unit_of(p) == '' then counted = true end
      if slot < p[P_RESET] and n > 0 and p[P_REMAINING] >= n then
        if smooth then
          -- Divide what is left of the window among what is left of the quota,
          -- in proportion to what this send takes of it, stretched by the
          -- safety margin, so the quota lasts to the window's earliest
          -- possible end (the aim).
          local left = math.max((p[P_AIM] or p[P_RESET]) - slot, 0)
          p[P_NEXT] = slot + math.ceil(left * stretch * n / p[P_REMAINING])
        end
        p[P_REMAINING] = p[P_REMAINING] - n
        p[P_OUT] = math.min((p[P_OUT] or 0) + n, LEARNED_MAX)
      end
    elseif p[P_LIMIT] > 0 and p[P_WINDOW] > 0 and n > 0 then
      -- Only the policy is known (no count): an even spacing of limit per
      -- window (GCRA).
      p[P_NEXT] = slot + math.ceil(p[P_WINDOW] / p[P_LIMIT] * n * stretch)
    end
  end
  if not counted then
    st.bl = math.min(st.bl + 1, LEARNED_MAX)
    st.ba = math.max(st.ba, slot)
  end
  if #costs.list > 0 then note_blind_units(st, slot, costs) end
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
-- smooth (1) or burst (0), safety margin in [0, 1], probe timeout, spread,
-- then the costs (a count, then unit and amount for each).
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
  local costs, past = read_costs(ACQUIRE_FIXED_ARGS)
  if past ~= #ARGV + 1 then
    return redis.error_reply('ERR abide pacer: an acquire has ACQUIRE_FIXED_ARGS + n * COST_ARGS arguments')
  end
  local st = load(key)

  -- The slot is the latest of these bounds; the first to set it is the
  -- cause (kernel.cpp's acquire, in the same order).
  local slot, cause = now, CAUSE_NONE
  -- The announced policy that set the slot (if one did) and what the send
  -- needs of it: the grant names it (StoreGrant::held).
  local held, held_need = nil, 0
  local cool_cause = st.cc == 1 and CAUSE_QUOTA or CAUSE_COOLDOWN
  local function bound(t, c, by, by_need)
    if t > slot then slot, cause, held, held_need = t, c, by, by_need or 0 end
  end
  -- Slots spread out after a cooldown are still the cooldown's doing.
  bound(st.tat, st.tat <= st.se and cool_cause or CAUSE_QUEUE)
  bound(st.ce, cool_cause)
  for _, p in ipairs(st.pol) do
    -- A send that needs nothing of a quota (no tokens stated) is not held by it.
    local n = need(p, costs)
    if p[P_REMAINING] >= 0 then
      if n > p[P_REMAINING] then
        -- Not enough left: the next window (its probe) decides.
        bound(p[P_RESET], CAUSE_QUOTA, p, n)
      elseif smooth and n > 0 then
        -- A smooth slot past the reset means: the next send is the probe, at the reset.
        bound(math.min(p[P_NEXT], p[P_RESET]), CAUSE_QUOTA, p, n)
      end
    elseif p[P_LIMIT] > 0 and p[P_WINDOW] > 0 and n > 0 then
      bound(p[P_NEXT], CAUSE_QUOTA, p, n)
    end
  end

  local ended = false  -- a counted window ends by this slot: its count is stale then
  local L = st.L
  if L ~= nil and #st.pol == 0 then
    -- The learned policy: one more bound, it only restrains. The first send
    -- of each learned window, and the one after a bare 429's hold, is a probe.
    if L[L_HOLD] > 0 then
      bound(L[L_HOLD_END], CAUSE_QUOTA)
      ended = true
    else
      local len = learned_length(L)
      local e = L[L_START] + len
      if L[L_USED] >= L[L_N] then
        bound(e, CAUSE_QUOTA)
      elseif smooth then
        bound(math.min(L[L_NEXT], e), CAUSE_QUOTA)
      end
      -- The window may truly end up to a stated step before e (its boundary
      -- was stated late): a send after that waits for the next window.
      if L[L_MODE] == MODE_RA and slot >= e - math.min(STATED_STEP, math.floor(len / 2)) then
        bound(e, CAUSE_QUOTA)
      end
      if slot >= e or L[L_OPEN] == 0 then ended = true end
    end
  end
  for _, p in ipairs(st.pol) do
    if p[P_REMAINING] >= 0 and slot >= p[P_RESET] then ended = true end
  end

  local wait = slot - now
  -- The grant's reply: kind, wait, epoch, cause, then the policy that set the
  -- wait (remaining, limit, need, unit), read before commit spends from it.
  local function reply(k)
    if held == nil then return {k, wait, st.e, cause} end
    return {k, wait, st.e, cause, held[P_REMAINING], held[P_LIMIT], held_need, unit_of(held)}
  end
  local kind = GRANT_GRANTED
  if ended or st.pn == 1 then
    if st.po == 1 and st.pu > now then return {GRANT_AWAIT_PROBE, st.pu - now, st.e, CAUSE_PROBE} end
    if wait > max_wait then return reply(GRANT_TOO_LATE) end
    -- This caller is the probe. Its answer (any record received after its
    -- slot) releases the others; if none comes by pu, the next caller probes.
    st.po = 1
    st.ps = slot
    st.pu = slot + probe_timeout
    kind = GRANT_PROBE
  elseif wait > max_wait then
    return reply(GRANT_TOO_LATE)
  end
  local answer = reply(kind)
  commit(st, slot, smooth, stretch, spread, costs)
  save(key, st, now)
  return answer
end

-- ---- record ----------------------------------------------------------------------

-- ARGV: op, now, age (how long ago the response was received), cooldown (''
-- none), spread seed, probe after cooldown (1|0), spread period, limited
-- (1|0: a 429 or 503, with or without a cooldown), cooldown floor ('': the
-- cooldown is kept whole; a number: it is an exhausted quota's, which may end
-- where the spent window does, never before now + floor), probe timeout, n; then n
-- policy updates of POLICY_ARGS each: id, limit, window, remaining, reset
-- (from now), reset resolution ('' where unknown), unit ('' requests); then
-- what the answer's request reserved and what it used, each a count and
-- COST_ARGS per cost.
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
  local limited = ARGV[8] == '1'
  local floor = tonumber(ARGV[9])
  local probe_timeout = tonumber(ARGV[10]) or 0
  local n = tonumber(ARGV[11]) or -1
  local reserved, used, past = nil, nil, 0
  if n >= 0 and #ARGV > RECORD_FIXED_ARGS + n * POLICY_ARGS + 1 then
    reserved, past = read_costs(RECORD_FIXED_ARGS + n * POLICY_ARGS + 1)
    if past <= #ARGV then used, past = read_costs(past) end
  end
  if used == nil or past ~= #ARGV + 1 then
    return redis.error_reply('ERR abide pacer: a record has RECORD_FIXED_ARGS + n * POLICY_ARGS arguments, then costs')
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

  -- This answer's request was one grant; the others granted blind (bl) and
  -- not yet answered may have reached the server after it, so the count it
  -- reports does not have them in yet. A window starting now spends them
  -- first (a few too many when they were counted before it: never too few).
  -- Grants that never get an answer (a transport failure records nothing)
  -- are forgotten a probe timeout after the last blind grant (ba).
  if now > st.ba + probe_timeout then
    st.bl = 0
    st.bu = nil
  end
  local others = math.max(st.bl - 1, 0)
  if st.bl > 0 then st.bl = st.bl - 1 end
  -- The other units alike: what this answer's request reserved is answered.
  for _, b in ipairs(st.bu or {}) do b[2] = math.max(b[2] - (reserved.by[b[1]] or 0), 0) end
  local started = false  -- a request quota's window
  local started_units = {}
  local pinned = 0  -- the latest end of a window this answer says is spent
  local untracked_spent = false
  for i = 0, n - 1 do
    local b = RECORD_FIXED_ARGS + 1 + i * POLICY_ARGS
    local id = string.sub(ARGV[b], 1, MAX_ID_BYTES)
    local limit = tonumber(ARGV[b + 1])
    local window = tonumber(ARGV[b + 2])
    local rem = tonumber(ARGV[b + 3])
    local reset = tonumber(ARGV[b + 4])
    local res = tonumber(ARGV[b + 5]) or 0
    local unit = ARGV[b + 6]
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
        p = {id, 0, 0, -1, 0, 0, 0, 0, 0, 0, unit, 0}
        st.pol[#st.pol + 1] = p
      elseif p == nil and rem ~= nil and rem <= 0 then
        untracked_spent = true  -- its window's end is not known here
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
                -- This answer's reservation is answered. What it says was
                -- used settles it first: the unused part comes back, an
                -- overrun is taken (never above the limit, never below 0).
                local u = unit_of(p)
                local mine = u == '' and 1 or (reserved.by[u] or 0)
                if u ~= '' and used.by[u] ~= nil then
                  local left = math.max(p[P_REMAINING] + mine - used.by[u], 0)
                  if p[P_LIMIT] > 0 then left = math.min(left, p[P_LIMIT]) end
                  p[P_REMAINING] = left
                end
                p[P_REMAINING] = math.min(p[P_REMAINING], rem)
                p[P_SEEN] = math.min(p[P_SEEN] or rem, rem)
                p[P_OUT] = math.max((p[P_OUT] or 0) - mine, 0)
                local left = p[P_SEEN] - p[P_OUT]
                if (p[P_OWED] or 0) > 0 and left > p[P_REMAINING] then
                  -- The least count, less what may still be out, is left:
                  -- never more back than the first answer took.
                  local back = math.min(left - p[P_REMAINING], p[P_OWED])
                  p[P_OWED] = p[P_OWED] - back
                  p[P_REMAINING] = p[P_REMAINING] + back
                end
                if rem == 0 and ra > p[P_RESET] + math.max(res, STATED_STEP) then
                  -- A spent count whose reset is later than the window's end
                  -- by more than rounding explains moves that end (kernel.cpp).
                  p[P_RESET] = ra
                else
                  p[P_RESET] = math.min(p[P_RESET], ra)
                end
                local bound = ra - math.min(res, ra - now)
                local aim = p[P_AIM] or p[P_RESET]
                if bound < p[P_RESET] then aim = math.max(aim, bound) end
                p[P_AIM] = math.min(aim, p[P_RESET])
              else
                -- A window starts. Its first answer is aimed at most half way,
                -- so a window shorter than the step is still spread.
                local u = unit_of(p)
                local before = u == '' and others or blind_amount(st, u)
                -- Tokens are mostly a bucket (kernel.cpp): what the last
                -- window granted and is still out is spent from this one too.
                if u ~= '' and (p[P_OUT] or 0) > 0 and now <= p[P_RESET] + probe_timeout then
                  before = math.min(before + math.max(p[P_OUT] - (reserved.by[u] or 0), 0), LEARNED_MAX)
                end
                p[P_REMAINING] = math.max(rem - before, 0)
                p[P_SEEN] = rem
                p[P_OUT] = before
                p[P_OWED] = before
                p[P_RESET] = ra
                p[P_AIM] = ra - math.min(res, math.floor((ra - now) / 2))
                p[P_BEGUN] = received
                if u == '' then started = true else started_units[u] = true end
              end
              if rem == 0 then pinned = math.max(pinned, p[P_RESET]) end
            end
          elseif p[P_REMAINING] >= 0 then
            p[P_REMAINING] = math.min(p[P_REMAINING], rem)
            -- What is given back stays below it.
            if p[P_SEEN] ~= nil then p[P_SEEN] = math.min(p[P_SEEN], rem) end
          end
        end
      end
    end
  end
  if started then st.bl = 0 end
  if st.bu ~= nil then
    local kept = {}
    for _, b in ipairs(st.bu) do
      if not started_units[b[1]] and b[2] > 0 then kept[#kept + 1] = b end
    end
    st.bu = #kept > 0 and kept or nil
  end
  if cooldown ~= nil and cooldown > 0 then
    local e = now + cooldown
    if floor ~= nil and pinned > 0 and not untracked_spent and pinned < e then
      -- A spent window's cooldown ends where the window does: at the earliest
      -- reset any answer gave it (each is at or after the true end), not at
      -- this answer's own, which may be rounded up most of a second later.
      -- What a Retry-After states stays whole.
      e = math.max(pinned, now + math.max(floor, 0))
    end
    if e > st.ce then
      -- A cooldown only ever grows. It voids every reservation (a new epoch),
      -- the outstanding probe included; at its end either one probe goes
      -- first or everyone is released together, spread.
      st.ce = e
      st.cc = floor ~= nil and 1 or 0
      st.e = st.e + 1
      blocked = 1
      st.po = 0
      -- Every slot after now was a reservation, void now: the queue starts
      -- again from here, and a learned window that has not begun has spent
      -- nothing yet (its slots would otherwise count twice when asked again).
      st.tat = math.min(st.tat, now)
      local L = st.L
      if L ~= nil and now < L[L_START] then
        L[L_USED] = 0
        L[L_NEXT] = L[L_START]
      end
      if probe_after then st.pn = 1 else release(e) end
    end
  end
  if released == 1 and blocked == 0 then release(now) end

  local taught = learn_from(st, received, limited, released == 1)
  save(key, st, now)
  if not taught then return {blocked, released} end
  -- The lesson: what the learner reads of the answer, and the policy it learns from.
  local out = {blocked, released, 1, now, received, limited and 1 or 0,
               (cooldown ~= nil and cooldown > 0) and cooldown or 0}
  for i, v in ipairs(learned_fields(st)) do out[7 + i] = v end
  return out
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

-- ARGV: op. What the key learned, for people: {0} while nothing is (or the
-- server announces a quota), else {1, n, length (0: not found yet),
-- measured (1|0), windows, from Retry-After (1|0)}. Changes nothing.
local function learned(key)
  local st = load(key)
  local L = st.L
  if L == nil or #st.pol > 0 then return {0} end
  local measured = L[L_LEN] > 0
  return {1, L[L_N], measured and L[L_LEN] or L[L_GUESS], measured and 1 or 0, L[L_WINDOWS],
          L[L_MODE] == MODE_RA and 1 or 0}
end

-- ---- publish ---------------------------------------------------------------------

-- ARGV: op, now, the learned policy a lesson was learned from (LEARNED_FIELDS
-- numbers), the one it taught (LEARNED_FIELDS). A compare-and-set: the learner ran
-- on a copy between two calls, so its policy is kept only when the key's is
-- still the one it started from. Returns {1} when kept; {0} when the server
-- announces a quota now (the lesson is void); else {2, the key's learned
-- policy now}, for the learner to run on again.
local function publish(key)
  local now = now_us(ARGV[2])
  local st = load(key)
  if #st.pol > 0 then return {0} end
  local current = learned_fields(st)
  for i = 1, LEARNED_FIELDS do
    if current[i] ~= tonumber(ARGV[2 + i]) then
      local out = {2}
      for j = 1, LEARNED_FIELDS do out[j + 1] = current[j] end
      return out
    end
  end
  local L = {}
  for i = 1, LEARNED_FIELDS do
    L[i] = tonumber(ARGV[2 + LEARNED_FIELDS + i])
    if L[i] == nil then return redis.error_reply('ERR abide pacer: a learned field is not a number') end
  end
  if L[L_MODE] == MODE_RA or L[L_MODE] == MODE_BARE then
    st.L = L
    st.lc = nil
  else
    st.L = nil
    st.lc = L[L_ACCEPTED]
  end
  save(key, st, now)
  return {1}
end

-- ---- settle ----------------------------------------------------------------------

-- ARGV: op, now, age (since the answer's head was received), then what its
-- send reserved and what its body says it used (each a count and COST_ARGS
-- per cost). In each window of a unit it used that counted the answer and
-- still counts, the unused part comes back and an overrun is taken
-- (kernel.cpp, settle()). Returns {0}.
local function settle(key)
  local now = now_us(ARGV[2])
  local age = math.max(tonumber(ARGV[3]) or 0, 0)
  if age > now then age = now end
  local received = now - age
  local reserved, past = read_costs(4)
  local used = nil
  if past <= #ARGV then used, past = read_costs(past) end
  if used == nil or past ~= #ARGV + 1 then
    return redis.error_reply('ERR abide pacer: a settle has 3 arguments, then costs')
  end
  local st, found = load(key)
  if not found then return {0} end
  for _, p in ipairs(st.pol) do
    local u = unit_of(p)
    if u ~= '' and p[P_REMAINING] >= 0 and received >= (p[P_BEGUN] or 0) and received < p[P_RESET]
        and used.by[u] ~= nil then
      local left = math.max(p[P_REMAINING] + (reserved.by[u] or 0) - used.by[u], 0)
      if p[P_LIMIT] > 0 then left = math.min(left, p[P_LIMIT]) end
      p[P_REMAINING] = left
    end
  end
  save(key, st, now)
  return {0}
end

-- ---- dispatch ----------------------------------------------------------------------

local operations = {
  [OP_ACQUIRE] = {acquire, nil},  -- variable: checked by acquire()
  [OP_RECORD] = {record, nil},  -- variable: checked by record()
  [OP_CHECK] = {check, CHECK_ARGS},
  [OP_ABANDON] = {abandon, ABANDON_ARGS},
  [OP_LEARNED] = {learned, LEARNED_ARGS},
  [OP_PUBLISH] = {publish, PUBLISH_ARGS},
  [OP_SETTLE] = {settle, nil},  -- variable: checked by settle()
}
local operation = operations[tonumber(ARGV[1])]
if operation == nil then return redis.error_reply('ERR abide pacer: unknown operation') end
if operation[2] ~= nil and #ARGV ~= operation[2] then
  return redis.error_reply('ERR abide pacer: wrong number of arguments')
end
return operation[1](KEYS[1])
