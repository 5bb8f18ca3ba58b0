// abide::LoopClient: abide's rules over libcurl's multi interface, for a
// program with an event loop. Many requests run on one thread, none of them
// parked: a pacer wait or a retry wait is a timer, an attempt is a transfer in
// one multi handle (connections, HTTP/2 streams and name lookups shared).
// Cleartext HTTP/1.1 to an IP literal (http://127.0.0.1:8080/, a proxy's
// usual upstream) goes over abide's own client on the same loop instead, its
// kept connections reused, written and read as libcurl would; a proxy (given
// or in the environment), decompression or max_host_connections leave
// everything to libcurl.
//
// The loop drives it in one of two ways:
//   - hooks: LoopClient tells the loop which sockets to watch for what
//     (Hooks::watch) and when to call back (Hooks::timer), as libcurl's
//     CURLMOPT_SOCKETFUNCTION and CURLMOPT_TIMERFUNCTION do; the loop calls
//     on_socket() and on_timer();
//   - one descriptor: a loop watches fd() for reading and wakes after
//     timeout(), then calls process(). run() is such a loop of its own.
//
// Not thread-safe: one thread calls every member, and every callback (the
// sink's, done, the hooks) runs on it, inside those calls. Only the pacer's
// notifications come from other threads, through a descriptor it watches.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "abide/client.h"

namespace abide {

class SharedTransfers;

class LoopClient {
 public:
  // What a loop watches a socket for. kNone: stop watching it.
  enum class Interest : std::uint8_t { kNone, kRead, kWrite, kReadWrite };

  struct Hooks {
    // Watch `fd` for `what` from now on (kNone: no longer).
    std::function<void(int fd, Interest what)> watch;
    // Call on_timer() once `after` has passed (replacing any earlier
    // request); nullopt: no timer is needed. Zero: as soon as possible.
    std::function<void(std::optional<Duration> after)> timer;
  };

  // A request's outcome (the final answer's body kept, up to
  // max_body_bytes, unless it went to a ResponseSink).
  using Done = std::function<void(RequestOutcome&& outcome)>;
  using Id = std::uint64_t;

  // config.max_transfers bounds the transfers at once (the others wait,
  // permitted, in arrival order) and the idle connections kept.
  // Driven through its own descriptor (fd(), timeout(), process(), run()).
  explicit LoopClient(ClientConfig config = {});
  // Driven by a loop of the caller's through `hooks` (both set).
  LoopClient(ClientConfig config, Hooks hooks);
  // Either way (hooks both set, or neither), its transfers bounded together
  // with those of the other clients sharing `transfers`, in place of
  // config.max_transfers (which still bounds the idle connections it keeps).
  LoopClient(ClientConfig config, Hooks hooks, std::shared_ptr<SharedTransfers> transfers);
  // Ends every request still running: transfers stop, pacer slots are given
  // back; their done is not called.
  ~LoopClient();
  LoopClient(const LoopClient&) = delete;
  LoopClient& operator=(const LoopClient&) = delete;

  // Starts a request (copied): it runs as the loop turns, and `done` is
  // called once with its outcome, never from inside start(). With a sink,
  // the final answer streams to it as Client::fetch(request, sink) does.
  // ClientEvent::index is `index`.
  Id start(const Request& request, Done done, ResponseSink sink = {}, std::size_t index = 0);
  // The same, taking the request (and its body) without a copy.
  Id start(Request&& request, Done done, ResponseSink sink = {}, std::size_t index = 0);
  // Ends a request that has not finished: it ends cancelled (done is called,
  // at the next turn of the loop). Allowed from the event hook and the sink.
  // False when it is unknown or finished.
  bool cancel(Id id);

  // Backpressure for a sink that cannot take more now (a slow reader of
  // the body): pause() stops the answer's delivery after the chunk being
  // given (call it from the sink, which still takes that chunk, or from
  // anywhere on the loop's thread); resume() goes on. While paused, the
  // transfer's own timeouts still run. False when the request is unknown,
  // finished, or not in a transfer.
  bool pause(Id id);
  bool resume(Id id);

  // --- driven by hooks ---
  // `fd` (one of those watched) is ready for `what`.
  void on_socket(int fd, Interest what);
  // The time Hooks::timer asked for has come.
  void on_timer();

  // --- driven through one descriptor ---
  // Readable whenever process() has something to do (besides timeout()).
  int fd() const noexcept;
  // How long until process() is due at the latest; nullopt: only when fd()
  // is readable (or nothing runs).
  std::optional<Duration> timeout() const;
  // Does what is due, without blocking.
  void process();
  // Runs until no request is left (or `stop`), waiting on fd() and timeout().
  void run(std::stop_token stop = {});

  // Requests started and not yet done.
  std::size_t running() const noexcept;

  Pacer& pacer() noexcept;
  const ClientConfig& config() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A bound on the transfers of several LoopClients, each on its own thread (an
// event loop per core): at most limit() run between them, and a slot one
// client frees goes to the client that began waiting first, woken through its
// descriptor, so that no loop's requests wait while another loop's slots idle.
// Thread-safe; each client holds it for as long as it lives.
class SharedTransfers {
 public:
  explicit SharedTransfers(std::size_t limit);  // 0 is taken as 1
  ~SharedTransfers();
  SharedTransfers(const SharedTransfers&) = delete;
  SharedTransfers& operator=(const SharedTransfers&) = delete;

  std::size_t limit() const noexcept;
  // Slots in use now: transfers running, or handed to a client about to start one.
  std::size_t in_use() const;

  struct Impl;

 private:
  friend struct LoopClient::Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace abide
