// One HTTP exchange over libcurl (see transport.h).
#include "transport.h"

#include "ascii.h"
#include "easy_attempt.h"
#include "transfer.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace abide::curl_detail {
namespace {

CURL* easy_of(void* p) { return static_cast<CURL*>(p); }
CURLM* multi_of(void* p) { return static_cast<CURLM*>(p); }

}  // namespace

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool has_ctl(std::string_view s) noexcept {
  return std::any_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

bool valid_token(std::string_view s) noexcept { return !s.empty() && std::all_of(s.begin(), s.end(), ascii::is_tchar); }

ParsedUrl::~ParsedUrl() {
  if (handle_ != nullptr) curl_url_cleanup(static_cast<CURLU*>(handle_));
}

std::optional<std::string> url_error(std::string_view url) {
  ParsedUrl dropped;
  return parse_url(url, dropped);
}

std::optional<std::string> parse_url(std::string_view url, ParsedUrl& out) {
  global_init();
  if (url.empty()) return "empty URL";
  if (has_ctl(url) || url.find(' ') != std::string_view::npos) return "URL contains a space or control character";
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> u(curl_url(), &curl_url_cleanup);
  if (!u) return "out of memory";
  const std::string text(url);
  if (const CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, text.c_str(), 0); rc != CURLUE_OK)
    return std::string(curl_url_strerror(rc));
  char* scheme = nullptr;
  std::string s;
  if (curl_url_get(u.get(), CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK && scheme != nullptr) {
    s = scheme;
    curl_free(scheme);
  }
  for (char& c : s) c = ascii::to_lower(c);
  if (s != "http" && s != "https") return "unsupported scheme \"" + printable(s, 32) + "\" (http and https only)";
  char* host = nullptr;
  const bool has_host = curl_url_get(u.get(), CURLUPART_HOST, &host, 0) == CURLUE_OK && host != nullptr &&
                        *host != '\0';
  curl_free(host);
  if (!has_host) return "URL has no host";
  ParsedUrl parsed;
  parsed.handle_ = u.release();
  out = std::move(parsed);
  return std::nullopt;
}

Transport::Transport() {
  global_init();
  easy_ = curl_easy_init();
  multi_ = curl_multi_init();
}

Transport::~Transport() {
  if (easy_ != nullptr) curl_easy_cleanup(easy_of(easy_));
  if (multi_ != nullptr) curl_multi_cleanup(multi_of(multi_));
}

Transport::End Transport::perform(const Request& request, const TransferLimits& limits, const BodyTarget& body,
                                  engine::Machine& machine, const MonotonicClock& mono, const WallClock& wall,
                                  std::stop_token stop, const ParsedUrl* url) {
  if (!ok()) {
    machine.refuse("libcurl could not be initialized");
    return End::kReported;
  }
  EasyAttempt attempt;
  CURL* e = easy_of(easy_);
  CURLM* m = multi_of(multi_);
  const bool started = attempt.start(e, request, limits, body, machine, mono, wall, url);
  easy_ = e;  // start may have replaced it
  if (!started) return End::kReported;
  if (stop.stop_requested()) {
    machine.failed("cancelled", false);
    return End::kReported;
  }
  // Run the transfer in this worker's multi handle; a stop wakes the poll.
  if (curl_multi_add_handle(m, e) != CURLM_OK) {
    machine.refuse("libcurl could not start the transfer");
    return End::kReported;
  }
  const TransferEnd end = run_transfer(m, e, stop, std::nullopt);
  curl_multi_remove_handle(m, e);  // aborts the transfer if it still runs
  return attempt.end(end, stop.stop_requested());
}

}  // namespace abide::curl_detail
