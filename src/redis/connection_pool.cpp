// ConnectionPool: hiredis connections to one endpoint, bounded and reused.
#include "connection_pool.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

namespace abide::redis_detail {
namespace {

timeval to_timeval(Duration d) {
  // hiredis takes a timeval; zero would mean "no timeout", which a library must never use.
  d = std::clamp<Duration>(d, std::chrono::milliseconds{1}, std::chrono::hours{1});
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(us / 1'000'000);
  tv.tv_usec = static_cast<suseconds_t>(us % 1'000'000);
  return tv;
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

Reply send(redisContext* c, std::span<const std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  SigpipeGuard guard;
  return Reply(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

}  // namespace

void ReplyDeleter::operator()(redisReply* r) const noexcept {
  if (r != nullptr) freeReplyObject(r);
}

// ---- Connection ---------------------------------------------------------------------

Connection::Connection(Connection&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      context_(std::exchange(other.context_, nullptr)),
      fresh_(other.fresh_) {}

Connection::~Connection() {
  if (pool_ == nullptr || context_ == nullptr) return;
  if (context_->err != 0) {
    pool_->close(context_);
  } else {
    pool_->give_back(context_);
  }
}

Reply Connection::command(std::span<const std::string_view> args) { return send(context_, args); }

std::string Connection::failure() const {
  if (context_ == nullptr || context_->errstr[0] == '\0') return "no reply";
  return context_->errstr;
}

void Connection::discard() noexcept {
  if (pool_ != nullptr && context_ != nullptr) pool_->close(context_);
  pool_ = nullptr;
  context_ = nullptr;
}

// ---- ConnectionPool -------------------------------------------------------------------

ConnectionPool::ConnectionPool(PoolOptions options) : options_(std::move(options)) {
  options_.size = std::max<std::size_t>(options_.size, 1);
}

ConnectionPool::~ConnectionPool() {
  for (redisContext* c : idle_) redisFree(c);
}

redisContext* ConnectionPool::connect(std::string& why, bool& login_refused) const {
  const RedisEndpoint& ep = options_.endpoint;
  const timeval tv = to_timeval(options_.connect_timeout);
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
  redisSetTimeout(c, to_timeval(options_.command_timeout));
  if (!ep.password.empty()) {
    std::vector<std::string_view> auth{"AUTH"};
    if (!ep.user.empty()) auth.emplace_back(ep.user);
    auth.emplace_back(ep.password);
    const Reply r = send(c, auth);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      // Never the server's words here: they could echo what was sent.
      why = r ? "authentication failed" : c->errstr;
      login_refused = static_cast<bool>(r);
      redisFree(c);
      return nullptr;
    }
  }
  return c;
}

ConnectionPool::Taken ConnectionPool::take() {
  Taken out;
  detail::UniqueLock lock(mu_);
  for (;;) {
    if (!idle_.empty()) {
      redisContext* c = idle_.back();
      idle_.pop_back();
      out.connection.emplace(Connection(*this, c, false));
      return out;
    }
    if (open_ < options_.size) {
      ++open_;
      lock.unlock();  // connecting can take the whole connect timeout
      redisContext* c = connect(out.why, out.login_refused);
      if (c == nullptr) {
        lock.lock();
        --open_;
        cv_.notify_one();
        return out;
      }
      out.connection.emplace(Connection(*this, c, true));
      return out;
    }
    const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options_.command_timeout) +
                         std::chrono::milliseconds{1};
    if (!cv_.wait_for(lock.native(), timeout,
                      [&]() ABIDE_REQUIRES(mu_) { return !idle_.empty() || open_ < options_.size; })) {
      out.busy = true;
      return out;
    }
  }
}

void ConnectionPool::give_back(redisContext* c) {
  detail::MutexLock lock(mu_);
  idle_.push_back(c);
  cv_.notify_one();
}

void ConnectionPool::close(redisContext* c) {
  redisFree(c);
  detail::MutexLock lock(mu_);
  --open_;
  cv_.notify_one();
}

void ConnectionPool::drop_idle() {
  detail::MutexLock lock(mu_);
  for (redisContext* c : idle_) redisFree(c);
  open_ -= idle_.size();
  idle_.clear();
  cv_.notify_all();
}

}  // namespace abide::redis_detail
