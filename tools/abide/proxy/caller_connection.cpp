// One caller connection of `abide proxy` (see caller_connection.h).
#include "proxy/caller_connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include "abide/headers.h"
#include "common.h"
#include "proxy/proxy_rules.h"
#include "proxy/proxy_worker.h"

namespace abide::proxy {
namespace caller_connection {  // private to this file (the CLI is compiled in batches)

constexpr std::size_t kHeadLimit = std::size_t{64} << 10;
// Abide-Max-Wait: 0 still waits out a pacing slot this close: a deferred
// answer's Retry-After is whole seconds, far longer. (A slot due at once goes
// whatever the budget: send_by bounds the pacer's hold, not its store's time.)
constexpr Duration kMinBudget = std::chrono::milliseconds{10};
constexpr int kClientClosed = 499;
// An answer streams to a slow reader through at most this much memory: above
// it the upstream transfer pauses, below kLowWater it goes on.
constexpr std::size_t kHighWater = std::size_t{64} << 10;
constexpr std::size_t kLowWater = std::size_t{16} << 10;
// A buffer larger than this is freed once empty: an idle connection holds
// next to nothing (ten thousand of them are a normal load).
constexpr std::size_t kKeepCapacity = std::size_t{4} << 10;
// After an error answer: the caller's bytes are dropped for at most this long
// or this many, then the connection closes.
constexpr Duration kLinger = std::chrono::seconds{2};
constexpr std::size_t kLingerBytes = std::size_t{1} << 20;
// Reads per readiness event: a caller that sends fast does not starve the others.
constexpr int kReadsPerEvent = 16;

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

void free_if_large(std::string& s) {
  if (s.empty() && s.capacity() > kKeepCapacity) std::string().swap(s);
}

std::optional<MonoTime> earliest(std::optional<MonoTime> a, std::optional<MonoTime> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

}  // namespace caller_connection

using namespace caller_connection;

bool BodyShare::cover(std::uint64_t bytes) noexcept {
  if (bytes <= taken_) return true;
  const std::uint64_t more = bytes - taken_;
  std::uint64_t now = used_.load();
  do {
    if (now > limit_ || more > limit_ - now) return false;
  } while (!used_.compare_exchange_weak(now, now + more));
  taken_ = bytes;
  return true;
}

// A request forwarded upstream, from admission to its outcome.
struct Caller::Forward {
  Forward(std::string& out, int version_minor, bool head_request, bool keep_alive)
      : writer(out, version_minor, head_request, keep_alive) {}
  Flight flight;
  Dialect dialect;  // the callers of its route are answered in
  AnswerWriter writer;
  OutcomeKind head_kind = OutcomeKind::kDone;  // the final answer's, once its head came
  std::unique_ptr<LimitedAnswer> limited;      // a limited final answer, kept whole for the key's later callers
  std::unique_ptr<RequestOutcome> outcome;     // once done (a held request holds none)
  bool paused = false;                         // the answer's delivery waits for the caller to read
};

Caller::Caller(Worker& worker, int fd)
    : w_(worker), fd_(fd), share_(worker.core().body_bytes, worker.core().opts.body_memory) {}

Caller::~Caller() {
  if (fwd_) {
    // The loop is ending with the request still running (its LoopClient is gone).
    w_.core().admitted.fetch_sub(1);
    w_.core().publish_in_flight();
  }
  if (fd_ >= 0) ::close(fd_);
}

void Caller::begin() {
  progress_ = w_.core().mono.now();
  // Registered once, edge-triggered: what the socket can do is remembered
  // here (readable_, writable_, peer_closed_), so a request costs no
  // epoll_ctl however its states change.
  w_.watch(*this);
  arm();
}

// ---- what the loop watches, and until when --------------------------------

std::optional<MonoTime> Caller::due() const {
  const ProxyOptions& o = w_.core().opts;
  std::optional<MonoTime> at;
  switch (state_) {
    case State::kIdle: at = saturating_add(progress_, o.idle_timeout); break;
    case State::kHead: at = saturating_add(head_started_, o.head_timeout); break;
    case State::kBody: at = saturating_add(progress_, o.head_timeout); break;
    case State::kLinger: at = saturating_add(progress_, kLinger); break;
    case State::kForward:
    case State::kFlush: break;
  }
  if (pending() != 0) at = earliest(at, saturating_add(sent_at_, o.send_timeout));
  return at;
}

void Caller::arm() {
  if (closed_ || gone_) return;
  // Deadlines move lazily: one registered too early is checked and moved
  // when it fires (on_deadline), so a read does not touch the timer set.
  const std::optional<MonoTime> at = due();
  if (!at) w_.set_deadline(*this, std::nullopt);
  else if (!deadline_ || *at < *deadline_) w_.set_deadline(*this, at);
}

void Caller::on_deadline() {
  if (closed_) return;
  const std::optional<MonoTime> at = due();
  if (!at) return;
  if (*at > w_.core().mono.now()) {
    w_.set_deadline(*this, at);
    return;
  }
  if (pending() != 0) {  // the caller stopped reading its answer
    hang_up();
    return;
  }
  switch (state_) {
    case State::kHead:
      w_.core().stats.request_received();
      fail(408, "the request head did not arrive in time");
      return;
    case State::kBody: fail(408, "the request body did not arrive in time"); return;
    case State::kIdle:
    case State::kLinger: end(); return;
    case State::kForward:
    case State::kFlush: return;
  }
}

// ---- reading ---------------------------------------------------------------

bool Caller::reading() const noexcept {
  return state_ == State::kIdle || state_ == State::kHead || state_ == State::kBody || state_ == State::kLinger;
}

void Caller::on_ready(std::uint32_t events) {
  if (closed_ || gone_) return;
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) readable_ = true;  // an end is read too
  if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) peer_closed_ = true;
  if ((events & (EPOLLHUP | EPOLLERR)) != 0) {  // nothing more can be sent either
    hang_up();
    return;
  }
  if ((events & EPOLLOUT) != 0) {
    writable_ = true;
    if (pending() != 0) {
      flush();
      w_.mark(*this);
      if (closed_ || gone_) return;
    }
  }
  // While a request is forwarded its pipelined successors wait unread; a
  // caller that closed its side is taken as gone (its request is cancelled).
  if (state_ == State::kForward) {
    if (peer_closed_) hang_up();
    return;
  }
  if (readable_ && reading()) read_ready();
}

void Caller::read_ready() {
  const std::span<char> buf = w_.scratch();
  for (int reads = 0; reads < kReadsPerEvent; ++reads) {
    if (!reading() || !readable_) return;
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      readable_ = false;  // until the next edge
      return;
    }
    if (n <= 0) {  // the caller closed (a head or body cut short is simply dropped)
      end();
      return;
    }
    progress_ = w_.core().mono.now();
    if (state_ == State::kLinger) {
      lingered_ += static_cast<std::size_t>(n);
      if (lingered_ >= kLingerBytes) {
        end();
        return;
      }
      continue;
    }
    in_.append(buf.data(), static_cast<std::size_t>(n));
    parse();
    if (closed_ || gone_) return;
  }
  if (readable_ && reading()) w_.mark(*this);  // more at the next turn: the others go first
}

void Caller::parse() {
  if (state_ == State::kIdle) {
    if (in_.empty()) return;
    state_ = State::kHead;
    head_started_ = w_.core().mono.now();
    searched_ = 0;
    arm();
  }
  if (state_ == State::kHead && !take_head()) return;
  if (state_ == State::kBody && take_body()) handle();
}

bool Caller::take_head() {
  ProxyServer::Core& core = w_.core();
  const std::optional<std::size_t> end = find_head_end(in_, searched_);
  if (!end) {
    if (in_.size() > kHeadLimit) {
      core.stats.request_received();
      fail(431, "the request head is larger than 64 KiB");
    } else {
      searched_ = in_.size();
    }
    return false;
  }
  core.stats.request_received();
  if (*end > kHeadLimit) {
    fail(431, "the request head is larger than 64 KiB");
    return false;
  }
  auto parsed = parse_request_head(std::string_view(in_).substr(0, *end));
  in_.erase(0, *end);
  if (!parsed) {
    fail(parsed.error().status, parsed.error().reason);
    return false;
  }
  head_ = std::move(*parsed);
  auto framing = body_framing(*head_);
  if (!framing) {
    fail(framing.error().status, framing.error().reason);
    return false;
  }
  framing_ = *framing;
  keep_alive_ = keeps_alive(*head_);
  body_.clear();
  chunked_.reset();
  const bool has_body = framing_.kind == BodyFraming::Kind::kChunked ||
                        (framing_.kind == BodyFraming::Kind::kLength && framing_.length > 0);
  if (framing_.kind == BodyFraming::Kind::kLength && framing_.length > core.opts.max_body) {
    fail(413, "the request body is larger than --max-body");
    return false;
  }
  if (framing_.kind == BodyFraming::Kind::kLength && !share_.cover(framing_.length)) {
    too_much_body();
    return false;
  }
  if (framing_.kind == BodyFraming::Kind::kChunked) chunked_ = std::make_unique<ChunkedDecoder>(core.opts.max_body);
  if (framing_.kind == BodyFraming::Kind::kLength)
    body_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(framing_.length, std::uint64_t{1} << 20)));
  // The caller waits for "100 Continue" before it sends the body.
  if (has_body && expects_continue(*head_) && in_.empty()) {
    out_ += "HTTP/1.1 100 Continue\r\n\r\n";
    flush();
    if (closed_ || gone_) return false;
  }
  state_ = State::kBody;
  progress_ = core.mono.now();
  arm();
  return true;
}

bool Caller::take_body() {
  switch (framing_.kind) {
    case BodyFraming::Kind::kNone: return true;
    case BodyFraming::Kind::kLength: {
      const std::size_t take = std::min<std::size_t>(in_.size(), static_cast<std::size_t>(framing_.length - body_.size()));
      body_.append(in_, 0, take);
      in_.erase(0, take);
      return body_.size() == framing_.length;
    }
    case BodyFraming::Kind::kChunked: break;
  }
  std::size_t used = 0;
  const auto status = chunked_->feed(in_, used, body_);
  in_.erase(0, used);
  if (!share_.cover(body_.size())) {
    too_much_body();
    return false;
  }
  if (status == ChunkedDecoder::Status::kError) {
    fail(chunked_->error().status, chunked_->error().reason);
    return false;
  }
  return status == ChunkedDecoder::Status::kDone;
}

// ---- answering what the proxy answers itself -------------------------------

void Caller::log_caller(int status, std::string_view reason) {
  if (w_.core().opts.verbose) w_.core().log(cat_line("answered ", status, " to a caller: ", reason));
}

void Caller::answer(const MadeAnswer& a, bool head_request, bool keep_alive) {
  AnswerWriter w(out_, head_ ? head_->version_minor : 1, head_request, keep_alive);
  w.made(a);
  if (w.must_close()) close_after_ = true;
  state_ = State::kFlush;
  w_.mark(*this);
}

void Caller::fail(int status, std::string_view reason) {
  ProxyServer::Core& core = w_.core();
  core.stats.request_answered("", status, nullptr);
  log_caller(status, reason);
  linger_after_ = true;  // after bad input the stream cannot be trusted: it closes
  answer(error_answer(status, reason, std::nullopt, std::nullopt, core.wall.now()), false, false);
}

void Caller::refuse(int status, std::string_view reason, std::string_view logged) {
  w_.core().stats.request_answered("", status, nullptr);
  log_caller(status, logged.empty() ? reason : logged);
  answer(error_answer(status, reason), head_->method == "HEAD", keep_alive_);
}

void Caller::too_much_body() {
  ProxyServer::Core& core = w_.core();
  const std::string_view reason = "the request bodies in memory are at --body-memory";
  core.stats.request_answered("", 503, nullptr);
  log_caller(503, reason);
  const WallTime now = core.wall.now();
  linger_after_ = true;
  answer(error_answer(503, reason, std::chrono::seconds{1}, now + std::chrono::seconds{1}, now), false, false);
}

void Caller::handle() {
  ProxyServer::Core& core = w_.core();
  RequestHead& head = *head_;
  // Matched and sent in one form: no dot segment reaches an upstream.
  auto normalized = normalize_target(core.opts.routes, head.target);
  if (!normalized) {
    refuse(400, normalized.error().text);
    return;
  }
  head.target = std::move(*normalized);
  const std::string_view target = head.target;
  if (target == "/__abide" || target.starts_with("/__abide/") || target.starts_with("/__abide?")) {
    own_page();
    return;
  }
  const Route* route = match_route(core.opts.routes, target);
  if (route == nullptr) {
    refuse(404, "no route for this path", "no route for the target");
    return;
  }
  auto budget = caller_max_wait(head.headers, core.opts.default_budget);
  if (!budget) {
    refuse(400, cli::safe_text(budget.error().text, 200));
    return;
  }
  auto costs = caller_costs(head.headers);
  if (!costs) {
    refuse(400, cli::safe_text(costs.error().text, 200));
    return;
  }
  forward(*route, *budget, std::move(*costs));
}

void Caller::own_page() {
  ProxyServer::Core& core = w_.core();
  const RequestHead& head = *head_;
  std::string_view path = head.target;
  if (const auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  const bool get = head.method == "GET" || head.method == "HEAD";
  const bool page = path == "/__abide/stats" || path == "/__abide/metrics";
  MadeAnswer a;
  if (page && !core.opts.public_pages && !peer_is_loopback(fd_)) {
    a = error_answer(403, "the proxy's pages are served to callers on its own machine (--public-pages: to anyone)");
  } else if (page) {
    if (!get) {
      a = error_answer(405, "only GET and HEAD are served here");
      a.head.headers.add("Allow", "GET, HEAD");
    } else {
      const WallTime now = core.wall.now();
      a.head.status = 200;
      if (path == "/__abide/stats") {
        a.head.headers.add("Content-Type", "application/json");
        a.body = core.stats.json(now).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
        a.body += '\n';
      } else {
        a.head.headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
        a.body = core.stats.prometheus(now);
      }
      a.head.headers.add("Cache-Control", "no-store");
    }
  } else {
    a = error_answer(404, "no such page of the proxy");
  }
  core.stats.request_answered("", a.head.status, nullptr);
  answer(a, head.method == "HEAD", keep_alive_);
}

// ---- forwarding --------------------------------------------------------------

MadeAnswer Caller::not_now(const Route& route, const Dialect& dialect, std::string_view reason) {
  // Beyond jobs + queue, or stopping: come back when the key permits it (a
  // cooldown it is known to be in), else in a second.
  ProxyServer::Core& core = w_.core();
  const WallTime now = core.wall.now();
  const WallTime again = core.not_before(quota_key(route.origin, head_->headers, core.opts.key_secret), now);
  MadeAnswer a = error_answer(503, reason, again - now, again, now);
  ensure_field(a, "Abide-Outcome", "deferred");
  speak_dialect(a, dialect, again, now);
  core.stats.request_answered("", 503, nullptr);
  log_caller(503, reason);
  return a;
}

void Caller::forward(const Route& route, Duration budget, std::vector<UnitCost> costs) {
  ProxyServer::Core& core = w_.core();
  const bool head_request = head_->method == "HEAD";
  // The profile the route's answers are read with, and the dialect its
  // callers are answered in.
  std::pair<std::string, Dialect> speaks = core.profile_for(route);
  if (core.stopping.load()) {
    answer(not_now(route, speaks.second, "the proxy is stopping"), head_request, false);
    return;
  }
  const auto limit = static_cast<std::int64_t>(core.opts.jobs + core.opts.queue);
  if (core.admitted.fetch_add(1) >= limit) {
    core.admitted.fetch_sub(1);
    answer(not_now(route, speaks.second, "too many callers are waiting"), head_request, keep_alive_);
    return;
  }
  core.publish_in_flight();

  fwd_ = std::make_unique<Forward>(out_, head_->version_minor, head_request, keep_alive_);
  Forward& f = *fwd_;
  f.dialect = std::move(speaks.second);
  f.flight.id = core.next_id.fetch_add(1);
  f.flight.route = &route;
  engine::Request request = upstream_request(*head_, route, std::move(body_), core.opts.key_secret);
  body_ = std::string();
  request.profile = std::move(speaks.first);
  request.costs = std::move(costs);
  request.send_by = saturating_add(core.mono.now(), std::max(budget, kMinBudget));
  f.flight.pacer_key = request.pacer_key;
  state_ = State::kForward;
  arm();
  w_.track(f.flight);

  ResponseSink sink;
  sink.head = [this](const FinalHead& fh) { return on_answer_head(fh); };
  sink.body = [this](std::string_view chunk) { return on_answer_body(chunk); };
  f.flight.job = w_.client().start(
      std::move(request),
      [this](RequestOutcome&& outcome) {
        fwd_->outcome = std::make_unique<RequestOutcome>(std::move(outcome));
        w_.mark(*this);
      },
      std::move(sink), static_cast<std::size_t>(f.flight.id));
  if (peer_closed_) hang_up();  // it sent its request and closed its side: taken as gone
}

bool Caller::on_answer_head(const FinalHead& fh) {
  ProxyServer::Core& core = w_.core();
  Forward& f = *fwd_;
  f.flight.phase = Flight::Phase::kStreaming;
  if (gone_) return false;
  f.head_kind = fh.kind;
  const bool head_request = head_->method == "HEAD";
  if (!head_request) {
    if (auto limited = limited_answer(fh, f.dialect)) f.limited = std::make_unique<LimitedAnswer>(std::move(*limited));
  }
  AnswerHead h = answer_head(fh, core.wall.now(), head_request, f.dialect);
  proxy_locations(h.headers, core.opts.routes, *f.flight.route, head_->headers, core.address);
  f.writer.head(h);
  w_.mark(*this);
  return true;
}

bool Caller::on_answer_body(std::string_view chunk) {
  Forward& f = *fwd_;
  if (gone_) return false;
  if (f.limited) {
    if (f.limited->body.size() + chunk.size() > kMaxLimitedBody) f.limited.reset();
    else f.limited->body.append(chunk);
  }
  f.writer.body(chunk);
  // A caller that reads slower than the upstream sends holds the transfer,
  // not the memory.
  if (!f.paused && pending() > kHighWater) f.paused = w_.client().pause(f.flight.job);
  w_.mark(*this);
  return true;
}

void Caller::finish_forward() {
  ProxyServer::Core& core = w_.core();
  Forward& f = *fwd_;
  RequestOutcome& out = *f.outcome;
  w_.forget(f.flight);
  if (f.flight.transferring) {
    f.flight.transferring = false;
    core.transfers.fetch_sub(1);
  }
  const bool head_request = head_->method == "HEAD";
  const Route& route = *f.flight.route;
  bool keep = keep_alive_;
  int status = 0;
  if (f.writer.head_started()) {
    // The final answer went out as it came; it ends cleanly only when all of
    // it arrived (else the caller must see the connection close, not a
    // shorter answer that looks whole).
    const bool whole = out.kind == f.head_kind && out.kind != OutcomeKind::kCancelled &&
                       (out.attempts.empty() || out.attempts.back().error.empty()) && !f.writer.incomplete();
    if (whole) f.writer.finish();
    keep = keep && whole && !f.writer.must_close();
    status = f.writer.status();
    if (f.limited && whole) core.keep_limited(f.flight.pacer_key, std::move(*f.limited));
  } else if (f.flight.drained && out.kind == OutcomeKind::kCancelled && !out.ambiguous) {
    const WallTime now = core.wall.now();
    const WallTime again = f.flight.drain_not_before;
    const Duration left = again > now ? again - now : Duration::zero();
    MadeAnswer a =
        error_answer(503, "the proxy is stopping", std::max<Duration>(left, std::chrono::seconds{1}), again, now);
    ensure_field(a, "Abide-Outcome", "deferred");
    speak_dialect(a, f.dialect, again, now);
    set_counts(a, out);
    // Counted as what the caller was told: deferred to its permitted time.
    out.kind = OutcomeKind::kDeferred;
    out.not_before_wall = again;
    status = 503;
    AnswerWriter(out_, head_->version_minor, head_request, false).made(a);
    keep = false;
  } else if (out.kind == OutcomeKind::kCancelled && !f.flight.drained) {
    keep = false;  // the caller hung up: nothing to write
  } else {
    const auto replay = core.limited_of(f.flight.pacer_key);
    MadeAnswer a = outcome_answer(out, core.wall.now(), f.dialect, replay.get());
    proxy_locations(a.head.headers, core.opts.routes, route, head_->headers, core.address);
    status = a.head.status;
    AnswerWriter w(out_, head_->version_minor, head_request, keep_alive_);
    w.made(a);
    keep = keep && !w.must_close();
  }
  // No longer held before it is counted answered: a reader of the pages
  // (on another loop) never sees the outcome with the request still held.
  core.admitted.fetch_sub(1);
  core.publish_in_flight();
  if (out.not_before_wall) core.stats.cooldown(route.origin.origin, *out.not_before_wall);
  // A caller that hung up was answered nothing: counted under 499, the
  // status proxies log for "client closed request", with its outcome.
  core.stats.request_answered(route.origin.origin, status != 0 ? status : kClientClosed, &out);
  if (core.opts.verbose) {
    core.log(status != 0 ? cat_line("[", f.flight.id, "] answered ", status)
                         : cat_line("[", f.flight.id, "] the caller hung up: nothing answered"));
  }
  fwd_.reset();
  share_.release();
  if (gone_) {
    end();
    return;
  }
  if (!keep) close_after_ = true;
  state_ = State::kFlush;
  arm();
}

void Caller::hang_up() {
  if (closed_) return;
  gone_ = true;
  w_.unwatch(*this);
  w_.set_deadline(*this, std::nullopt);
  out_.clear();
  sent_ = 0;
  if (fwd_) {
    // Its outcome comes at the loop's next turn; the connection is freed then.
    if (!fwd_->outcome) w_.client().cancel(fwd_->flight.job);
    return;
  }
  end();
}

// ---- sending, and what comes after ------------------------------------------

void Caller::flush() {
  if (closed_ || gone_) return;
  if (!sending_) sent_at_ = w_.core().mono.now();  // the send timeout counts from here
  while (pending() != 0 && writable_) {
    const ssize_t n = ::send(fd_, out_.data() + sent_, pending(), MSG_NOSIGNAL);
    if (n > 0) {
      sent_ += static_cast<std::size_t>(n);
      sent_at_ = w_.core().mono.now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      writable_ = false;  // until the next edge
      break;
    }
    hang_up();  // the caller is gone
    return;
  }
  sending_ = pending() != 0;
  if (pending() == 0) {
    out_.clear();
    sent_ = 0;
    free_if_large(out_);
  } else if (sent_ >= kLowWater) {
    out_.erase(0, sent_);
    sent_ = 0;
  }
  if (fwd_ && fwd_->paused && pending() < kLowWater && !fwd_->outcome) {
    fwd_->paused = false;
    // More of the answer may arrive inside this call (the sink appends it).
    static_cast<void>(w_.client().resume(fwd_->flight.job));
  }
  arm();
}

void Caller::service() {
  // Bounded per turn: pipelined requests answered by the proxy itself go on
  // at the next turn.
  for (int rounds = 0; rounds < 16; ++rounds) {
    if (closed_) return;
    if (fwd_ && fwd_->outcome) finish_forward();
    if (closed_ || gone_) return;
    flush();
    if (closed_ || gone_) return;
    if (state_ != State::kFlush || pending() != 0) break;
    if (close_after_) {
      if (linger_after_) linger();
      else end();
      return;
    }
    next_request();
  }
  if (closed_ || gone_) return;
  if (state_ == State::kFlush && pending() == 0) w_.mark(*this);  // the rounds ran out
  else if (readable_ && reading()) read_ready();
}

void Caller::next_request() {
  head_.reset();
  chunked_.reset();
  body_ = std::string();
  share_.release();
  close_after_ = linger_after_ = false;
  state_ = State::kIdle;
  progress_ = w_.core().mono.now();
  if (w_.draining()) {  // the drain: a connection closes after its request
    end();
    return;
  }
  free_if_large(in_);
  arm();
  parse();  // a pipelined request
  if (!closed_ && !gone_ && readable_ && reading()) read_ready();  // bytes that came meanwhile
}

void Caller::on_drain() {
  if (idle()) end();
}

void Caller::linger() {
  // After an error answer the caller may still be sending (a body the proxy
  // refused): its bytes are dropped for a moment, so that closing does not
  // reset the connection before the answer is read.
  ::shutdown(fd_, SHUT_WR);
  state_ = State::kLinger;
  lingered_ = 0;
  in_ = std::string();
  progress_ = w_.core().mono.now();
  arm();
}

void Caller::end() {
  if (closed_) return;
  if (fwd_) {  // the outcome must come first (the request holds this connection)
    hang_up();
    return;
  }
  w_.close(*this);
}

}  // namespace abide::proxy
