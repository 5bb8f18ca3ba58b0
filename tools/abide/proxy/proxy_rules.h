// The rules of `abide proxy` that need no socket: where a caller's request
// goes, what of it goes upstream, whose quota it spends, how long the caller
// lets it wait, and what the caller is answered. Pure functions, so that each
// rule is tested on its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/client.h"
#include "abide/clock.h"
#include "abide/engine.h"
#include "abide/headers.h"
#include "abide/result.h"
#include "key_secret.h"
#include "proxy/http1_request.h"

namespace abide::proxy {

// One upstream: `--upstream URL` (prefix "", every target) or
// `--route /PREFIX=URL` (targets under PREFIX, which is stripped).
struct Route {
  std::string prefix;  // "" or "/a/b" (no trailing slash)
  std::string base;    // the upstream URL without query, fragment or trailing slash: "https://api.x.com/v1"
  UrlOrigin origin;    // base's origin (host decides the vendor profile)
};

// `--upstream URL`: an http(s) URL without query, fragment or userinfo.
[[nodiscard]] Result<Route, ErrorMessage> parse_upstream(std::string_view url);
// `--route /PREFIX=URL`: PREFIX starts with '/', has no '?', '#' or space.
[[nodiscard]] Result<Route, ErrorMessage> parse_route(std::string_view spec);

// The route for a caller's target: the longest prefix that matches on a
// segment boundary ("/a" takes "/a", "/a/x" and "/a?q", not "/ab"); nullptr
// when none does.
[[nodiscard]] const Route* match_route(const std::vector<Route>& routes, std::string_view target) noexcept;

// A caller's target as routes are matched and as it is sent (RFC 3986): in
// the path, percent-encoded unreserved characters decoded (6.2.2.2: "%2e"
// is ".", "%41" is "A") and dot segments removed (5.2.4); the query, and
// every other escape, as sent. "*" stays. A path with a '%' that does not
// start an escape is an error (decoding could make one). A target whose dot segments climb
// above the root, or out of the route its path names into another route or
// none ("/ai/../admin" under --route /ai), is an error for a 400: it would
// otherwise reach an upstream path outside its route's base.
[[nodiscard]] Result<std::string, ErrorMessage> normalize_target(const std::vector<Route>& routes,
                                                                 std::string_view target);

// The upstream URL of `target` under `route`: the prefix stripped, the rest
// appended to the base's path ("/v1" + "/chat?x" under prefix "").
[[nodiscard]] std::string upstream_url(const Route& route, std::string_view target);

// The caller's fields that go upstream, in order: all but the hop-by-hop ones
// (RFC 9110 7.6.1: Connection and every field it names, Keep-Alive,
// Proxy-Connection, Proxy-Authorization, TE, Trailer, Transfer-Encoding,
// Upgrade), Host (the upstream's is sent), Content-Length (recomputed),
// Expect, and every Abide-* field.
[[nodiscard]] HeaderList forward_headers(const HeaderList& caller);

// The caller's budget: Abide-Max-Wait as decimal seconds (0 to 31 days;
// "2", "0.5"; at most three digits after the point; no sign or exponent),
// else `fallback`. Several lines or list members must all be the same value.
// Malformed, empty or repeated with different values: an error naming the
// field and saying what is wrong (quoting at most 32 bytes, made printable),
// for a 400.
[[nodiscard]] Result<Duration, ErrorMessage> caller_max_wait(const HeaderList& caller, Duration fallback);

// The pacer key of a request: the upstream origin, and when the caller sent
// a credential (Authorization, X-Api-Key, Api-Key, X-Auth-Token,
// Private-Token, X-Goog-Api-Key; names in any case), "#" and the first 16
// hex digits of the HMAC-SHA-256, under `secret`, of the origin and every
// such field as "name:value\n" (name lower-cased, value as sent), sorted by
// name and then value. Same credential, same key, whatever the order or case
// of the fields; the key never holds the credential, and without the secret a
// reader of key names can neither test a guessed token against one nor tell
// that two origins are called with the same credential.
[[nodiscard]] std::string quota_key(const UrlOrigin& origin, const HeaderList& caller, const cli::KeySecret& secret);

// Whether the caller sent a field that quota_key counts as a credential.
[[nodiscard]] bool carries_credential(const HeaderList& caller) noexcept;

// The upstream request for a caller's request, forwarded under `route`: the
// method as sent, upstream_url, forward_headers, the body, and quota_key
// (under `secret`) as the pacer key. The caller's Idempotency-Key stays in
// the headers (the engine reads it there); idempotency_key and
// non_idempotent are left unset, so the engine's method rules decide what may
// be repeated (a POST without a key is sent once). Deadlines are the server's
// to set.
[[nodiscard]] engine::Request upstream_request(const RequestHead& head, const Route& route, std::string body,
                                              const cli::KeySecret& secret);

// An answer's head for the caller. The server adds the framing
// (Content-Length when `content_length` is known, else chunked for HTTP/1.1
// or close-delimited for HTTP/1.0) and Connection.
struct AnswerHead {
  int status = 200;
  HeaderList headers;
  std::optional<std::uint64_t> content_length;
};

// The caller's head for the upstream's final answer: its status and fields
// without the hop-by-hop and framing ones (Connection and the fields it
// names, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding,
// Upgrade) and without the upstream's own Abide-* fields (the caller reads
// this proxy's). Content-Length moves to content_length when it is valid (a
// number, or a list of equal ones; else it is dropped and the server frames
// the body itself); for a HEAD request (`head_request`) and for 204 and 304,
// which have no body, the field is kept as sent and content_length stays
// empty: the server then writes no body and no framing of its own.
// Added: Abide-Outcome (the outcome's name, "done" too), Abide-Attempts,
// Abide-Waited (seconds, three decimals). When the request did not end done
// and its permitted time is known: the server's Retry-After replaced by whole
// seconds from `now`, rounded up (at least 1 while that time is ahead, so
// never before it), and Abide-Not-Before (rfc3339_millis). Without a known
// permitted time the server's Retry-After, if any, stays. The server's other
// hints (RateLimit, X-RateLimit-*) always stay.
[[nodiscard]] AnswerHead answer_head(const FinalHead& final_head, WallTime now, bool head_request = false);

// A permitted time as Abide-Not-Before writes it: RFC 3339 UTC with
// milliseconds, rounded up so that it is never before `t`
// ("2026-12-01T14:03:12.345Z").
[[nodiscard]] std::string rfc3339_millis(WallTime t);

// An answer made by the proxy: a head and a short plain-text body.
struct MadeAnswer {
  AnswerHead head;
  std::string body;
};

// The answer for a request that ended without a final upstream answer
// streamed to the caller (FinalHead was never called): the last upstream
// answer's status and fields when the outcome has one (its body was not
// kept, so its Content-* fields go too), else 429 when nothing was sent
// (deferred, deadline_exceeded, exhausted before any attempt), 502 with
// Abide-Outcome ambiguous when it may have been applied, 502 for transport
// errors and for not_retryable, 503 for cancelled (the proxy is stopping);
// with the same Abide-* fields and Retry-After rules as answer_head. The body
// is one line, "abide proxy: <outcome>: <the engine's reason>\n", as
// text/plain; content_length is its size.
[[nodiscard]] MadeAnswer outcome_answer(const RequestOutcome& outcome, WallTime now);

// An answer to a caller's bad input or to the proxy's own state: 400, 413,
// 431, 501, 505 (from HttpError), 503 (queue full, stopping: with
// Retry-After of `retry_after` whole seconds, rounded up, and Abide-Not-Before
// when `not_before` is given), 404 (no route). Retry-After is never before
// `not_before` either (the later of the two). The body is "abide proxy:
// <reason>\n" (reason made printable), text/plain; every answer carries
// Abide-Attempts: 0 and Abide-Waited: 0.000, and a 503 Abide-Outcome: deferred.
[[nodiscard]] MadeAnswer error_answer(int status, std::string_view reason,
                                      std::optional<Duration> retry_after = std::nullopt,
                                      std::optional<WallTime> not_before = std::nullopt, WallTime now = {});

// The reason phrase of a status ("Too Many Requests"; "" when unknown).
[[nodiscard]] std::string_view reason_phrase(int status) noexcept;

}  // namespace abide::proxy
