// One HTTP exchange over libcurl, for abide::Client (private to abide::curl).
//
// A Transport owns one easy handle inside its own multi handle: the multi
// handle keeps the connection cache (so consecutive requests of one worker
// reuse the connection) and lets a stop request wake the transfer at once
// (curl_multi_wakeup) instead of at libcurl's next progress tick.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "abide/client.h"
#include "abide/clock.h"
#include "abide/engine.h"
#include "abide/headers.h"

namespace abide::curl_detail {

// curl_global_init, once per process, thread-safe.
void global_init();

// A URL as libcurl's parser took it (a CURLU handle), kept for a request's
// attempts: each transfer is given it (CURLOPT_CURLU, which libcurl reads and
// never changes) instead of the URL text, which libcurl would parse again.
// Move-only; empty when default-constructed.
class ParsedUrl {
 public:
  ParsedUrl() = default;
  ParsedUrl(ParsedUrl&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  ParsedUrl& operator=(ParsedUrl&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  ParsedUrl(const ParsedUrl&) = delete;
  ParsedUrl& operator=(const ParsedUrl&) = delete;
  ~ParsedUrl();

  void* handle() const noexcept { return handle_; }  // CURLU*, or null

 private:
  friend std::optional<std::string> parse_url(std::string_view url, ParsedUrl& out);
  void* handle_ = nullptr;
};

// What libcurl's URL parser finds wrong with an http(s) URL, in its words;
// nullopt when libcurl takes it, and then `out` holds libcurl's parse. (The
// origin and the pacer key come from the core's parse_origin: this only says
// whether libcurl will send it.)
std::optional<std::string> parse_url(std::string_view url, ParsedUrl& out);
// The same check, the parse dropped.
std::optional<std::string> url_error(std::string_view url);

// What one transfer may do.
struct TransferLimits {
  Duration connect_timeout{};
  Duration timeout{};  // the whole transfer; zero: none
  Duration read_timeout{};  // ClientConfig::read_timeout
  std::size_t max_header_bytes = 0;
  std::string_view user_agent;
  bool default_fields = true;  // ClientConfig::default_fields
  bool verify_tls = true;
  std::string_view ca_file;  // empty: the system's CA certificates
  std::string_view proxy;  // empty: libcurl's default (the *_proxy environment variables)
  bool decompress = false;
  HttpVersion http_version = HttpVersion::kDefault;
  std::size_t receive_buffer_bytes = 0;  // ClientConfig::receive_buffer_bytes
};

// Where the final answer's body goes.
struct BodyTarget {
  // nullptr: to the machine (Machine::body) chunk by chunk, straight from
  // libcurl's buffer, with no size cap. Else kept here, up to max_bytes (a
  // longer body ends the request not_retryable), and given to the machine
  // whole once the transfer ended cleanly: a body that breaks off then never
  // reached the machine, so a GET is retried.
  std::string* keep = nullptr;
  std::size_t max_bytes = 0;
};

class Transport {
 public:
  Transport();
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // False when libcurl could not create its handles.
  bool ok() const noexcept { return easy_ != nullptr && multi_ != nullptr; }

  // How perform() left the attempt.
  enum class End : std::uint8_t {
    kReported,  // the machine heard all (a retried head, a failure, a refusal, a stop)
    kComplete,  // the final answer is all in: the caller calls machine.complete()
  };

  // Sends the request once and reports to `machine` as the answer arrives:
  // Machine::head() as soon as the final head is complete, then the body
  // (see BodyTarget); failed(), refuse() or cancel() when the attempt ends
  // otherwise. The body of an answer to be retried reaches nobody: a short
  // one is read and dropped (the connection stays for the retry), a longer
  // one is cut (the connection closes).
  // `url`: the request's URL as parse_url() left it (null: the URL text is
  // given to libcurl, which parses it).
  [[nodiscard]] End perform(const Request& request, const TransferLimits& limits, const BodyTarget& body,
                            engine::Machine& machine, const MonotonicClock& mono, const WallClock& wall,
                            std::stop_token stop, const ParsedUrl* url = nullptr);

 private:
  void* easy_ = nullptr;   // CURL*
  void* multi_ = nullptr;  // CURLM*
};

// True when the header name is a token (RFC 9110 5.6.2).
bool valid_token(std::string_view s) noexcept;
// True when `s` holds CR, LF or NUL (which would split or end a request line).
bool has_ctl(std::string_view s) noexcept;

}  // namespace abide::curl_detail
