// `abide mock-server`'s HTTP server: mock_server_core.h's Limiter behind
// cpp-httplib, on an IPv4 loopback address only.
//
// Every path serves the API (GET, HEAD, POST, PUT, PATCH, DELETE) except the
// control paths, which never count as API requests. An API request's body (at
// most kMaxBodyBytes, 1 MiB: a longer one is answered 413 before it is read)
// goes to the limiter, whose token styles read it. The control paths:
//   GET  /__stats  the counters as JSON (Limiter::stats)
//   POST /__reset  clears every counter and window
//   ANY  /__echo   200 JSON {"method","path","query","headers":[[name,value],...],
//                  "body"}: the request as received (raw path and query)
//   GET  /__stream?chunks=N&gap_ms=M  200 text/event-stream, chunked:
//                  "data: i\n\n" for i in 0..N-1, M ms apart (N <= 1000,
//                  M <= 10000; defaults 5 and 100; out of range: 400)
//   ANY  /__hang?ms=M  reads the request, waits M ms (or until stop; default
//                  1000, at most 600000), closes the connection unanswered
// A class so that a test can run it in-process: start() on port 0, port(),
// stop(). The caller handles signals; start() ignores SIGPIPE if it was at its
// default (a client that hangs up must not kill the server).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "mock_server_core.h"

namespace abide::mock {

struct ServerOptions {
  std::string bind = "127.0.0.1";      // must be loopback (is_loopback_address)
  int port = 0;                        // 0 picks a free port
  LimiterOptions limiter;              // limiter.latency delays each API answer
  std::size_t threads = 64;            // worker threads; each open connection holds one
  std::chrono::seconds keep_alive{2};  // idle keep-alive connections close after this
  std::string record_path;             // JSON lines, one per API request ("" = none)
};

class MockServer {
 public:
  explicit MockServer(ServerOptions opts);
  ~MockServer();  // stops
  MockServer(const MockServer&) = delete;
  MockServer& operator=(const MockServer&) = delete;

  // Checks the options, binds and starts serving on background threads.
  // Returns "" on success, else what went wrong (nothing is left running).
  std::string start();
  // The bound port (after a successful start).
  int port() const noexcept;
  // Stops accepting, wakes answers held by --latency, waits for the serving
  // threads (open keep-alive connections end within keep_alive), flushes the
  // record. Idempotent.
  void stop();

  // The /__stats JSON.
  nlohmann::ordered_json stats() const;
  // The totals alone.
  Counts totals() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace abide::mock
