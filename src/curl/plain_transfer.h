// One attempt over abide's own HTTP/1.1 client, reported to an
// engine::Machine as an EasyAttempt reports libcurl's (private to
// abide::curl). LoopClient sends over it what needs none of libcurl's
// machinery: cleartext http:// to an IP literal (no name to look up, no TLS,
// no proxy, no decompression), so that the common case of a proxy in front
// of a local upstream costs one read and one write per exchange, and
// anything else goes to libcurl.
//
// The attempt never touches the loop: it is given a socket (a fresh one,
// still connecting, or an idle one kept alive), told when the socket is ready
// and when its due() time came, and says each time what it waits for next.
// The socket stays its caller's: at the end it says whether another exchange
// may follow on it.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <curl/curl.h>

#include "abide/clock.h"
#include "abide/engine.h"
#include "abide/pacer.h"
#include "http1/chunked.h"
#include "http1/response_framing.h"
#include "request_rules.h"
#include "transfer.h"
#include "transport.h"

namespace abide::curl_detail {

using SteadyTime = std::chrono::steady_clock::time_point;

// Where an attempt over the own client connects (its authority is the Host field).
using PlainTarget = OwnTarget;

// The target of `request` when the own client can send it as libcurl would:
// an http:// URL whose host is an IP literal (own_target()). nullopt:
// libcurl sends it.
[[nodiscard]] inline std::optional<PlainTarget> plain_target(const engine::Request& request) {
  return own_target(request, "http", 80);
}
// A quick look whether plain_target() may take a request to `url`.
[[nodiscard]] inline bool plain_candidate(std::string_view url) noexcept { return own_candidate(url, "http://"); }

// Whether limits and the environment leave the own client to send anything:
// no proxy given or in the environment (http_proxy, all_proxy, ALL_PROXY)
// and no decompression.
[[nodiscard]] bool plain_allowed(const TransferLimits& limits) noexcept;
[[nodiscard]] inline bool proxy_in_environment() noexcept {
  return any_in_environment({"http_proxy", "all_proxy", "ALL_PROXY"});
}

class PlainTransfer {
 public:
  PlainTransfer() = default;
  PlainTransfer(const PlainTransfer&) = delete;
  PlainTransfer& operator=(const PlainTransfer&) = delete;

  // What the attempt waits for.
  enum class Want : std::uint8_t {
    kWrite,      // the socket to be writable (connecting)
    kReadWrite,  // either: the request partly written, and the server may answer before reading it all
    kRead,       // the answer's bytes
    kNothing,  // nothing from the socket (paused): only resume() or due()
    kEnded,    // done: end() tells the machine
    kStale,    // a kept-alive socket the server had closed: give a fresh one to attach() again
  };

  // Sets the attempt up to send `request` to `target` once; false: it cannot
  // be sent as it is, and the machine was told (refuse). Everything given
  // must outlive the attempt.
  [[nodiscard]] bool start(const engine::Request& request, PlainTarget target, const TransferLimits& limits,
                           const BodyTarget& body, engine::Machine& machine, const MonotonicClock& mono,
                           const WallClock& wall, SteadyTime now);
  // As EasyAttempt::hold_back_if_held: checked just before the request is written.
  void hold_back_if_held(const Pacer& pacer, const Pacer::Key& key) noexcept {
    pacer_ = &pacer;
    key_ = &key;
  }

  // The socket to send on: `reused` one kept alive (connected), else a fresh
  // one whose non-blocking connect() returned `connect_errno` (0: connected,
  // EINPROGRESS: connecting).
  [[nodiscard]] Want attach(int fd, bool reused, int connect_errno, SteadyTime now);
  // The socket is ready (for what the last Want said, or an error); reads
  // into `scratch` (at most receive_buffer_bytes of it, or 16 KiB, at a time).
  [[nodiscard]] Want on_ready(std::span<char> scratch, SteadyTime now);
  // When on_time() is due at the latest (it only moves later as the attempt
  // goes on).
  SteadyTime due() const noexcept;
  [[nodiscard]] Want on_time(SteadyTime now);
  // Backpressure: while paused no byte is read. resume() says what to wait for.
  void pause() noexcept { paused_ = true; }
  [[nodiscard]] Want resume() noexcept;

  // The attempt ended (kEnded, or `stopped`: the caller stops it): tells the
  // machine, as EasyAttempt::end does.
  [[nodiscard]] Transport::End end(bool stopped);
  // After end(): the socket may carry another exchange.
  bool reusable() const noexcept { return reusable_; }
  int fd() const noexcept { return fd_; }
  const PlainTarget& target() const noexcept { return target_; }
  // The answer's first byte arrived (a stale socket can be told only before).
  bool heard() const noexcept { return heard_; }

 private:
  Want fail(CURLcode code, std::string detail);
  Want finish();
  Want connected(SteadyTime now);
  std::size_t request_bytes() const noexcept;
  bool sending() const noexcept { return !stopped_sending_ && written_ < request_bytes(); }
  Want write_some(SteadyTime now);
  Want send_failed(int err);
  Want read_some(std::span<char> scratch, SteadyTime now);
  Want take(std::string_view data);
  bool take_head_bytes(std::string_view& data);
  bool head_done();
  Want take_body(std::string_view data);
  bool give_body(std::string_view data);
  Want at_eof();
  Want stale_or_fail(CURLcode code, std::string detail);

  engine::Machine* machine_ = nullptr;
  const BodyTarget* body_ = nullptr;
  const MonotonicClock* mono_ = nullptr;
  const WallClock* wall_ = nullptr;
  const engine::Request* request_ = nullptr;
  PlainTarget target_;
  const Pacer* pacer_ = nullptr;
  const Pacer::Key* key_ = nullptr;
  std::size_t max_header_bytes_ = 0;
  std::size_t read_size_ = 0;    // bytes read at a time (ClientConfig::receive_buffer_bytes)
  std::string out_;              // the request's head (its body is the request's)
  std::size_t written_ = 0;      // of out_ and then the body
  HeadReader head_{0, /*keep_raw=*/false};
  std::string line_;             // a head line not yet ended
  std::optional<http1::ResponseFraming> framing_;
  std::optional<http1::ChunkedDecoder> chunked_;
  std::string decoded_;          // a chunked read's data, decoded
  std::uint64_t left_ = 0;       // kLength: bytes still to come
  std::size_t dropped_ = 0;      // bytes of a retried answer's body read and dropped
  SteadyTime connect_by_{};      // while connecting
  SteadyTime end_by_{};          // the whole transfer (max(): none)
  SteadyTime quiet_by_{};        // read_timeout after the last progress (max(): none)
  std::chrono::nanoseconds read_timeout_{};
  int fd_ = -1;
  CURLcode code_ = CURLE_OK;
  std::string detail_;
  bool connecting_ = false;
  bool head_overflow_ = false;  // the head passed max_header_bytes
  bool reused_ = false;
  bool heard_ = false;     // an answer byte arrived
  bool sent_ = false;      // the request is being written: it may have been applied
  // The server answered (>= 300) or hung up before reading the whole request:
  // the rest is not sent, and the connection is not kept (as curl: "HTTP error
  // before end of send, stop sending").
  bool stopped_sending_ = false;
  std::string send_error_;  // the send failure, reported if no answer came
  bool reported_ = false;  // the machine has the final head
  bool wanted_ = false;    // ... and wants its body
  bool ended_ = false;     // the machine ended the request (its body refused)
  bool done_ = false;      // the exchange is over (code_ says how)
  bool withheld_ = false;  // held back before sending
  bool threw_ = false;     // out of memory
  bool paused_ = false;
  bool reusable_ = false;
};

}  // namespace abide::curl_detail
