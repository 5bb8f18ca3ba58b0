// One attempt on a libcurl easy handle, reported to an engine::Machine
// (private to abide::curl): the handle set up for the request, its callbacks
// feeding the machine as the answer arrives, and how the transfer's end is
// told to the machine. Whoever runs the transfer (a blocking multi loop, or
// an event loop's multi handle) does so between start() and end().
#pragma once

#include <curl/curl.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "abide/clock.h"
#include "abide/engine.h"
#include "abide/pacer.h"
#include "transfer.h"
#include "transport.h"

namespace abide::curl_detail {

class EasyAttempt {
 public:
  EasyAttempt() = default;
  EasyAttempt(const EasyAttempt&) = delete;
  EasyAttempt& operator=(const EasyAttempt&) = delete;

  // Resets `easy` (its connection and DNS caches stay) and sets it up to send
  // `request` once; `easy` may be replaced by a new handle (a receive buffer
  // libcurl cannot resize), the old one cleaned up. False: the request cannot
  // be sent as it is, and the machine was told (refuse). Everything given must
  // outlive the transfer.
  [[nodiscard]] bool start(CURL*& easy, const engine::Request& request, const TransferLimits& limits,
                           const BodyTarget& body, engine::Machine& machine, const MonotonicClock& mono,
                           const WallClock& wall, const ParsedUrl* url);

  // After start(): just before the request is written (the connection is
  // ready), the attempt is held back when `pacer` holds `key` (a wait heard
  // since the permit), and the machine is told at end() (withdraw). For a
  // transport that may send a permitted attempt later than at once.
  void hold_back_if_held(const Pacer& pacer, const Pacer::Key& key) noexcept {
    pacer_ = &pacer;
    key_ = &key;
  }

  // The transfer ended (`end`; `stopped`: a stop was asked for): tells the
  // machine, unless it heard all already. kComplete: the final answer is all
  // in, and the caller calls machine.complete() (after giving an empty body's
  // head to its sink).
  [[nodiscard]] Transport::End end(const TransferEnd& end, bool stopped);

  // The machine ended the request during the transfer (a retried head, a
  // refused body): the transfer may be dropped at once.
  bool decided() const noexcept { return ended_ || (reported_ && !wanted_); }
  // Its connection is ready (the request is being written, or was held back).
  bool connected() const noexcept { return sent_ || withheld_; }
  // The HTTP version of the answer's status line (11, 20, ...; 0: none yet).
  int answer_version() const noexcept { return head_.http_version(); }

  // libcurl's callbacks (public for their C signatures; not for callers).
  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* self);
  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* self);
  static int on_prereq(void* self, char*, char*, int, int);

 private:
  struct SlistDeleter {
    void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
  };
  std::optional<std::string> header_list(const engine::Request& request, const TransferLimits& limits);
  bool set_options(CURL* e, const engine::Request& request, const TransferLimits& limits, const ParsedUrl* url);
  std::size_t header_line(char* data, std::size_t total);
  std::size_t body_bytes(char* data, std::size_t total);
  template <class Fn>
  std::size_t guarded(Fn fn) noexcept;

  engine::Machine* machine_ = nullptr;
  const BodyTarget* body_ = nullptr;
  const MonotonicClock* mono_ = nullptr;
  const WallClock* wall_ = nullptr;
  std::size_t max_header_bytes_ = 0;
  HeadReader head_{0, /*keep_raw=*/false};
  std::unique_ptr<curl_slist, SlistDeleter> headers_;
  std::string user_agent_;
  std::string proxy_;
  std::string ca_file_;
  char errbuf_[CURL_ERROR_SIZE] = {};
  bool sent_ = false;        // the request is being written (on_prereq): it may have been applied
  bool reported_ = false;    // the machine has the final head
  bool wanted_ = false;      // ... and wants its body
  bool ended_ = false;       // the machine ended the request during the transfer (its body refused)
  std::size_t dropped_ = 0;  // bytes of a retried answer's body read and dropped
  const Pacer* pacer_ = nullptr;     // hold_back_if_held
  const Pacer::Key* key_ = nullptr;
  bool withheld_ = false;  // held back before sending (on_prereq)
  bool threw_ = false;       // a callback failed (out of memory)
};

}  // namespace abide::curl_detail
