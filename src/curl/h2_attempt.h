// One attempt over abide's own HTTP/2 client (src/h2), reported to an
// engine::Machine as PlainTransfer and EasyAttempt report theirs (private to
// abide::curl). LoopClient sends over it https:// to an IP literal (no name
// to look up) when nothing asks for libcurl's machinery (a proxy,
// decompression, HTTP/1.1 only): many streams share each connection, and a
// socket event runs only the streams it carries.
//
// The attempt is one stream's owner: LoopClient opens it on a connection's
// session, the session tells it the answer as it arrives, and once it has
// ended (ended()) LoopClient calls end() and the machine hears the outcome.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/engine.h"
#include "abide/pacer.h"
#include "h2/channel.h"
#include "h2/session.h"
#include "request_rules.h"
#include "transport.h"

namespace abide::curl_detail {

using SteadyTime = std::chrono::steady_clock::time_point;

// Where an attempt over the own HTTP/2 client connects, and what it names.
using H2Target = OwnTarget;

// The target of `request` when the own HTTP/2 client can send it: an
// https:// URL whose host is an IP literal (own_target()). nullopt: libcurl
// sends it.
[[nodiscard]] inline std::optional<H2Target> h2_target(const engine::Request& request) {
  return own_target(request, "https", 443);
}
// A quick look whether h2_target() may take a request to `url`.
[[nodiscard]] inline bool h2_candidate(std::string_view url) noexcept { return own_candidate(url, "https://"); }
// Whether the limits leave the own HTTP/2 client to send anything: no proxy
// given or in the environment (https_proxy, all_proxy), no decompression,
// and HTTP/2 not ruled out.
[[nodiscard]] bool h2_allowed(const TransferLimits& limits) noexcept;
[[nodiscard]] inline bool https_proxy_in_environment() noexcept {
  return any_in_environment({"https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"});
}

class H2Attempt final : public h2::StreamEvents {
 public:
  H2Attempt() = default;
  H2Attempt(const H2Attempt&) = delete;
  H2Attempt& operator=(const H2Attempt&) = delete;

  // Sets the attempt up to send `request` to `target` once; false: it cannot
  // be sent as it is, and the machine was told (refuse). Everything given
  // must outlive the attempt.
  [[nodiscard]] bool start(const engine::Request& request, H2Target target, const TransferLimits& limits,
                           const BodyTarget& body, engine::Machine& machine, const MonotonicClock& mono,
                           const WallClock& wall, SteadyTime now);
  // As EasyAttempt::hold_back_if_held: checked just before the stream opens.
  void hold_back_if_held(const Pacer& pacer, const Pacer::Key& key) noexcept {
    pacer_ = &pacer;
    key_ = &key;
  }
  // Where the attempt puts `job` when it ends by itself (the session told, a
  // timeout): the loop ends those after the event.
  void tell_end_to(std::vector<std::uint64_t>* list, std::uint64_t job) noexcept {
    ended_list_ = list;
    job_ = job;
  }
  // Opens the stream on `session` (of connection `fd`). False: it ended at
  // once (held back, or the session refused it): end() says how.
  [[nodiscard]] bool open(h2::Session& session, int fd);

  // The stream ended (the session told, or open() failed, or a timeout).
  bool ended() const noexcept { return ended_; }
  // When on_time() is due at the latest.
  SteadyTime due() const noexcept;
  // A timeout passed: the stream is cancelled and the attempt ended (true).
  [[nodiscard]] bool on_time(SteadyTime now);
  // Backpressure: while paused the stream's window stays closed (what
  // arrived is delivered; the server sends no more). resume() reopens it.
  void pause() noexcept { paused_ = true; }
  void resume();
  // Stops the stream (RST_STREAM) if it still runs.
  void stop();

  // The connection failed before the request went out in a way that would
  // be the same again (the certificate) or that libcurl handles (no HTTP/2
  // in ALPN): LoopClient says which before end().
  void connection_failed(h2::Channel::Failure failure) noexcept {
    if (failure != h2::Channel::Failure::kNone) failure_ = failure;
  }
  // No connection could be made for it (`why`): it ends unsent.
  void fail_to_connect(std::string why) {
    failure_ = h2::Channel::Failure::kConnect;
    end_.why = std::move(why);
    ended_ = true;
  }
  // Ended without the request going out (the connection failed first, or the
  // server refused the stream).
  bool unsent() const noexcept { return ended_ && !end_.sent; }
  // After ended(): tells the machine, as PlainTransfer::end does.
  [[nodiscard]] Transport::End end(bool stopped);

  int fd() const noexcept { return fd_; }
  std::int32_t stream() const noexcept { return stream_; }
  const H2Target& target() const noexcept { return target_; }

  // h2::StreamEvents
  void on_head(int status, std::span<const h2::Field> fields) override;
  void on_data(std::string_view data) override;
  void on_end(const h2::StreamEnd& end) override;
  void on_sent() override;

 private:
  bool give_body(std::string_view data);
  void end_here(h2::StreamEnd end);
  void stop_stream();

  engine::Machine* machine_ = nullptr;
  const BodyTarget* body_ = nullptr;
  const MonotonicClock* mono_ = nullptr;
  const WallClock* wall_ = nullptr;
  const engine::Request* request_ = nullptr;
  const Pacer* pacer_ = nullptr;
  const Pacer::Key* key_ = nullptr;
  h2::Session* session_ = nullptr;
  std::vector<std::uint64_t>* ended_list_ = nullptr;
  std::uint64_t job_ = 0;
  H2Target target_;
  std::vector<h2::Field> fields_;  // the request's fields as sent
  std::string_view body_out_;      // the request's body, if it sends one
  std::size_t max_header_bytes_ = 0;
  std::size_t dropped_ = 0;        // bytes of a retried answer's body read and dropped
  std::size_t held_ = 0;           // bytes delivered while paused, their window still closed
  SteadyTime connect_by_{};        // until the request goes out
  SteadyTime end_by_{};            // the whole exchange (max(): none)
  SteadyTime quiet_by_{};          // read_timeout after the last byte (max(): none)
  std::chrono::nanoseconds read_timeout_{};
  h2::StreamEnd end_;
  std::string timed_out_;          // why a timeout ended it
  h2::Channel::Failure failure_ = h2::Channel::Failure::kNone;
  std::int32_t stream_ = 0;
  int fd_ = -1;
  bool reported_ = false;  // the machine has the final head
  bool wanted_ = false;    // ... and wants its body
  bool refused_body_ = false;  // the machine ended the request (its body refused)
  bool withheld_ = false;  // held back before sending
  bool threw_ = false;     // out of memory
  bool paused_ = false;
  bool sent_ = false;      // the request's head went out
  bool ended_ = false;
};

}  // namespace abide::curl_detail
