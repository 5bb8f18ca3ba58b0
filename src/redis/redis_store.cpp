// RedisStore: the pacer's state machine (src/memory_store.cpp) as Lua scripts,
// run atomically by Redis, with a pool of hiredis connections, an in-process
// fallback and reconnection with backoff.
//
// Keep the scripts in step with memory_store.cpp: the same conformance suite
// runs against both. In Redis, times are whole microseconds (Lua numbers are
// doubles: exact up to 2^53 us, about 285 years).
#include "abide/redis_store.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace abide {
namespace {

// ---- SHA-1, to name scripts for EVALSHA ------------------------------------------

std::uint32_t rotl(std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

std::string sha1_hex(std::string_view message) {
  std::uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
  std::string data(message);
  const std::uint64_t bits = static_cast<std::uint64_t>(message.size()) * 8u;
  data.push_back(static_cast<char>(0x80));
  while (data.size() % 64 != 56) data.push_back('\0');
  for (int i = 7; i >= 0; --i) data.push_back(static_cast<char>((bits >> (i * 8)) & 0xffu));
  for (std::size_t off = 0; off < data.size(); off += 64) {
    std::uint32_t w[80];
    for (std::size_t i = 0; i < 16; ++i) {
      w[i] = 0;
      for (std::size_t j = 0; j < 4; ++j) {
        w[i] = (w[i] << 8) | static_cast<unsigned char>(data[off + i * 4 + j]);
      }
    }
    for (std::size_t i = 16; i < 80; ++i) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (std::size_t i = 0; i < 80; ++i) {
      std::uint32_t f = 0, k = 0;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5A827999u;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ED9EBA1u;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8F1BBCDCu;
      } else {
        f = b ^ c ^ d;
        k = 0xCA62C1D6u;
      }
      const std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = rotl(b, 30);
      b = a;
      a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const std::uint32_t v : h) {
    for (int s = 28; s >= 0; s -= 4) out.push_back(kHex[(v >> s) & 0xfu]);
  }
  return out;
}

// ---- the scripts -------------------------------------------------------------------

// State: {e = epoch, tat, ce = cooldown end, se = spread end, ss = spread seed,
// sn = spread count, pn = probe needed, po = probe out, ps = probe start,
// pu = probe until, pol = {{id, limit, window, remaining, reset_at, next,
// aim}, ...}} (a state saved without aim reads it as reset_at).
constexpr std::string_view kPrelude = R"lua(
local function now_us(arg)
  if arg ~= '' then return tonumber(arg) end
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function load(key)
  local raw = redis.call('GET', key)
  if raw then
    local ok, st = pcall(cmsgpack.unpack, raw)
    if ok and type(st) == 'table' and type(st.pol) == 'table' then return st, true end
  end
  return {e = 0, tat = 0, ce = 0, se = 0, ss = 0, sn = 0, pn = 0, po = 0, ps = 0, pu = 0, pol = {}}, false
end
local function save(key, st, now)
  local last = math.max(now, st.tat, st.ce, st.se, st.pu)
  local grace = 1000000
  for _, p in ipairs(st.pol) do
    last = math.max(last, p[6])
    if p[4] >= 0 then last = math.max(last, p[5]) end
    if p[3] > grace then grace = p[3] end
  end
  local ttl = math.ceil((last - now + grace) / 1000)
  if ttl < 1 then ttl = 1 end
  if ttl > 31536000000 then ttl = 31536000000 end
  redis.call('SET', key, cmsgpack.pack(st), 'PX', string.format('%d', ttl))
end
)lua";

// ARGV: now, max_wait, pacing (s|b), margin, probe_timeout, spread. All us.
// Returns {kind, wait, epoch}; kind 0 granted, 1 probe, 2 await probe, 3 too late.
constexpr std::string_view kAcquire = R"lua(
local key = KEYS[1]
local now = now_us(ARGV[1])
local max_wait = tonumber(ARGV[2])
local smooth = ARGV[3] == 's'
local stretch = 1 + tonumber(ARGV[4])
local probe_timeout = tonumber(ARGV[5])
local spread = tonumber(ARGV[6])
local st = load(key)
local slot = math.max(now, st.tat, st.ce)
for _, p in ipairs(st.pol) do
  if p[4] >= 0 then
    if p[4] == 0 then
      slot = math.max(slot, p[5])
    elseif smooth then
      slot = math.max(slot, math.min(p[6], p[5]))
    end
  elseif p[2] > 0 and p[3] > 0 then
    slot = math.max(slot, p[6])
  end
end
local ended = false
for _, p in ipairs(st.pol) do
  if p[4] >= 0 and slot >= p[5] then ended = true end
end
local wait = slot - now
local kind = 0
if ended or st.pn == 1 then
  if st.po == 1 and st.pu > now then return {2, st.pu - now, st.e} end
  if wait > max_wait then return {3, wait, st.e} end
  st.po = 1
  st.ps = slot
  st.pu = slot + probe_timeout
  kind = 1
elseif wait > max_wait then
  return {3, wait, st.e}
end
for _, p in ipairs(st.pol) do
  if p[4] >= 0 then
    if slot < p[5] and p[4] > 0 then
      if smooth then
        local left = math.max((p[7] or p[5]) - slot, 0)
        p[6] = slot + math.ceil(left * stretch / p[4])
      end
      p[4] = p[4] - 1
    end
  elseif p[2] > 0 and p[3] > 0 then
    p[6] = slot + math.ceil(p[3] / p[2] * stretch)
  end
end
st.tat = slot
if slot < st.se and spread > 0 then
  local u = st.ss + (st.sn % 1000000) * 0.6180339887498949
  u = u - math.floor(u)
  st.sn = st.sn + 1
  st.tat = slot + math.ceil(spread / 4 + u * spread * 0.75)
end
save(key, st, now)
return {kind, wait, st.e}
)lua";

// ARGV: now, age, cooldown ('' none), seed, probe after cooldown (1|0),
// spread period, n, then n x {id, limit, window, remaining, reset,
// reset resolution} ('' none).
// Returns {blocked, released}.
constexpr std::string_view kRecord = R"lua(
local key = KEYS[1]
local now = now_us(ARGV[1])
local age = tonumber(ARGV[2]) or 0
if age < 0 then age = 0 end
if age > now then age = now end
local received = now - age
local cooldown = tonumber(ARGV[3])
local seed = tonumber(ARGV[4]) or 0
if not (seed >= 0 and seed < 1) then seed = 0 end
local probe_after = ARGV[5] == '1'
local period = tonumber(ARGV[6]) or 0
local n = tonumber(ARGV[7]) or 0
local st = load(key)
local blocked, released = 0, 0
for _, p in ipairs(st.pol) do
  if p[4] >= 0 and received >= p[5] then p[4] = -1 end
end
if (st.po == 1 and received >= st.ps) or (st.pn == 1 and received >= st.ce) then
  st.po = 0
  st.pn = 0
  released = 1
end
local function release(at)
  st.se = at + period
  st.ss = seed
  st.sn = 0
end
if cooldown ~= nil and cooldown > 0 then
  local e = now + cooldown
  if e > st.ce then
    st.ce = e
    st.e = st.e + 1
    blocked = 1
    st.po = 0
    if probe_after then st.pn = 1 else release(e) end
  end
end
if released == 1 and blocked == 0 then release(now) end
for i = 0, n - 1 do
  local b = 8 + i * 6
  local id = ARGV[b]
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
      if q[1] == id then
        p = q
        break
      end
    end
    if p == nil and #st.pol < 8 and (has_policy or has_window) then
      p = {id, 0, 0, -1, 0, 0, 0}
      st.pol[#st.pol + 1] = p
    end
    if p ~= nil then
      if limit ~= nil and limit > 0 then p[2] = limit end
      if window ~= nil and window > 0 then p[3] = window end
      if rem ~= nil then
        if rem < 0 then rem = 0 end
        if reset ~= nil then
          local ra = now + math.max(reset, 0)
          if ra > now then
            res = math.max(res, 0)
            local next_window = p[3] > 0 and ra >= p[5] + p[3]
            if p[4] >= 0 and not next_window then
              p[4] = math.min(p[4], rem)
              p[5] = math.min(p[5], ra)
              local bound = ra - math.min(res, ra - now)
              local aim = p[7] or p[5]
              if bound < p[5] then aim = math.max(aim, bound) end
              p[7] = math.min(aim, p[5])
            else
              p[4] = rem
              p[5] = ra
              p[7] = ra - math.min(res, math.floor((ra - now) / 2))
            end
          end
        elseif p[4] >= 0 then
          p[4] = math.min(p[4], rem)
        end
      end
    end
  end
end
save(key, st, now)
return {blocked, released}
)lua";

// ARGV: epoch. Returns {1} when no cooldown began since.
constexpr std::string_view kCheck = R"lua(
local st = load(KEYS[1])
if st.e == tonumber(ARGV[1]) then return {1} end
return {0}
)lua";

// ARGV: now. Forgets the outstanding probe.
constexpr std::string_view kAbandon = R"lua(
local st, found = load(KEYS[1])
if found then
  st.po = 0
  st.pu = 0
  save(KEYS[1], st, now_us(ARGV[1]))
end
return {0}
)lua";

struct Script {
  std::string body;
  std::string sha;
  explicit Script(std::string_view main) : body(std::string(kPrelude) + std::string(main)), sha(sha1_hex(body)) {}
};

// ---- conversions -------------------------------------------------------------------

constexpr std::int64_t kMaxMicros = 315'576'000'000'000;  // ten years: longer is "forever"
constexpr std::uint64_t kFallbackEpoch = 1ULL << 63;       // marks epochs from the fallback store
constexpr std::size_t kMaxIdLength = 256;

std::int64_t micros_up(Duration d) {
  if (d <= Duration::zero()) return 0;
  const auto n = d.count();
  const std::int64_t us = n / 1000 + (n % 1000 != 0 ? 1 : 0);
  return std::min(us, kMaxMicros);
}

// For a resolution: rounding down aims later, never earlier.
std::int64_t micros_down(Duration d) {
  if (d <= Duration::zero()) return 0;
  return std::min<std::int64_t>(d.count() / 1000, kMaxMicros);
}

std::string num(std::int64_t v) { return std::to_string(v); }

std::string num(double v) {
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr);
}

Duration from_micros(long long us) {
  if (us <= 0) return Duration::zero();
  if (us >= kMaxMicros) return std::chrono::microseconds{kMaxMicros};
  return std::chrono::microseconds{us};
}

timeval to_timeval(Duration d) {
  if (d < std::chrono::milliseconds{1}) d = std::chrono::milliseconds{1};
  if (d > std::chrono::hours{1}) d = std::chrono::hours{1};
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(us / 1'000'000);
  tv.tv_usec = static_cast<suseconds_t>(us % 1'000'000);
  return tv;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

std::optional<std::string> percent_decode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (s.size() - i < 3) return std::nullopt;
    const int hi = hex(s[i + 1]);
    const int lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

// Blocks SIGPIPE on this thread while hiredis writes to a socket the server may
// have closed, and swallows one raised meanwhile: a dead server must not kill
// the process, and a library must not change the process's signal handling.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        sigtimedwait(&set_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t set_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept {
    if (r) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

Reply command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  SigpipeGuard guard;
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

struct RedisHandle final : QuotaStore::Handle {
  std::string key;
  std::shared_ptr<QuotaStore::Handle> fallback;
};

enum class Outcome { kOk, kDown, kBusy, kRefused };

}  // namespace

std::string_view to_string(RedisEvent e) noexcept {
  switch (e) {
    case RedisEvent::kDown: return "down";
    case RedisEvent::kRecovered: return "recovered";
    case RedisEvent::kScriptError: return "script_error";
  }
  return "unknown";
}

std::string RedisEndpoint::describe() const {
  if (!unix_socket.empty()) return "unix:" + unix_socket;
  const bool v6 = host.find(':') != std::string::npos;
  return "redis://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<RedisEndpoint, std::string> parse_redis_url(std::string_view url) {
  using R = Result<RedisEndpoint, std::string>;
  RedisEndpoint e;
  if (url.empty()) return R(fail(std::string("empty Redis location")));
  if (url.size() > 4096) return R(fail(std::string("Redis location longer than 4096 bytes")));
  for (const char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == ' ') return R(fail(std::string("control character or space in Redis location")));
  }
  if (url.front() == '/') {
    e.unix_socket = std::string(url);
    return e;
  }
  std::string_view rest;
  bool unix_scheme = false;
  if (starts_with_ci(url, "redis://")) {
    rest = url.substr(8);
  } else if (starts_with_ci(url, "unix://")) {
    unix_scheme = true;
    rest = url.substr(7);
  } else if (starts_with_ci(url, "unix:")) {
    unix_scheme = true;
    rest = url.substr(5);
  } else if (starts_with_ci(url, "rediss://")) {
    return R(fail(std::string("rediss:// (TLS) is not supported")));
  } else {
    return R(fail(std::string("unsupported Redis location: expected redis://, unix:// or a socket path")));
  }
  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  const std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    auto user = percent_decode(userinfo.substr(0, colon));
    auto pass = colon == std::string_view::npos ? std::optional<std::string>{std::string{}}
                                                : percent_decode(userinfo.substr(colon + 1));
    if (!user || !pass) return R(fail(std::string("bad percent-encoding in the Redis credentials")));
    e.user = std::move(*user);
    e.password = std::move(*pass);
  }
  if (unix_scheme) {
    if (!authority.empty() && authority != "localhost") {
      return R(fail(std::string("a unix socket location has no host")));
    }
    if (path.size() < 2) return R(fail(std::string("missing unix socket path")));
    e.unix_socket = std::string(path);
  } else {
    std::string_view host = authority;
    std::string_view port;
    if (!host.empty() && host.front() == '[') {
      const auto close = host.find(']');
      if (close == std::string_view::npos) return R(fail(std::string("unclosed '[' in Redis host")));
      const std::string_view after = host.substr(close + 1);
      host = host.substr(1, close - 1);
      if (!after.empty()) {
        if (after.front() != ':') return R(fail(std::string("unexpected text after Redis host")));
        port = after.substr(1);
      }
    } else if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
      port = host.substr(colon + 1);
      host = host.substr(0, colon);
    }
    if (host.empty()) return R(fail(std::string("missing Redis host")));
    e.host = std::string(host);
    if (!port.empty()) {
      unsigned value = 0;
      const auto r = std::from_chars(port.data(), port.data() + port.size(), value);
      if (r.ec != std::errc{} || r.ptr != port.data() + port.size() || value == 0 || value > 65535) {
        return R(fail(std::string("bad Redis port")));
      }
      e.port = static_cast<std::uint16_t>(value);
    }
    if (path.size() > 1) {
      auto prefix = percent_decode(path.substr(1));
      if (!prefix) return R(fail(std::string("bad percent-encoding in the Redis key prefix")));
      e.prefix = std::move(*prefix);
    }
  }
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (param.empty()) continue;
    if (param.substr(0, 7) == "prefix=") {
      auto prefix = percent_decode(param.substr(7));
      if (!prefix) return R(fail(std::string("bad percent-encoding in the Redis key prefix")));
      if (!prefix->empty()) e.prefix = std::move(*prefix);
    } else {
      return R(fail(std::string("unknown parameter in Redis location (only prefix=)")));
    }
  }
  return e;
}

struct RedisStore::Impl {
  explicit Impl(RedisStoreOptions o) : options(std::move(o)), fallback(options.fallback) {
    if (options.connections == 0) options.connections = 1;
    if (options.reconnect_min <= Duration::zero()) options.reconnect_min = std::chrono::milliseconds{1};
    if (options.reconnect_max < options.reconnect_min) options.reconnect_max = options.reconnect_min;
  }
  ~Impl() {
    for (redisContext* c : idle) redisFree(c);
  }

  RedisStoreOptions options;
  MemoryStore fallback;
  const Script acquire_script{kAcquire};
  const Script record_script{kRecord};
  const Script check_script{kCheck};
  const Script abandon_script{kAbandon};

  std::mutex pool_mu;
  std::condition_variable pool_cv;
  std::vector<redisContext*> idle;
  std::size_t open = 0;

  std::atomic<bool> down{false};
  std::mutex health_mu;
  MonoTime next_attempt{};
  Duration backoff{};
  bool reconnecting = false;
  std::atomic<bool> script_error_reported{false};

  std::atomic<std::uint64_t> round_trips{0};
  std::atomic<std::uint64_t> fallbacks{0};
  std::atomic<std::uint64_t> failures{0};
  std::atomic<std::uint64_t> reconnects{0};

  void event(RedisEvent e, const std::string& message) const {
    if (options.on_event) options.on_event(e, message);
  }

  std::string time_arg(MonoTime now) const {
    if (options.time_base == RedisTimeBase::kServer) return {};
    return num(std::max<std::int64_t>(now.time_since_epoch().count() / 1000, 0));
  }

  // Connects and logs in; nullptr (and why) when Redis cannot be reached.
  redisContext* connect(std::string& why) const {
    const RedisEndpoint& ep = options.endpoint;
    const timeval tv = to_timeval(options.connect_timeout);
    redisContext* c = ep.unix_socket.empty() ? redisConnectWithTimeout(ep.host.c_str(), ep.port, tv)
                                             : redisConnectUnixWithTimeout(ep.unix_socket.c_str(), tv);
    if (c == nullptr) {
      why = "cannot allocate a connection";
      return nullptr;
    }
    if (c->err != 0) {
      why = c->errstr;
      redisFree(c);
      return nullptr;
    }
    redisSetTimeout(c, to_timeval(options.command_timeout));
    if (!ep.password.empty()) {
      std::vector<std::string> auth{"AUTH"};
      if (!ep.user.empty()) auth.push_back(ep.user);
      auth.push_back(ep.password);
      const Reply r = command(c, auth);
      if (!r || r->type == REDIS_REPLY_ERROR) {
        why = r ? "authentication failed" : c->errstr;
        redisFree(c);
        return nullptr;
      }
    }
    return c;
  }

  // A connection from the pool, a new one, or nullptr: kBusy (all in use past
  // the command timeout) or kDown (cannot connect).
  redisContext* take(Outcome& outcome, bool& fresh, std::string& why) {
    std::unique_lock lock(pool_mu);
    for (;;) {
      if (!idle.empty()) {
        redisContext* c = idle.back();
        idle.pop_back();
        fresh = false;
        return c;
      }
      if (open < options.connections) {
        ++open;
        lock.unlock();
        redisContext* c = connect(why);
        if (c == nullptr) {
          lock.lock();
          --open;
          pool_cv.notify_one();
          outcome = Outcome::kDown;
        }
        fresh = true;
        return c;
      }
      const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.command_timeout) +
                           std::chrono::milliseconds{1};
      if (!pool_cv.wait_for(lock, timeout, [&] { return !idle.empty() || open < options.connections; })) {
        outcome = Outcome::kBusy;
        return nullptr;
      }
    }
  }

  void give_back(redisContext* c) {
    std::lock_guard lock(pool_mu);
    idle.push_back(c);
    pool_cv.notify_one();
  }

  void discard(redisContext* c) {
    redisFree(c);
    std::lock_guard lock(pool_mu);
    --open;
    pool_cv.notify_one();
  }

  void drop_idle() {
    std::lock_guard lock(pool_mu);
    for (redisContext* c : idle) redisFree(c);
    open -= idle.size();
    idle.clear();
    pool_cv.notify_all();
  }

  // While down, only one caller at a time tries Redis again, once the backoff passed.
  bool may_try(MonoTime now, bool& retrying) {
    if (!down.load(std::memory_order_acquire)) return true;
    std::lock_guard lock(health_mu);
    if (!down.load(std::memory_order_relaxed)) return true;
    if (reconnecting || now < next_attempt) return false;
    reconnecting = true;
    retrying = true;
    return true;
  }

  void mark_down(MonoTime now, const std::string& why) {
    bool first = false;
    {
      std::lock_guard lock(health_mu);
      if (!down.load(std::memory_order_relaxed)) {
        down.store(true, std::memory_order_release);
        backoff = options.reconnect_min;
        first = true;
      } else if (reconnecting) {
        backoff = std::min(options.reconnect_max, saturating_add(backoff, backoff));
      }
      next_attempt = saturating_add(now, backoff);
      reconnecting = false;
    }
    drop_idle();  // pooled connections to a server that went away are useless now
    failures.fetch_add(1, std::memory_order_relaxed);
    if (first) {
      const bool closed = options.on_down == RedisDownPolicy::kFailClosed;
      event(RedisEvent::kDown, "redis " + options.endpoint.describe() + " unreachable (" + why + "); " +
                                   (closed ? "acquire waits for it (fail-closed)"
                                           : "continuing with the in-process store") +
                                   "; reconnecting with backoff");
    }
  }

  void mark_up() {
    if (!down.load(std::memory_order_acquire)) return;
    bool recovered = false;
    {
      std::lock_guard lock(health_mu);
      if (down.load(std::memory_order_relaxed)) {
        down.store(false, std::memory_order_release);
        recovered = true;
      }
      reconnecting = false;
    }
    if (recovered) {
      reconnects.fetch_add(1, std::memory_order_relaxed);
      event(RedisEvent::kRecovered, "redis " + options.endpoint.describe() + " reachable again");
    }
  }

  void end_retry() {
    std::lock_guard lock(health_mu);
    reconnecting = false;
  }

  static bool server_unusable(std::string_view error) {
    for (const std::string_view p : {"LOADING", "BUSY", "MASTERDOWN", "NOAUTH", "WRONGPASS", "READONLY",
                                     "NOPERM", "CLUSTERDOWN", "TRYAGAIN", "MISCONF"}) {
      if (error.substr(0, p.size()) == p) return true;
    }
    return false;
  }

  // Runs a script on a key: one EVALSHA (plus an EVAL if Redis lost the
  // script). On kOk, `out` holds the integers it returned.
  Outcome eval(const Script& script, const std::string& key, const std::vector<std::string>& args, MonoTime now,
               std::vector<long long>& out) {
    bool retrying = false;
    if (!may_try(now, retrying)) return Outcome::kDown;
    std::vector<std::string> argv;
    argv.reserve(args.size() + 4);
    argv.push_back("EVALSHA");
    argv.push_back(script.sha);
    argv.push_back("1");
    argv.push_back(key);
    argv.insert(argv.end(), args.begin(), args.end());
    // A pooled connection may have died quietly (a restarted server): then
    // once more on a fresh connection before calling Redis down.
    for (int attempt = 0; attempt < 2; ++attempt) {
      Outcome outcome = Outcome::kOk;
      bool fresh = false;
      std::string why;
      redisContext* c = take(outcome, fresh, why);
      if (c == nullptr) {
        if (outcome == Outcome::kDown) {
          mark_down(now, why);
        } else if (retrying) {
          end_retry();
        }
        return outcome;
      }
      argv[0] = "EVALSHA";
      argv[1] = script.sha;
      round_trips.fetch_add(1, std::memory_order_relaxed);
      Reply r = command(c, argv);
      if (r && r->type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).substr(0, 8) == "NOSCRIPT") {
        argv[0] = "EVAL";
        argv[1] = script.body;
        round_trips.fetch_add(1, std::memory_order_relaxed);
        r = command(c, argv);
      }
      if (!r) {
        why = c->errstr[0] != '\0' ? c->errstr : "no reply";
        discard(c);
        if (!fresh && attempt == 0) {
          drop_idle();  // the others are probably as stale
          continue;
        }
        mark_down(now, why);
        return Outcome::kDown;
      }
      if (r->type == REDIS_REPLY_ERROR) {
        const std::string error(r->str, std::min<std::size_t>(r->len, 200));
        give_back(c);
        if (server_unusable(error)) {
          mark_down(now, "server refuses commands: " + error.substr(0, error.find(' ')));
          return Outcome::kDown;
        }
        if (retrying) mark_up();
        if (!script_error_reported.exchange(true)) {
          event(RedisEvent::kScriptError, "redis " + options.endpoint.describe() + " refused the pacer's script: " +
                                              error);
        }
        return Outcome::kRefused;
      }
      out.clear();
      if (r->type == REDIS_REPLY_ARRAY) {
        for (std::size_t i = 0; i < r->elements; ++i) {
          const redisReply* el = r->element[i];
          out.push_back(el != nullptr && el->type == REDIS_REPLY_INTEGER ? el->integer : 0);
        }
      }
      give_back(c);
      mark_up();
      return Outcome::kOk;
    }
    mark_down(now, "no reply");
    return Outcome::kDown;
  }

  // How long until Redis is tried again (for fail-closed waits).
  Duration retry_in(MonoTime now) {
    std::lock_guard lock(health_mu);
    const Duration d = next_attempt > now ? next_attempt - now : Duration::zero();
    return std::max(d, Duration{std::chrono::milliseconds{1}});
  }

  bool fail_closed() const { return options.on_down == RedisDownPolicy::kFailClosed; }
};

RedisStore::RedisStore(RedisStoreOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

RedisStore::~RedisStore() = default;

std::string RedisStore::redis_key(std::string_view key) const { return impl_->options.endpoint.prefix + std::string(key); }

std::shared_ptr<QuotaStore::Handle> RedisStore::open(std::string_view key) {
  auto h = std::make_shared<RedisHandle>();
  h->key = redis_key(key);
  h->fallback = impl_->fallback.open(key);
  return h;
}

StoreGrant RedisStore::acquire(Handle& key, const StoreAcquire& request, const PacingRules& rules) {
  auto& h = static_cast<RedisHandle&>(key);
  const std::vector<std::string> args{
      impl_->time_arg(request.now),
      request.max_wait < Duration::zero() ? std::string("-1") : num(std::min(request.max_wait.count() / 1000, kMaxMicros)),
      rules.pacing == Pacing::kSmooth ? "s" : "b",
      num(std::clamp(rules.safety_margin, 0.0, 1.0)),
      num(micros_up(rules.probe_timeout)),
      num(micros_up(rules.cooldown_spread)),
  };
  std::vector<long long> out;
  const Outcome o = impl_->eval(impl_->acquire_script, h.key, args, request.now, out);
  if (o == Outcome::kOk && out.size() >= 3 && out[0] >= 0 && out[0] <= 3) {
    StoreGrant g;
    static constexpr StoreGrant::Kind kKinds[] = {StoreGrant::Kind::kGranted, StoreGrant::Kind::kProbe,
                                                  StoreGrant::Kind::kAwaitProbe, StoreGrant::Kind::kTooLate};
    g.kind = kKinds[out[0]];
    g.wait = from_micros(out[1]);
    g.epoch = static_cast<std::uint64_t>(std::max<long long>(out[2], 0)) & ~kFallbackEpoch;
    return g;
  }
  if (impl_->fail_closed()) {
    return {StoreGrant::Kind::kUnavailable, impl_->retry_in(request.now), 0};
  }
  impl_->fallbacks.fetch_add(1, std::memory_order_relaxed);
  StoreGrant g = impl_->fallback.acquire(*h.fallback, request, rules);
  g.epoch |= kFallbackEpoch;
  return g;
}

RecordOutcome RedisStore::record(Handle& key, const StoreRecord& record, const PacingRules& rules) {
  auto& h = static_cast<RedisHandle&>(key);
  // The fallback store learns every response too, so an outage starts from
  // what was known (cooldowns, policies), not from nothing.
  RecordOutcome local;
  if (!impl_->fail_closed()) local = impl_->fallback.record(*h.fallback, record, rules);
  std::vector<std::string> args{
      impl_->time_arg(record.now),
      num(micros_up(record.age)),
      record.cooldown && *record.cooldown > Duration::zero() ? num(micros_up(*record.cooldown)) : std::string(),
      num(record.spread_seed >= 0.0 && record.spread_seed < 1.0 ? record.spread_seed : 0.0),
      rules.probe_after_cooldown ? "1" : "0",
      num(micros_up(rules.spread_period)),
  };
  const std::size_t n = std::min(record.policies.size(), 2 * kMaxPolicies);
  args.push_back(num(static_cast<std::int64_t>(n)));
  for (std::size_t i = 0; i < n; ++i) {
    const PolicyUpdate& u = record.policies[i];
    args.push_back(u.id.substr(0, kMaxIdLength));
    args.push_back(u.limit ? num(*u.limit) : std::string());
    args.push_back(u.window ? num(micros_up(*u.window)) : std::string());
    args.push_back(u.remaining ? num(*u.remaining) : std::string());
    args.push_back(u.reset ? num(micros_up(*u.reset)) : std::string());
    args.push_back(num(micros_down(u.reset_resolution)));
  }
  std::vector<long long> out;
  if (impl_->eval(impl_->record_script, h.key, args, record.now, out) == Outcome::kOk && out.size() >= 2) {
    return RecordOutcome{out[0] != 0, out[1] != 0};
  }
  if (!impl_->fail_closed()) impl_->fallbacks.fetch_add(1, std::memory_order_relaxed);
  return local;
}

bool RedisStore::still_valid(Handle& key, std::uint64_t epoch, MonoTime now) {
  auto& h = static_cast<RedisHandle&>(key);
  if ((epoch & kFallbackEpoch) != 0) return impl_->fallback.still_valid(*h.fallback, epoch & ~kFallbackEpoch, now);
  std::vector<long long> out;
  if (impl_->eval(impl_->check_script, h.key, {num(static_cast<std::int64_t>(epoch))}, now, out) == Outcome::kOk &&
      !out.empty()) {
    return out[0] == 1;
  }
  return true;  // cannot tell: the reservation was valid when made
}

void RedisStore::abandon_probe(Handle& key, MonoTime now) {
  auto& h = static_cast<RedisHandle&>(key);
  impl_->fallback.abandon_probe(*h.fallback, now);
  std::vector<long long> out;
  impl_->eval(impl_->abandon_script, h.key, {impl_->time_arg(now)}, now, out);
}

bool RedisStore::up() const noexcept { return !impl_->down.load(std::memory_order_acquire); }

RedisStoreStats RedisStore::stats() const noexcept {
  RedisStoreStats s;
  s.round_trips = impl_->round_trips.load(std::memory_order_relaxed);
  s.fallbacks = impl_->fallbacks.load(std::memory_order_relaxed);
  s.failures = impl_->failures.load(std::memory_order_relaxed);
  s.reconnects = impl_->reconnects.load(std::memory_order_relaxed);
  return s;
}

}  // namespace abide
