// What the own clients (HTTP/1.1: plain_transfer.h, HTTP/2: h2_attempt.h)
// take from libcurl's way of sending a request, so that a request reads the
// same to the server whichever client carried it (private to abide::curl).
#pragma once

#include <curl/curl.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

#include "abide/engine.h"
#include "transport.h"

namespace abide::curl_detail {

// Fields the own clients write themselves, or that would ask the connection
// for what they do not do: a request with one goes to libcurl.
[[nodiscard]] bool steers_connection(std::string_view name) noexcept;

// A path as libcurl sends it: no dot segments (which it removes), their
// percent-encoded forms, or bytes beyond ASCII.
[[nodiscard]] bool path_as_libcurl_sends(std::string_view target) noexcept;

// Whether libcurl would send a body (and Content-Length) with `r`.
[[nodiscard]] bool sends_body(const engine::Request& r) noexcept;

// Where an attempt over an own client connects, and what it names.
struct OwnTarget {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string ip;         // the IP literal, without brackets (what a server's certificate must name)
  std::string authority;  // Host or :authority: the IP literal (IPv6 in brackets), ":port" unless the default
  std::string path;       // origin-form: path and query
  std::string pool;       // the origin, which connections are kept and shared under
  std::string shown;      // "127.0.0.1 port 8080", for errors
};

// The target of `request` when an own client can send it as libcurl would:
// a `scheme` URL (default port `default_port`) whose host is an IP literal
// (no name to look up), without userinfo, a path as libcurl sends it, and no
// field that steers the connection. nullopt: libcurl sends it.
[[nodiscard]] std::optional<OwnTarget> own_target(const engine::Request& request, std::string_view scheme,
                                                  std::uint16_t default_port);

// A quick look whether own_target() may take `url`: it starts with `prefix`
// ("http://", any case) and a host that starts like an IP literal;
// own_target() decides when the request is sent.
[[nodiscard]] bool own_candidate(std::string_view url, std::string_view prefix) noexcept;

// Whether any of the environment variables `names` is set and not empty.
[[nodiscard]] bool any_in_environment(std::initializer_list<const char*> names) noexcept;

struct SentField {
  std::string_view name;
  std::string_view value;
};
// The fields libcurl sends with `request` under `limits`, Host aside and in
// its order: User-Agent and Accept unless the request has its own, the
// request's fields, Idempotency-Key, and with a body Content-Length (its
// digits written to `length`) and a default Content-Type. Views into
// `request`, `limits` and `length`. A reason instead when a field cannot be
// sent (a name that is no token; CR, LF or NUL in a value).
[[nodiscard]] std::optional<std::string> request_fields(const engine::Request& request, const TransferLimits& limits,
                                                        std::string& length, std::vector<SentField>& out);

// How an own client's attempt ended, in the terms every client reports in.
struct AttemptEnd {
  bool withheld = false;  // held back by the pacer before anything was sent
  bool threw = false;     // out of memory
  bool decided = false;   // the machine decided during it: a retry, or a refused body
  bool complete = false;  // the answer arrived whole
  bool stopped = false;   // the caller stopped it
  bool reported = false;  // the machine has the final head
  bool sent = false;      // the request went out (it may have been acted on)
};
// Tells the machine what every client tells alike (a withheld attempt, out
// of memory, a decision taken, a whole answer with its kept body, a stop),
// as EasyAttempt::end does; `body`'s kept bytes are dropped unless whole.
// nullopt: the attempt failed otherwise, and the caller tells how.
[[nodiscard]] std::optional<Transport::End> settle(engine::Machine& machine, const BodyTarget& body,
                                                   const AttemptEnd& how);

// libcurl's words for `code`, then its detail (printable, bounded as
// libcurl's error buffer) when there is one.
[[nodiscard]] std::string curl_error(CURLcode code, std::string_view detail);

// `now` + `d`, or max() for none (zero, negative or beyond a year).
[[nodiscard]] std::chrono::steady_clock::time_point after(std::chrono::steady_clock::time_point now,
                                                          std::chrono::nanoseconds d) noexcept;

// strerror_r's text for `e`.
[[nodiscard]] std::string errno_text(int e);

}  // namespace abide::curl_detail
