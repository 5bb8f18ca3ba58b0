// One HTTP exchange over libcurl, for abide::Client (private to abide::curl).
//
// A Transport owns one easy handle inside its own multi handle: the multi
// handle keeps the connection cache (so consecutive requests of one worker
// reuse the connection) and lets a stop request wake the transfer at once
// (curl_multi_wakeup) instead of at libcurl's next progress tick.
#pragma once

#include <cstddef>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "abide/client.h"
#include "abide/clock.h"
#include "abide/headers.h"

namespace abide::curl_detail {

// curl_global_init, once per process, thread-safe.
void global_init();

// What libcurl's URL parser finds wrong with an http(s) URL, in its words;
// nullopt when libcurl takes it. (The origin and the pacer key come from the
// core's parse_origin: this only says whether libcurl will send it.)
std::optional<std::string> url_error(std::string_view url);

// What one transfer may do.
struct TransferLimits {
  Duration connect_timeout{};
  Duration timeout{};  // the whole transfer; zero: none
  std::size_t max_body_bytes = 0;
  std::size_t max_header_bytes = 0;
  std::string_view user_agent;
  bool verify_tls = true;
};

// How one exchange ended.
struct Exchange {
  enum class Result {
    kResponse,      // a complete response
    kFailed,        // a transport error (error, sent)
    kTimedOut,      // the transfer timeout fired (sent tells whether the request went out)
    kCancelled,     // the stop token was triggered
    kBodyTooLarge,  // a response head arrived, its body was over the limit
    kInvalid,       // the request cannot be sent (bad method, header, URL)
  };
  Result result = Result::kFailed;
  int status = 0;      // the final response's status (when a head arrived)
  HeaderList headers;  // the final response's header lines
  std::string body;
  bool head_complete = false;  // a final (non-1xx) response head was received
  WallTime received_wall{};    // when the head was complete, else when the exchange ended
  MonoTime received_mono{};
  bool sent = false;  // the request was (at least partly) sent
  std::string error;  // for everything but kResponse
};

class Transport {
 public:
  Transport();
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // False when libcurl could not create its handles.
  bool ok() const noexcept { return easy_ != nullptr && multi_ != nullptr; }

  // Sends the request once and reads the response.
  Exchange perform(const Request& request, const TransferLimits& limits, const MonotonicClock& mono,
                   const WallClock& wall, std::stop_token stop);

 private:
  void* easy_ = nullptr;   // CURL*
  void* multi_ = nullptr;  // CURLM*
};

// True when the header name is a token (RFC 9110 5.6.2).
bool valid_token(std::string_view s) noexcept;

}  // namespace abide::curl_detail
