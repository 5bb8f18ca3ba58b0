// abide mock-server: a simulated rate-limited API on loopback (mock_server.h).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "abide/result.h"
#include "command.h"
#include "mock_server.h"

namespace abide::cli {
namespace cmd_mock_server {  // private to this file (the CLI is compiled as one unit)

using namespace std::chrono_literals;

struct MockOptions {
  std::string bind = "127.0.0.1";
  int port = 0;
  std::string style = "draft11";
  std::uint32_t limit = 10;
  double window_s = 1.0;
  std::string align = "first";
  int limited_status = 429;
  double latency_ms = 0;
  double fail_rate = 0;
  std::uint64_t seed = 1;
  double grace_ms = 50;
  std::size_t threads = 64;
  std::string record;
  std::string stats_file;
  double duration_s = 0;
  bool quiet = false;
  std::uint64_t token_limit = 40000;
  std::uint64_t output_token_limit = 8000;
};

constexpr const char* kFooter = R"(Windows: fixed; LIMIT requests are accepted per WINDOW, shared by all clients
(one quota, like one API key); limited and failed requests use none. Windows
start at the first API request after start or POST /__reset (--align first), or
at Unix-time multiples of WINDOW (--align epoch). The openai style instead
refills: a bucket of LIMIT requests, one back every WINDOW/LIMIT, starting full
(its windows only group the counts), and so do the token styles' buckets.
Every stated wait is rounded up (whole seconds, or ms for retry-after-ms),
never down.

Styles (fields on every answer; what the limited answer adds):
  draft11              RateLimit-Policy: "default";q=N;w=W  RateLimit: "default";r=R;t=T
                       + Retry-After: T
  draft-legacy         RateLimit-Limit, -Remaining, -Reset (delta), RateLimit-Policy: N;w=W
                       + Retry-After: T
  github               x-ratelimit-limit, -remaining, -used, -reset (Unix epoch), -resource
                       (remaining 0 is the wait signal; use --limited-status 403 or 429)
  openai               x-ratelimit-limit-requests, -remaining-requests (whole requests
                       in the bucket), -reset-requests (Go duration, e.g. 1.25s:
                       until the bucket is full again, not the next request)
                       + retry-after-ms: until one request is back (no Retry-After)
  retry-after-seconds  + Retry-After: T
  retry-after-date     + Retry-After: IMF-fixdate of the window's end
  draft12              RateLimit-Policy: "default";q=N;w=W  RateLimit: "default";a=R;w=T;c=C
                       RateLimit-Partition: "default" (provisional draft -12; C is 1
                       when the request used quota, else 0; no Retry-After: a=0 and
                       w=T are the wait signal)
  malformed            draft11 fields + a garbage Retry-After ("soon", "-1", "", ...)
  none                 the limited status with no hint at all
  openai-tokens        x-ratelimit-{limit,remaining,reset}-{requests,tokens} (resets: Go
                       durations to a full refill, as at admission)
                       + retry-after-ms, retry-after (whole s), OpenAI's error JSON
  anthropic-tokens     anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
                       {limit,remaining,reset} (resets: RFC 3339 of a full refill;
                       tokens-*: the input or output one with fewer left)
                       + retry-after (whole s), Anthropic's error JSON
  gemini               no quota field at all (a fixed window of LIMIT requests)
                       + a RESOURCE_EXHAUSTED body whose RetryInfo retryDelay "Ns" is
                       the time to the window's end
Every answer carries Date. --fail-rate answers 503 without a wait signal. The
gemini and token styles answer only 429 when limited, in their vendor's shape.

Token styles (bodies in the vendor's shape, on any path; a body over 1 MiB is
413 before it is read; one that is not a JSON object or has a bad field is 400
in the vendor's error shape; neither uses quota, and a 400 counts as
"invalid"). Text tokens are estimated as ceil(bytes / 4) of the UTF-8 text:
OpenAI's messages[].content (a string or parts' text; /responses input,
/completions prompt, /embeddings input); Anthropic's system and
messages[].content. Every bucket refills continuously over WINDOW.
  openai-tokens        a requests bucket of LIMIT and a tokens bucket of
                       --token-limit. A request is admitted when one request and
                       its charge, max(max_tokens, estimate), are there (max_tokens,
                       else max_completion_tokens, else max_output_tokens, else
                       4096; embeddings 0). The answer's usage: prompt = the
                       estimate, completion = a draw in [max_tokens/4, max_tokens]
                       (from --seed and the request's number); the bucket then
                       gets back the charge less the usage (or gives the excess).
  anthropic-tokens     requests (LIMIT), input tokens (--token-limit) and output
                       tokens (--output-token-limit). max_tokens is required (400
                       without). The input is charged at admission, max_tokens
                       reserved from the output bucket, and what the answer's
                       output (drawn as above) left unused is given back.
With "stream": true the answer is text/event-stream: OpenAI's chunks, a last
one with the usage and "choices": [] when stream_options.include_usage, then
"data: [DONE]"; Anthropic's message_start (input tokens), content_block_*,
message_delta (output tokens) and message_stop. A request larger than a
bucket's capacity is limited with no wait stated (it never fits).

Clients: the X-Client-Id header, else the peer address.

Premature request: every limited answer states an earliest permitted time P
(its wait signal: decision time + T, the date, the epoch reset; decision time +
retry-after-ms for openai and openai-tokens, + retry-after for anthropic-tokens,
+ retryDelay for gemini; for malformed, its RateLimit t; for draft12, its
RateLimit w; none, and a token request too large to ever fit, state nothing and
have no P) and leaves at a time S. A request from a client arriving at A is
judged by the most recent limited answer that client must already have had:
the latest one sent to it at least GRACE before A (younger ones may still be in
flight), or, if sent later, the last one sent on the request's own connection
(HTTP/1.1 answers in order). It is premature when A is strictly earlier than
that answer's P. With --grace 0: simply the last limited answer sent to the
client.

Control paths (never counted as API requests):
  GET /__stats   {"server": {...options, now_unix, anchor_unix, current_window},
                  "totals": {requests, accepted, limited, failed, premature},
                  "windows": [{index, start_unix, requests, accepted, limited,
                               failed, premature}, ...],
                  "windows_dropped": N,
                  "clients": {"ID": {requests, accepted, limited, failed, premature,
                               first_unix, last_unix, not_before_unix,
                               windows: [...]}}}
                 The token styles add to "server" token_limit (and
                 output_token_limit), and to "totals" and each of "windows":
                 "invalid": N (bodies refused; not in requests) and "tokens":
                   openai-tokens     {admitted, charged, prompt, completion}
                   anthropic-tokens  {input_admitted, input_charged,
                                      output_admitted, output_charged}
                 (admitted: at admission; charged: after reconciliation).
  POST /__reset  clears counters, clients and windows; fail-rate draws restart
                 from the seed.
  ANY /__echo    200 JSON of the request as received: {"method", "path", "query",
                 "headers": [[name, value], ...], "body"}.
  GET /__stream?chunks=N&gap_ms=M   200 text/event-stream, chunked: "data: i"
                 events, M ms apart (N <= 1000, default 5; M <= 10000, default 100).
  ANY /__hang?ms=M   reads the request, waits M ms (default 1000), then closes
                 the connection without an answer.
--record FILE writes one JSON line per API request: {"t", "client", "method",
"path", "status", "outcome", "premature", "window"} (and {"t","event":"reset"});
outcome "invalid" for a body a token style refused.

The first line on stdout is "listening on 127.0.0.1:PORT". SIGINT or SIGTERM
(or --duration) stops the server; exit 0.)";

// A token option given to a style that has no such bucket is a mistake worth
// saying, not an option silently ignored.
std::string token_options_error(bool token_limit, bool output_token_limit, mock::Style style) {
  if (token_limit && !mock::is_token_style(style))
    return "--token-limit applies to the openai-tokens and anthropic-tokens styles only";
  if (output_token_limit && style != mock::Style::kAnthropicTokens)
    return "--output-token-limit applies to the anthropic-tokens style only";
  return {};
}

// The two token flags, whose presence (not only their value) is checked
// against the style.
struct TokenFlags {
  CLI::Option* token_limit = nullptr;
  CLI::Option* output_token_limit = nullptr;
};

// The flags in the order --help lists them: the quota served, then how the
// server behaves around it.
TokenFlags add_quota_flags(CLI::App& app, MockOptions& o) {
  std::vector<std::string> styles;
  for (const auto& [s, name] : mock::kStyleNames) styles.emplace_back(name);
  app.add_option("--bind", o.bind, "Address to listen on: IPv4 loopback only (127.0.0.0/8)")->capture_default_str();
  app.add_option("--port", o.port, "Port; 0 picks a free one (printed on the first line)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--style", o.style, "Header style")->capture_default_str()->check(CLI::IsMember(styles));
  app.add_option("--limit", o.limit, "Accepted requests per window")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1'000'000'000u));
  app.add_option("--window", o.window_s, "Window length in seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  TokenFlags given;
  given.token_limit = app.add_option("--token-limit", o.token_limit,
                                     "Tokens per window: openai-tokens' tokens, anthropic-tokens' input tokens")
                          ->capture_default_str()
                          ->check(CLI::Range(std::uint64_t{1}, mock::kMaxTokenLimit));
  given.output_token_limit = app.add_option("--output-token-limit", o.output_token_limit,
                                            "Output tokens per window (anthropic-tokens)")
                                 ->capture_default_str()
                                 ->check(CLI::Range(std::uint64_t{1}, mock::kMaxTokenLimit));
  app.add_option("--align", o.align, "Where windows start: first (request) or epoch")
      ->capture_default_str()
      ->check(CLI::IsMember({"first", "epoch"}));
  app.add_option("--limited-status", o.limited_status, "Status of a limited answer")
      ->capture_default_str()
      ->check(CLI::IsMember({429, 503, 403}));
  return given;
}

void add_server_flags(CLI::App& app, MockOptions& o) {
  app.add_option("--latency", o.latency_ms, "Added to every API answer, in ms")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60000.0));
  app.add_option("--fail-rate", o.fail_rate, "Probability of a random 503")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", o.seed, "Seed for --fail-rate and the token styles' output tokens")->capture_default_str();
  app.add_option("--grace", o.grace_ms, "In-flight allowance for premature counting, in ms")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600000.0));
  app.add_option("--threads", o.threads, "Worker threads (each open connection holds one)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  app.add_option("--record", o.record, "Write one JSON line per API request to FILE");
  app.add_option("--stats-file", o.stats_file, "Write the /__stats JSON to FILE on exit");
  app.add_option("--duration", o.duration_s, "Stop by itself after this many seconds (0: run until a signal)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0 * 365));
  app.add_flag("--quiet,-q", o.quiet, "Print nothing on stderr");
}

// The server's options from the command line's, or the usage error that
// says why not (without "abide: ").
Result<mock::ServerOptions, std::string> server_options(const MockOptions& o, const TokenFlags& given) {
  if (!mock::is_loopback_address(o.bind)) {
    return fail("refusing to bind " + o.bind + ": the mock server binds IPv4 loopback (127.0.0.0/8) only");
  }
  mock::ServerOptions so;
  so.bind = o.bind;
  so.port = o.port;
  so.threads = o.threads;
  so.record_path = o.record;
  auto& lo = so.limiter;
  lo.style = *mock::parse_style(o.style);
  lo.limit = o.limit;
  lo.window = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o.window_s));
  lo.align = o.align == "epoch" ? mock::Align::kEpoch : mock::Align::kFirstRequest;
  lo.limited_status = o.limited_status;
  lo.latency = std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::milli>(o.latency_ms));
  lo.fail_rate = o.fail_rate;
  lo.seed = o.seed;
  lo.grace = std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::milli>(o.grace_ms));
  lo.token_limit = o.token_limit;
  lo.output_token_limit = o.output_token_limit;
  const bool token_given = given.token_limit->count() > 0, output_given = given.output_token_limit->count() > 0;
  if (auto err = token_options_error(token_given, output_given, lo.style); !err.empty()) return fail(std::move(err));
  if (auto err = mock::validate(lo); !err.empty()) return fail(std::move(err));
  return so;
}

// SIGINT and SIGTERM, blocked in this thread: they are taken by sigtimedwait
// (wait_for_stop). Blocked before any server thread exists, so that every
// thread inherits the mask.
sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// Waits for one of `stop_signals`, or for duration_s when above 0; the
// signal taken, or 0 when the time ran out.
int wait_for_stop(const sigset_t& stop_signals, double duration_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration_s);
  int got = 0;
  while (got == 0) {
    auto wait = std::chrono::duration<double>(1.0);
    if (duration_s > 0) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) break;
      wait = std::min<std::chrono::duration<double>>(wait, left);
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    const int s = sigtimedwait(&stop_signals, nullptr, &ts);
    if (s > 0) got = s;
  }
  return got;
}

// --stats-file: what GET /__stats would answer at the end; false when it
// could not be written.
bool write_stats_file(const std::string& path, const nlohmann::ordered_json& stats) {
  std::ofstream f(path, std::ios::out | std::ios::trunc);
  f << stats.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return static_cast<bool>(f);
}

void say_stopped(const mock::MockServer& server, int got) {
  const auto t = server.totals();
  std::cerr << "abide mock-server: stopped"
            << (got == SIGINT    ? " (SIGINT)"
                : got == SIGTERM ? " (SIGTERM)"
                                 : "")
            << "; " << t.requests << " requests: " << t.accepted << " accepted, " << t.limited << " limited, "
            << t.failed << " failed, " << t.premature << " premature\n";
}

int serve(const MockOptions& o, const TokenFlags& given) {
  auto so = server_options(o, given);
  if (!so) {
    std::cerr << "abide: " << so.error() << "\n";
    return kExitUsage;
  }
  const sigset_t stop_signals = block_stop_signals();
  mock::MockServer server(*so);
  if (auto err = server.start(); !err.empty()) {
    std::cerr << "abide: " << err << "\n";
    return kExitRejected;
  }
  const std::string host = o.bind == "localhost" ? "127.0.0.1" : o.bind;
  std::cout << "listening on " << host << ":" << server.port() << std::endl;
  if (!o.quiet)
    std::cerr << "abide mock-server: style " << o.style << ", " << o.limit << " requests per " << o.window_s
              << " s window, " << o.limited_status << " when limited; GET /__stats, POST /__reset\n";

  const int got = wait_for_stop(stop_signals, o.duration_s);
  server.stop();
  if (!o.stats_file.empty() && !write_stats_file(o.stats_file, server.stats())) {
    std::cerr << "abide: cannot write " << o.stats_file << "\n";
    return kExitRejected;
  }
  if (!o.quiet) say_stopped(server, got);
  return kExitOk;
}

const Registration mock_server_cmd{{"mock-server"},
                                   "Serve a simulated rate-limited API on loopback and count premature retries",
                                   [](CLI::App& app) -> Run {
                                     auto o = std::make_shared<MockOptions>();
                                     const TokenFlags given = add_quota_flags(app, *o);
                                     add_server_flags(app, *o);
                                     app.footer(kFooter);
                                     return [o, given] { return serve(*o, given); };
                                   }};

}  // namespace cmd_mock_server
}  // namespace abide::cli
