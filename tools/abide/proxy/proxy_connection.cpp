// One caller connection of `abide proxy`: its keep-alive loop (read a head,
// its body, forward or answer, repeat), on its own thread.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "abide/headers.h"
#include "common.h"
#include "proxy/answer_writer.h"
#include "proxy/http1_request.h"
#include "proxy/proxy_core.h"
#include "proxy/proxy_rules.h"

namespace abide::proxy {
namespace proxy_connection {  // private to this file (the CLI is compiled in batches)

constexpr std::size_t kHeadLimit = std::size_t{64} << 10;
constexpr std::size_t kBufferSize = kHeadLimit + (std::size_t{16} << 10);
// Abide-Max-Wait: 0 still lets a request go out at once when it is permitted
// (send_by is "no send after it": a bound of exactly now would send nothing).
constexpr Duration kMinBudget = std::chrono::milliseconds{10};
constexpr int kClientClosed = 499;

enum class Read : std::uint8_t { kData, kClosed, kTimeout, kWoken };

// The bytes read from the caller and not yet used: a fixed buffer, so a
// connection costs no allocation per request.
class Input {
 public:
  Input() : data_(std::make_unique_for_overwrite<char[]>(kBufferSize)) {}  // not zero-filled: 80 KB per held caller otherwise

  std::string_view view() const noexcept { return {data_.get() + begin_, end_ - begin_}; }
  bool empty() const noexcept { return begin_ == end_; }
  void consume(std::size_t n) noexcept {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }

  // Reads what the caller sent next, waiting at most until `deadline` (and,
  // with `wake`, until the drain starts).
  Read fill(int fd, int wake_fd, bool wake, MonoTime deadline, const MonotonicClock& mono) {
    if (end_ == kBufferSize) {
      // Room for more: what is unused moves to the front.
      std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == kBufferSize) return Read::kClosed;  // cannot happen within the head limit; never overrun
    for (;;) {
      const Duration left = deadline - mono.now();
      if (left <= Duration::zero()) return Read::kTimeout;
      pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      const int n = ::poll(fds, wake ? 2 : 1, static_cast<int>(std::min<std::int64_t>(ms, 60'000)));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Read::kClosed;
      }
      if (n == 0) continue;
      if (wake && (fds[1].revents & POLLIN) != 0 && (fds[0].revents & POLLIN) == 0) return Read::kWoken;
      const ssize_t got = ::recv(fd, data_.get() + end_, kBufferSize - end_, 0);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) return Read::kClosed;
      end_ += static_cast<std::size_t>(got);
      return Read::kData;
    }
  }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t begin_ = 0;  // unused bytes are [begin_, end_)
  std::size_t end_ = 0;
};

// One request's share of the memory every caller's bodies share
// (ProxyOptions::body_memory), given back when the request is done.
class BodyShare {
 public:
  BodyShare(std::atomic<std::uint64_t>& used, std::uint64_t limit) noexcept : used_(used), limit_(limit) {}
  ~BodyShare() { used_.fetch_sub(taken_); }
  BodyShare(const BodyShare&) = delete;
  BodyShare& operator=(const BodyShare&) = delete;

  // Grows the share to `bytes` in all; false when the shared memory would pass its limit.
  bool cover(std::uint64_t bytes) noexcept {
    if (bytes <= taken_) return true;
    const std::uint64_t more = bytes - taken_;
    std::uint64_t now = used_.load();
    do {
      if (now > limit_ || more > limit_ - now) return false;
    } while (!used_.compare_exchange_weak(now, now + more));
    taken_ = bytes;
    return true;
  }

 private:
  std::atomic<std::uint64_t>& used_;
  std::uint64_t limit_;
  std::uint64_t taken_ = 0;
};

// An Abide-Outcome the made answer may lack (a 503 of the proxy's own).
void ensure_field(MadeAnswer& a, std::string_view name, std::string_view value) {
  if (!a.head.headers.first(name)) a.head.headers.add(name, value);
}

// A made answer for a request that was forwarded carries that request's
// attempts and waits, not the made answer's zeros.
void set_counts(MadeAnswer& a, const RequestOutcome& out) {
  std::vector<Header> lines;
  lines.reserve(a.head.headers.size());
  for (const Header& h : a.head.headers.lines())
    if (!iequals(h.name, "Abide-Attempts") && !iequals(h.name, "Abide-Waited")) lines.push_back(h);
  HeaderList headers(std::move(lines));
  headers.add("Abide-Attempts", std::to_string(out.attempts.size()));
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.3f", to_seconds(out.waited));
  headers.add("Abide-Waited", waited);
  a.head.headers = std::move(headers);
}

// After an error answer the caller may still be sending (a body the proxy
// refused): its bytes are read and dropped for a moment, so that closing
// does not reset the connection before the answer is read.
void linger_close(int fd) {
  ::shutdown(fd, SHUT_WR);
  char sink[16384];
  std::size_t dropped = 0;
  for (int rounds = 0; rounds < 20 && dropped < (std::size_t{1} << 20); ++rounds) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) break;
    const ssize_t n = ::recv(fd, sink, sizeof sink, 0);
    if (n <= 0) break;
    dropped += static_cast<std::size_t>(n);
  }
}

class Session {
 public:
  Session(ProxyServer::Core& core, Connection& conn) : core_(core), conn_(conn), fd_(conn.fd) { scratch_.reserve(1024); }
  ~Session() { core_.watcher.unwatch(fd_, watch_); }  // before the socket is closed
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void run();
  // The last answer was an error after which the caller may still be sending.
  bool lingers() const noexcept { return linger_; }

 private:
  // Answers with a made answer; false: the connection closes.
  bool answer(const MadeAnswer& a, int version_minor, bool head_request, bool keep_alive);
  bool error(int status, std::string_view reason, int version_minor = 1) {
    linger_ = true;
    core_.stats.request_answered("", status, nullptr);
    log_caller(status, reason);
    static_cast<void>(answer(error_answer(status, reason, std::nullopt, std::nullopt, core_.wall.now()), version_minor,
                             false, false));
    return false;  // after bad input the stream cannot be trusted
  }
  void log_caller(int status, std::string_view reason) {
    if (core_.opts.verbose) core_.log(cat_line("answered ", status, " to a caller: ", reason));
  }
  // Reads the body the head frames into `body`, within `share`; an error
  // answer and false when it cannot.
  bool read_body(const RequestHead& head, const BodyFraming& framing, std::string& body, BodyShare& share);
  // The bodies in memory are at their limit: come back in a second.
  bool too_much_body(int version_minor);
  // Own pages (/__abide/...).
  bool own_page(const RequestHead& head, bool keep_alive);
  // Forwards under `route`; false: the connection closes.
  bool forward(const RequestHead& head, const Route& route, Duration budget, std::vector<UnitCost> costs,
               std::string body, bool keep_alive);

  ProxyServer::Core& core_;
  Connection& conn_;
  int fd_;
  Input in_;
  std::string scratch_;  // heads written
  bool linger_ = false;
  std::stop_source stop_;  // the current request's (see forward)
  std::uint64_t watch_ = 0;  // the hang-up watch, from the first forwarded request on
};

bool Session::answer(const MadeAnswer& a, int version_minor, bool head_request, bool keep_alive) {
  AnswerWriter w(fd_, version_minor, head_request, keep_alive, scratch_);
  return w.made(a) && !w.must_close();
}

void Session::run() {
  for (;;) {
    // Between requests: idle, and reclaimable (see Connection).
    int busy = Connection::kBusy;
    conn_.state.compare_exchange_strong(busy, Connection::kIdle);
    if (conn_.state.load() == Connection::kReclaimed) return;
    // --- the head ----------------------------------------------------------
    const MonoTime idle_deadline = saturating_add(core_.mono.now(), core_.opts.idle_timeout);
    MonoTime head_deadline = idle_deadline;
    std::size_t searched = 0;
    bool started = false;  // a byte of this request arrived
    std::optional<std::size_t> end;
    for (;;) {
      const std::string_view v = in_.view();
      if (!v.empty()) {
        if (!started) {
          int idle = Connection::kIdle;
          if (!conn_.state.compare_exchange_strong(idle, Connection::kBusy)) return;  // reclaimed first
          started = true;
          head_deadline = saturating_add(core_.mono.now(), core_.opts.head_timeout);
        }
        end = find_head_end(v, searched);
        if (end) break;
        if (v.size() > kHeadLimit) {
          core_.stats.request_received();
          static_cast<void>(error(431, "the request head is larger than 64 KiB"));
          return;
        }
        searched = v.size();
      }
      if (core_.stopping.load() && !started) return;  // the drain: idle connections close
      const Read r = in_.fill(fd_, core_.wake_fd, true, started ? head_deadline : idle_deadline, core_.mono);
      if (r == Read::kData) continue;
      if (r == Read::kTimeout && started) {
        core_.stats.request_received();
        static_cast<void>(error(408, "the request head did not arrive in time"));
      }
      return;  // closed, idle too long, or the drain
    }
    if (*end > kHeadLimit) {
      core_.stats.request_received();
      static_cast<void>(error(431, "the request head is larger than 64 KiB"));
      return;
    }
    core_.stats.request_received();
    auto parsed = parse_request_head(in_.view().substr(0, *end));
    in_.consume(*end);
    if (!parsed) {
      static_cast<void>(error(parsed.error().status, parsed.error().reason));
      return;
    }
    RequestHead& head = *parsed;
    auto framing = body_framing(head);
    if (!framing) {
      static_cast<void>(error(framing.error().status, framing.error().reason, head.version_minor));
      return;
    }
    const bool keep_alive = keeps_alive(head);

    // --- the body ----------------------------------------------------------
    std::string body;
    BodyShare share(core_.body_bytes, core_.opts.body_memory);
    if (!read_body(head, *framing, body, share)) return;

    // --- what it is for ----------------------------------------------------
    // Matched and sent in one form: no dot segment reaches an upstream.
    auto normalized = normalize_target(core_.opts.routes, head.target);
    if (!normalized) {
      core_.stats.request_answered("", 400, nullptr);
      log_caller(400, normalized.error().text);
      if (!answer(error_answer(400, normalized.error().text), head.version_minor, head.method == "HEAD", keep_alive))
        return;
      continue;
    }
    head.target = std::move(*normalized);
    const std::string_view target = head.target;
    if (target == "/__abide" || target.starts_with("/__abide/") || target.starts_with("/__abide?")) {
      if (!own_page(head, keep_alive)) return;
      continue;
    }
    const Route* route = match_route(core_.opts.routes, target);
    if (route == nullptr) {
      core_.stats.request_answered("", 404, nullptr);
      log_caller(404, "no route for the target");
      if (!answer(error_answer(404, "no route for this path"), head.version_minor, head.method == "HEAD", keep_alive))
        return;
      continue;
    }
    auto budget = caller_max_wait(head.headers, core_.opts.default_budget);
    if (!budget) {
      core_.stats.request_answered("", 400, nullptr);
      const std::string reason = cli::safe_text(budget.error().text, 200);
      log_caller(400, reason);
      if (!answer(error_answer(400, reason), head.version_minor, head.method == "HEAD", keep_alive)) return;
      continue;
    }
    auto costs = caller_costs(head.headers);
    if (!costs) {
      core_.stats.request_answered("", 400, nullptr);
      const std::string reason = cli::safe_text(costs.error().text, 200);
      log_caller(400, reason);
      if (!answer(error_answer(400, reason), head.version_minor, head.method == "HEAD", keep_alive)) return;
      continue;
    }
    if (!forward(head, *route, *budget, std::move(*costs), std::move(body), keep_alive)) return;
  }
}

bool Session::too_much_body(int version_minor) {
  linger_ = true;
  const std::string_view reason = "the request bodies in memory are at --body-memory";
  core_.stats.request_answered("", 503, nullptr);
  log_caller(503, reason);
  const WallTime now = core_.wall.now();
  static_cast<void>(answer(error_answer(503, reason, std::chrono::seconds{1}, now + std::chrono::seconds{1}, now),
                           version_minor, false, false));
  return false;
}

bool Session::read_body(const RequestHead& head, const BodyFraming& framing, std::string& body, BodyShare& share) {
  if (framing.kind == BodyFraming::Kind::kNone) return true;
  if (framing.kind == BodyFraming::Kind::kLength && framing.length > core_.opts.max_body) {
    return error(413, "the request body is larger than --max-body", head.version_minor);
  }
  if (framing.kind == BodyFraming::Kind::kLength && framing.length == 0) return true;
  if (framing.kind == BodyFraming::Kind::kLength && !share.cover(framing.length)) {
    return too_much_body(head.version_minor);
  }
  // The caller waits for "100 Continue" before it sends the body.
  if (expects_continue(head) && in_.empty() && !send_all(fd_, "HTTP/1.1 100 Continue\r\n\r\n")) return false;
  const auto deadline = [&] { return saturating_add(core_.mono.now(), core_.opts.head_timeout); };
  if (framing.kind == BodyFraming::Kind::kLength) {
    body.reserve(static_cast<std::size_t>(framing.length));
    while (body.size() < framing.length) {
      if (in_.empty()) {
        const Read r = in_.fill(fd_, core_.wake_fd, false, deadline(), core_.mono);
        if (r == Read::kTimeout) return error(408, "the request body did not arrive in time", head.version_minor);
        if (r != Read::kData) return false;
      }
      const std::string_view v = in_.view();
      const std::size_t take = std::min<std::size_t>(v.size(), static_cast<std::size_t>(framing.length - body.size()));
      body.append(v.data(), take);
      in_.consume(take);
    }
    return true;
  }
  ChunkedDecoder decoder(core_.opts.max_body);
  for (;;) {
    if (!in_.empty()) {
      std::size_t used = 0;
      const auto status = decoder.feed(in_.view(), used, body);
      in_.consume(used);
      if (!share.cover(body.size())) return too_much_body(head.version_minor);
      if (status == ChunkedDecoder::Status::kDone) return true;
      if (status == ChunkedDecoder::Status::kError)
        return error(decoder.error().status, decoder.error().reason, head.version_minor);
      if (!in_.empty()) continue;
    }
    const Read r = in_.fill(fd_, core_.wake_fd, false, deadline(), core_.mono);
    if (r == Read::kTimeout) return error(408, "the request body did not arrive in time", head.version_minor);
    if (r != Read::kData) return false;
  }
}

bool Session::own_page(const RequestHead& head, bool keep_alive) {
  std::string_view path = head.target;
  if (const auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  const bool get = head.method == "GET" || head.method == "HEAD";
  const bool page = path == "/__abide/stats" || path == "/__abide/metrics";
  MadeAnswer a;
  if (page && !core_.opts.public_pages && !peer_is_loopback(fd_)) {
    a = error_answer(403, "the proxy's pages are served to callers on its own machine (--public-pages: to anyone)");
  } else if (page) {
    if (!get) {
      a = error_answer(405, "only GET and HEAD are served here");
      a.head.headers.add("Allow", "GET, HEAD");
    } else {
      const WallTime now = core_.wall.now();
      a.head.status = 200;
      if (path == "/__abide/stats") {
        a.head.headers.add("Content-Type", "application/json");
        a.body = core_.stats.json(now).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
        a.body += '\n';
      } else {
        a.head.headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
        a.body = core_.stats.prometheus(now);
      }
      a.head.headers.add("Cache-Control", "no-store");
    }
  } else {
    a = error_answer(404, "no such page of the proxy");
  }
  core_.stats.request_answered("", a.head.status, nullptr);
  return answer(a, head.version_minor, head.method == "HEAD", keep_alive);
}

bool Session::forward(const RequestHead& head, const Route& route, Duration budget, std::vector<UnitCost> costs,
                      std::string body, bool keep_alive) {
  ProxyServer::Core& core = core_;
  const bool head_request = head.method == "HEAD";
  // The profile the route's answers are read with, and the dialect its
  // callers are answered in (a lambda cannot capture a structured binding in
  // every compiler we build with).
  std::pair<std::string, Dialect> speaks = core.profile_for(route);
  const Dialect& dialect = speaks.second;
  const auto not_now = [&](std::string_view reason) {
    // Beyond jobs + queue, or stopping: come back when the key permits it
    // (a cooldown it is known to be in), else in a second.
    const WallTime now = core.wall.now();
    const WallTime again = core.not_before(quota_key(route.origin, head.headers, core.opts.key_secret), now);
    MadeAnswer a = error_answer(503, reason, again - now, again, now);
    ensure_field(a, "Abide-Outcome", "deferred");
    speak_dialect(a, dialect, again, now);
    core.stats.request_answered("", 503, nullptr);
    log_caller(503, reason);
    return a;
  };
  if (core.stopping.load()) {
    static_cast<void>(answer(not_now("the proxy is stopping"), head.version_minor, head_request, false));
    return false;
  }
  const auto limit = static_cast<std::int64_t>(core.opts.jobs + core.opts.queue);
  if (core.admitted.fetch_add(1) >= limit) {
    core.admitted.fetch_sub(1);
    return answer(not_now("too many callers are waiting"), head.version_minor, head_request, keep_alive);
  }
  core.publish_in_flight();

  InFlight f;
  // One stop source per connection until it is used (a stop source costs an
  // allocation; a triggered one cannot be reset).
  if (stop_.stop_requested()) stop_ = std::stop_source();
  f.stop = stop_;
  f.id = core.next_id.fetch_add(1);
  f.request = upstream_request(head, route, std::move(body), core.opts.key_secret);
  f.route = &route;
  f.request.profile = std::move(speaks.first);
  f.request.costs = std::move(costs);
  f.request.send_by = saturating_add(core.mono.now(), std::max(budget, kMinBudget));
  core.enter(f);

  AnswerWriter w(fd_, head.version_minor, head_request, keep_alive, scratch_);
  bool writes_ok = true;
  OutcomeKind head_kind = OutcomeKind::kDone;
  std::optional<LimitedAnswer> limited;  // a limited final answer, kept whole for the key's later callers
  ResponseSink sink;
  sink.head = [&](const FinalHead& fh) {
    {
      std::lock_guard lock(f.mu);
      f.phase = InFlight::Phase::kStreaming;
    }
    head_kind = fh.kind;
    if (!head_request) limited = limited_answer(fh, dialect);
    AnswerHead h = answer_head(fh, core.wall.now(), head_request, dialect);
    proxy_locations(h.headers, core.opts.routes, route, head.headers, core.address);
    writes_ok = w.head(h);
    return writes_ok;
  };
  sink.body = [&](std::string_view chunk) {
    if (limited) {
      if (limited->body.size() + chunk.size() > kMaxLimitedBody) limited.reset();
      else limited->body.append(chunk);
    }
    writes_ok = writes_ok && w.body(chunk);
    return writes_ok;
  };

  RequestOutcome out;
  if (!core.stopping.load()) {
    if (watch_ == 0) watch_ = core.watcher.watch(fd_);
    core.watcher.arm(watch_, f.stop);
    current_flight() = &f;
    out = core.client->fetch(f.request, sink, f.stop.get_token());
    current_flight() = nullptr;
    core.watcher.disarm(watch_);
  } else {
    std::lock_guard lock(f.mu);
    f.drained = true;
    f.drain_not_before = core.wall.now() + std::chrono::seconds{1};
  }
  bool drained = false;
  WallTime drain_not_before{};
  {
    std::lock_guard lock(f.mu);
    drained = f.drained;
    drain_not_before = f.drain_not_before;
    if (f.transferring) {
      f.transferring = false;
      core.transfers.fetch_sub(1);
    }
  }

  bool keep = keep_alive;
  int status = 0;
  if (w.head_started()) {
    // The final answer went out as it came; it ends cleanly only when all of
    // it arrived (else the caller must see the connection close, not a
    // shorter answer that looks whole).
    const bool whole = out.kind == head_kind && out.kind != OutcomeKind::kCancelled &&
                       (out.attempts.empty() || out.attempts.back().error.empty()) && !w.incomplete();
    writes_ok = writes_ok && whole && w.finish();
    keep = keep && writes_ok && !w.must_close();
    status = w.status();
    if (limited && whole) core.keep_limited(f.request.pacer_key, std::move(*limited));
  } else if (drained && out.kind == OutcomeKind::kCancelled && !out.ambiguous) {
    const WallTime now = core.wall.now();
    const Duration left = drain_not_before > now ? drain_not_before - now : Duration::zero();
    MadeAnswer a = error_answer(503, "the proxy is stopping", std::max<Duration>(left, std::chrono::seconds{1}),
                                drain_not_before, now);
    ensure_field(a, "Abide-Outcome", "deferred");
    speak_dialect(a, dialect, drain_not_before, now);
    set_counts(a, out);
    // Counted as what the caller was told: deferred to its permitted time.
    out.kind = OutcomeKind::kDeferred;
    out.not_before_wall = drain_not_before;
    status = 503;
    static_cast<void>(answer(a, head.version_minor, head_request, false));
    keep = false;
  } else if (out.kind == OutcomeKind::kCancelled && !drained) {
    keep = false;  // the caller hung up: nothing to write
  } else {
    const auto replay = core.limited_of(f.request.pacer_key);
    MadeAnswer a = outcome_answer(out, core.wall.now(), dialect, replay.get());
    proxy_locations(a.head.headers, core.opts.routes, route, head.headers, core.address);
    status = a.head.status;
    keep = answer(a, head.version_minor, head_request, keep_alive) && keep;
  }
  if (out.not_before_wall) core.stats.cooldown(route.origin.origin, *out.not_before_wall);
  // A caller that hung up was answered nothing: counted under 499, the
  // status proxies log for "client closed request", with its outcome.
  core.stats.request_answered(route.origin.origin, status != 0 ? status : kClientClosed, &out);
  if (core.opts.verbose) {
    core.log(status != 0 ? cat_line("[", f.id, "] answered ", status)
                         : cat_line("[", f.id, "] the caller hung up: nothing answered"));
  }
  core.leave(f);
  core.admitted.fetch_sub(1);
  core.publish_in_flight();
  return keep && !core.stopping.load();
}

}  // namespace proxy_connection

void serve_connection(ProxyServer::Core& core, Connection& conn) {
  bool lingers = false;
  {
    proxy_connection::Session session(core, conn);
    session.run();
    lingers = session.lingers();
  }  // its hang-up watch ends here, before the socket is closed
  if (lingers) proxy_connection::linger_close(conn.fd);
  std::lock_guard lock(conn.mu);
  ::close(conn.fd);
  conn.fd = -1;
}

}  // namespace abide::proxy
