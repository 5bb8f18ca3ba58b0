// Connections to one Redis endpoint through hiredis: connect and log in with
// timeouts, keep a bounded pool of idle connections, send one command and
// read its reply. It knows nothing of scripts or of outages: the store decides
// what a failed connection means.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/redis_store.h"
#include "mutex.h"

struct redisContext;
struct redisReply;

namespace abide::redis_detail {

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept;
};
// One reply; null when the command got none (the connection failed).
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class ConnectionPool;

// One connection, lent by the pool. Going out of scope gives it back, unless
// it failed (then it is closed: a connection hiredis marked bad is useless).
class Connection {
 public:
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&&) = delete;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Sends one command and waits (up to the command timeout) for its reply.
  Reply command(std::span<const std::string_view> args);
  // True when it was opened for this loan rather than taken from the pool.
  bool fresh() const noexcept { return fresh_; }
  // Why the last command got no reply (hiredis's words, no server bytes).
  std::string failure() const;
  // Closes it instead of giving it back.
  void discard() noexcept;

 private:
  friend class ConnectionPool;
  Connection(ConnectionPool& pool, redisContext* context, bool fresh) noexcept
      : pool_(&pool), context_(context), fresh_(fresh) {}

  ConnectionPool* pool_;
  redisContext* context_;
  bool fresh_;
};

struct PoolOptions {
  RedisEndpoint endpoint;
  Duration connect_timeout = std::chrono::milliseconds{250};
  Duration command_timeout = std::chrono::milliseconds{250};
  std::size_t size = 4;  // at most this many connections, idle and lent together
};

class ConnectionPool {
 public:
  explicit ConnectionPool(PoolOptions options);
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  struct Taken {
    std::optional<Connection> connection;
    // When there is none: every connection was lent for longer than the
    // command timeout (busy), or none could be opened (down, with why).
    bool busy = false;
    std::string why;
    // It connected, but the server refused the AUTH (a wrong password or user).
    bool login_refused = false;
  };
  // An idle connection, else a new one while fewer than `size` are open, else
  // waits up to the command timeout for one to come back.
  Taken take();
  // Closes the idle connections (after a failure they are probably as stale).
  void drop_idle();

 private:
  friend class Connection;
  redisContext* connect(std::string& why, bool& login_refused) const;
  void give_back(redisContext* c);
  void close(redisContext* c);

  PoolOptions options_;
  detail::Mutex mu_;
  std::condition_variable cv_;
  std::vector<redisContext*> idle_ ABIDE_GUARDED_BY(mu_);
  std::size_t open_ ABIDE_GUARDED_BY(mu_) = 0;  // idle and lent
};

}  // namespace abide::redis_detail
