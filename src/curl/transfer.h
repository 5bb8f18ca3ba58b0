// What both libcurl adapters of abide::Client share (private to abide::curl):
// reading the response heads a header callback is given, running one easy
// handle's transfer in a multi handle that a stop request can wake, and
// bounding how many transfers run at once.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/engine.h"
#include "abide/headers.h"
#include "mutex.h"

namespace abide::curl_detail {

// The heads of one transfer, as libcurl gives them to a header callback one
// line per call: 1xx heads, a proxy's CONNECT answer and the heads of followed
// redirects come before the final one, trailers after it. Keeps the last head.
class HeadReader {
 public:
  // `keep_raw`: keep the last head's lines as received too (raw_lines()),
  // for a caller's own header callback; the Client's transfers need none.
  explicit HeadReader(std::size_t max_bytes, bool keep_raw = true) : max_bytes_(max_bytes), keep_raw_(keep_raw) {}

  // One line as libcurl gave it (with its CRLF). False: the heads are longer
  // than max_bytes (the caller aborts the transfer).
  [[nodiscard]] bool line(std::string_view raw, const WallClock& wall, const MonotonicClock& mono);

  // A head with a final status (>= 200) has ended with its empty line.
  bool complete() const noexcept { return complete_; }
  bool overflow() const noexcept { return overflow_; }
  // Bytes of every line read so far (1xx heads included), as libcurl counts them.
  std::size_t bytes() const noexcept { return bytes_; }
  int status() const noexcept { return status_; }
  // The last status line's HTTP version as curl numbers it (10, 11, 20, 30),
  // or 0 when it names none that is known.
  int http_version() const noexcept { return http_version_; }
  WallTime received_wall() const noexcept { return received_wall_; }
  MonoTime received_mono() const noexcept { return received_mono_; }
  // The last head's lines, parsed (obsolete folding joined, bad lines skipped).
  HeaderList headers() const;
  // The same lines, moved out (no copy of each): the reader has none left.
  // For a complete head, given once.
  HeaderList take_headers();
  // The last head as received, line by line (status line to empty line);
  // empty unless keep_raw.
  const std::vector<std::string>& raw_lines() const noexcept { return raw_; }

 private:
  std::size_t max_bytes_;
  bool keep_raw_ = true;
  std::size_t bytes_ = 0;
  bool overflow_ = false;
  bool complete_ = false;
  int status_ = 0;
  int http_version_ = 0;
  WallTime received_wall_{};
  MonoTime received_mono_{};
  std::vector<Header> lines_;
  std::vector<std::string> raw_;
};

// How a transfer in a multi handle ended.
struct TransferEnd {
  enum class Kind : std::uint8_t {
    kFinished,   // libcurl finished it: `code` says how
    kCancelled,  // the stop token was triggered
    kTimedOut,   // `until` passed
    kBroken,     // the multi handle failed
  };
  Kind kind = Kind::kBroken;
  CURLcode code = CURLE_OK;
};

// Runs the transfer of `easy`, already added to `multi`, until it ends, `stop`
// is triggered (which wakes the poll at once) or `until` passes. The caller
// removes the handle from the multi handle afterwards.
TransferEnd run_transfer(CURLM* multi, CURL* easy, std::stop_token stop,
                         std::optional<std::chrono::steady_clock::time_point> until);

// libcurl's own bounds on a response head, besides ClientConfig's
// max_header_bytes: one header line (CURL_MAX_HTTP_HEADER; beyond it libcurl
// fails with CURLE_OUT_OF_MEMORY), and every head of one transfer (since
// libcurl 8.3, and in distributions' patched 7.88: CURLE_RECV_ERROR, "Too
// large response headers").
inline constexpr std::size_t kCurlMaxHeaderLine = std::size_t{100} << 10;
inline constexpr std::size_t kCurlMaxHeadBytes = std::size_t{300} << 10;

// When a transfer ended before its final head was complete because the head
// passed a size limit (`head`'s own max_bytes, or one of libcurl's): what to
// tell Machine::head_too_large; else nullopt. `sent`: the request went out
// (before that, libcurl's out-of-memory is real); `detail`: libcurl's error
// buffer, when there is one.
[[nodiscard]] std::optional<std::string> head_limit_error(CURLcode code, const HeadReader& head, bool sent,
                                                          std::string_view detail, std::size_t max_header_bytes);

// When a transfer that failed with `code` (and libcurl's error buffer
// `detail`, possibly empty) would fail the same way on every attempt: why, in
// a few words; else nullopt. Such an error comes before anything is sent (a
// scheme or URL libcurl will not take, a feature not built in, a bad option, a
// proxy URL it cannot read, a TLS version, cipher or certificate that does
// not match); a transient one (a refused or reset connection, a timeout, a
// failed name lookup, a TLS handshake cut short) is not.
[[nodiscard]] std::optional<std::string_view> lasting_error(CURLcode code, std::string_view detail) noexcept;

// True when an error with this code leaves no doubt whether the request went
// out: it cannot have been sent unless libcurl reported sending it. Every
// other error counts as "sent" (the safe side: a non-idempotent request is
// then reported ambiguous, never repeated).
bool certain_before_send(CURLcode code) noexcept;

// At most `limit` transfers at once over every thread of one Client (0: no
// limit; ClientConfig::max_transfers). A transfer beyond it waits for one to
// end, in arrival order: an ending transfer hands its slot straight to the
// longest waiter, so a later arrival can never overtake it. Thread-safe.
class TransferSlots {
 public:
  explicit TransferSlots(std::size_t limit) noexcept : limit_(limit) {}
  TransferSlots(const TransferSlots&) = delete;
  TransferSlots& operator=(const TransferSlots&) = delete;

  enum class Result : std::uint8_t { kAcquired, kCancelled, kTimedOut };
  // Takes a slot, waiting for one until `stop` is triggered or `until` passes.
  [[nodiscard]] Result acquire(std::stop_token stop, std::optional<std::chrono::steady_clock::time_point> until);
  // Gives back a slot acquire() took.
  void release() noexcept;

  std::size_t limit() const noexcept { return limit_; }
  // Transfers holding a slot, and transfers waiting for one (for tests).
  std::size_t active() const;
  std::size_t waiting() const;

  // A slot held until the end of a scope (none when `slots` is null).
  class Held {
   public:
    Held() = default;
    explicit Held(TransferSlots* slots) noexcept : slots_(slots) {}
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() {
      if (slots_ != nullptr) slots_->release();
    }

   private:
    TransferSlots* slots_ = nullptr;
  };

 private:
  // One waiting transfer, on its own thread's stack; queued while it waits.
  struct Waiter {
    std::condition_variable_any cv;  // waits with the stop token, on mu_
    bool granted = false;        // under mu_
  };
  const std::size_t limit_;
  mutable detail::Mutex mu_;
  std::size_t active_ ABIDE_GUARDED_BY(mu_) = 0;
  std::list<Waiter*> queue_ ABIDE_GUARDED_BY(mu_);  // in arrival order
};

// Takes a slot of `slots` (unless it has no limit) for an attempt the engine
// permitted to send: waits, cancellably by `stop`, at most until the
// request's deadline or send_by. When it gets none, tells the machine that
// the attempt was not sent (cancelled, or the deadline passed) and returns
// false.
[[nodiscard]] bool take_slot(TransferSlots& slots, const engine::Request& request, engine::Machine& machine,
                             const MonotonicClock& mono, std::stop_token stop);

}  // namespace abide::curl_detail
