// The engine (abide/engine.h): what the requests of one Engine share (its
// config, clocks, planner and pacer, each origin's pacer key and server
// clock), and the blocking form, Engine::run, over the state machine of
// machine.cpp.
#include "abide/engine.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <utility>

#include "engine_impl.h"

namespace abide {
namespace {

// The scheme and authority of a URL as written ("HTTPS://Api.Example.com:443"),
// everything parse_origin reads for the origin and host. Empty when there is
// none, or when the authority carries userinfo (credentials are not kept).
// Plain loops: this runs for every request.
std::string_view origin_part(std::string_view url) noexcept {
  std::size_t i = 0;
  while (i + 2 < url.size() && !(url[i] == ':' && url[i + 1] == '/' && url[i + 2] == '/')) ++i;
  if (i + 2 >= url.size()) return {};
  for (std::size_t j = i + 3; j < url.size(); ++j) {
    const char c = url[j];
    if (c == '/' || c == '?' || c == '#') return url.substr(0, j);
    if (c == '@') return {};
  }
  return url;
}

// No byte that parse_origin rejects (controls, space, DEL; without its length
// rule). It runs over the rest of every request's URL, so eight bytes at a
// time: (w - 0x21 in each byte) & ~w has a byte's high bit set exactly when
// some byte is below 0x21 (no byte at or above it borrows), and the same with
// w ^ 0x7f.. and 0x01.. finds a DEL.
bool no_bad_bytes(std::string_view s) noexcept {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHigh = 0x8080808080808080ULL;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, s.data() + i, 8);
    const std::uint64_t del = w ^ (kOnes * 0x7f);
    if ((((w - kOnes * 0x21) & ~w) | ((del - kOnes) & ~del)) & kHigh) return false;
  }
  for (; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  return true;
}

// `part` is origin_part(url): url starts with it, and the authority ends there.
bool starts_with_part(std::string_view url, std::string_view part) noexcept {
  if (part.empty() || url.size() < part.size() || url.compare(0, part.size(), part) != 0) return false;
  if (url.size() == part.size()) return true;
  const char c = url[part.size()];
  return c == '/' || c == '?' || c == '#';
}

// The last origin this thread looked up, per engine: most requests go where
// the previous one went, and this skips the lock and the hash. It points into
// the engine's cache (entries are never erased), so it is trivially
// destructible and each access is a plain thread-local load; an engine's id is
// never reused, so an entry of a destroyed engine is never matched.
struct LastOrigin {
  std::uint64_t engine = 0;
  const std::string* part = nullptr;  // the cache's key
  const void* entry = nullptr;
};
thread_local LastOrigin last_origin;

std::atomic<std::uint64_t> next_engine_id{1};

std::shared_ptr<RandomSource> default_random() {
  std::random_device rd;
  const std::uint64_t seed = (std::uint64_t{rd()} << 32) ^ std::uint64_t{rd()};
  return std::make_shared<SeededRandom>(seed);
}

}  // namespace

namespace engine {

std::string_view to_string(OutcomeKind k) noexcept {
  switch (k) {
    case OutcomeKind::kDone: return "done";
    case OutcomeKind::kDeferred: return "deferred";
    case OutcomeKind::kDeadlineExceeded: return "deadline_exceeded";
    case OutcomeKind::kNotRetryable: return "not_retryable";
    case OutcomeKind::kExhausted: return "exhausted";
    case OutcomeKind::kCancelled: return "cancelled";
  }
  return "?";
}

}  // namespace engine

// ---- the engine's shared state ----

namespace detail {

// The engine's own pacer counts the quotas its planner counts, so both hold
// the same permitted time.
std::shared_ptr<Pacer> own_pacer(const engine::Config& c, const MonotonicClock& mono, const WallClock& wall) {
  PacerConfig p = c.pacer_config;
  p.use_low_confidence_quota = p.use_low_confidence_quota || c.planner.use_low_confidence_quota;
  p.mono = &mono;
  p.wall = &wall;
  return std::make_shared<Pacer>(p);
}

EngineImpl::EngineImpl(engine::Config config)
    : config_(std::move(config)),
      mono_(config_.mono != nullptr ? *config_.mono : system_monotonic_clock()),
      wall_(config_.wall != nullptr ? *config_.wall : system_wall_clock()),
      planner_(config_.planner),
      pacer_(config_.pacer ? config_.pacer : own_pacer(config_, mono_, wall_)),
      random_(config_.random ? config_.random : default_random()),
      id_(next_engine_id.fetch_add(1, std::memory_order_relaxed)) {}

ServerClock* EngineImpl::server_clock(std::string_view origin) {
  MutexLock lock(clocks_mu_);
  if (auto it = clocks_.find(origin); it != clocks_.end()) return it->second.get();
  if (clocks_.size() >= kMaxServerClocks) return nullptr;  // beyond it: each answer by its own Date
  return clocks_.emplace(std::string(origin), std::make_unique<ServerClock>()).first->second.get();
}

const EngineImpl::Origin* EngineImpl::origin(std::string_view url, Origin& scratch) {
  if (url.empty() || url.size() > 65536) return nullptr;
  LastOrigin& last = last_origin;
  if (last.engine == id_ && starts_with_part(url, *last.part)) {
    // The part's bytes were checked when it was cached.
    if (!no_bad_bytes(url.substr(last.part->size()))) return nullptr;
    return static_cast<const Origin*>(last.entry);
  }
  if (!no_bad_bytes(url)) return nullptr;
  const std::string_view part = origin_part(url);
  if (!part.empty()) {
    const std::pair<const std::string, Origin>* found = nullptr;
    {
      MutexLock lock(origins_mu_);
      if (auto it = origins_.find(part); it != origins_.end()) found = &*it;
    }
    if (found != nullptr) {
      last.engine = id_;
      last.part = &found->first;
      last.entry = &found->second;
      return &found->second;
    }
  }
  auto parts = parse_origin(url);
  if (!parts) return nullptr;
  scratch.key = pacer_->key(abide::pacer_key(parts->origin));
  scratch.clock = server_clock(parts->origin);
  scratch.host = std::move(parts->host);
  if (part.empty()) return &scratch;
  MutexLock lock(origins_mu_);
  // The cache holds pacer keys: it leaves the pacer at least half of its own bound.
  if (origins_.size() >= std::min(kMaxOrigins, pacer_->config().max_keys / 2)) return &scratch;
  const auto& entry = *origins_.try_emplace(std::string(part), std::move(scratch)).first;
  last.engine = id_;
  last.part = &entry.first;
  last.entry = &entry.second;
  return &entry.second;
}

}  // namespace detail

namespace engine {

// ---- Engine ----

Engine::Engine(Config config) : impl_(std::make_unique<detail::EngineImpl>(std::move(config))) {}
Engine::~Engine() = default;

Pacer& Engine::pacer() noexcept { return *impl_->pacer_; }
const Planner& Engine::planner() const noexcept { return impl_->planner_; }
const Config& Engine::config() const noexcept { return impl_->config_; }
const MonotonicClock& Engine::mono() const noexcept { return impl_->mono_; }
const WallClock& Engine::wall() const noexcept { return impl_->wall_; }

RequestOutcome Engine::run(const Request& request, Transport& transport, BodySink sink, std::stop_token stop,
                           std::size_t index, EventHook hook) {
  Machine r(*this, request, std::move(sink), index, std::move(hook));
  r.blocking_ = true;
  r.stop_ = stop;
  for (;;) {
    if (stop.stop_requested() && !r.finished()) r.cancel(false);
    const Step step = r.next();
    switch (step.kind) {
      case Step::Kind::kFinished: return r.take_outcome();
      case Step::Kind::kSend:
        transport.perform(request, step, r, stop);
        // A transport that reported nothing failed; one that did not say the
        // body ended finished it.
        if (r.state_ == Machine::State::kSending) r.failed("the transport reported no answer", true);
        if (r.state_ == Machine::State::kBody) r.complete();
        break;
      case Step::Kind::kWait:
        if (step.until > impl_->mono_.now() && impl_->mono_.sleep_until(step.until, stop) == WaitResult::kCancelled)
          r.cancel(false);
        break;
    }
  }
}

}  // namespace engine
}  // namespace abide
