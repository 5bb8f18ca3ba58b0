// One HTTP exchange over libcurl (see transport.h).
#include "transport.h"

#include "ascii.h"
#include "transfer.h"

#include <curl/curl.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace abide::curl_detail {
namespace {

CURL* easy_of(void* p) { return static_cast<CURL*>(p); }
CURLM* multi_of(void* p) { return static_cast<CURLM*>(p); }

// Milliseconds for libcurl options, rounded up so a timeout never fires early,
// clamped to what a long holds.
long to_ms(Duration d) {
  if (d <= Duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  return static_cast<long>(std::min<std::int64_t>(ms, 0x7fffffff));
}

bool has_ctl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

// Everything the callbacks of one transfer share.
struct TransferState {
  Exchange* ex = nullptr;
  const TransferLimits* limits = nullptr;
  const MonotonicClock* mono = nullptr;
  const WallClock* wall = nullptr;
  std::stop_token stop;
  HeadReader* head = nullptr;
  bool body_overflow = false;
};

// Each line of each head (1xx heads and trailers too), one call each.
std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto& st = *static_cast<TransferState*>(user);
  const std::size_t total = size * n;
  return st.head->line(std::string_view(data, total), *st.wall, *st.mono) ? total : 0;  // 0 aborts
}

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto& st = *static_cast<TransferState*>(user);
  const std::size_t total = size * n;
  if (st.ex->body.size() + total > st.limits->max_body_bytes) {
    st.body_overflow = true;
    return 0;
  }
  st.ex->body.append(data, total);
  return total;
}

// Sees what libcurl sends: once request bytes went out, the request may have
// been applied.
int on_debug(CURL*, curl_infotype type, char*, std::size_t, void* user) {
  auto& st = *static_cast<TransferState*>(user);
  // (Not SSL_DATA_OUT: TLS handshake bytes are not the request.)
  if (type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT) st.ex->sent = true;
  return 0;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto& st = *static_cast<TransferState*>(user);
  return st.stop.stop_requested() ? 1 : 0;
}

struct SlistDeleter {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

bool append(Slist& list, const std::string& line) {
  curl_slist* next = curl_slist_append(list.get(), line.c_str());
  if (next == nullptr) return false;
  static_cast<void>(list.release());
  list.reset(next);
  return true;
}

}  // namespace

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool valid_token(std::string_view s) noexcept { return !s.empty() && std::all_of(s.begin(), s.end(), ascii::is_tchar); }

std::optional<std::string> url_error(std::string_view url) {
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

Exchange Transport::perform(const Request& request, const TransferLimits& limits, const MonotonicClock& mono,
                            const WallClock& wall, std::stop_token stop) {
  Exchange ex;
  auto fail_invalid = [&](std::string why) {
    ex.result = Exchange::Result::kInvalid;
    ex.error = std::move(why);
    ex.received_wall = wall.now();
    ex.received_mono = mono.now();
    return ex;
  };
  if (!ok()) return fail_invalid("libcurl could not be initialized");
  if (!valid_token(request.method)) return fail_invalid("invalid method \"" + printable(request.method) + "\"");
  if (has_ctl(request.url)) return fail_invalid("URL contains a control character");

  Slist headers;
  bool ok_list = append(headers, "Expect:");  // no 100-continue round trip
  for (const Header& h : request.headers.lines()) {
    if (!valid_token(h.name)) return fail_invalid("invalid header name \"" + printable(h.name) + "\"");
    if (has_ctl(h.value)) return fail_invalid("header " + h.name + " contains CR, LF or NUL");
    // "Name;" is libcurl's way to send an empty value ("Name:" would remove it).
    ok_list = ok_list && append(headers, h.value.empty() ? h.name + ";" : h.name + ": " + h.value);
  }
  if (request.idempotency_key && request.headers.count("Idempotency-Key") == 0) {
    if (has_ctl(*request.idempotency_key) || request.idempotency_key->empty())
      return fail_invalid("invalid idempotency key");
    ok_list = ok_list && append(headers, "Idempotency-Key: " + *request.idempotency_key);
  }
  if (!ok_list) return fail_invalid("out of memory");

  CURL* e = easy_of(easy_);
  CURLM* m = multi_of(multi_);
  curl_easy_reset(e);  // keeps the connection and DNS caches

  HeadReader head(limits.max_header_bytes);
  TransferState st;
  st.ex = &ex;
  st.head = &head;
  st.limits = &limits;
  st.mono = &mono;
  st.wall = &wall;
  st.stop = stop;
  char errbuf[CURL_ERROR_SIZE] = {};
  const std::string user_agent(limits.user_agent);

  bool set = true;
  auto opt = [&](CURLoption o, auto v) { set = set && curl_easy_setopt(e, o, v) == CURLE_OK; };
  opt(CURLOPT_URL, request.url.c_str());
  opt(CURLOPT_NOSIGNAL, 1L);
  opt(CURLOPT_PROTOCOLS_STR, "http,https");
  opt(CURLOPT_FOLLOWLOCATION, 0L);
  opt(CURLOPT_ERRORBUFFER, errbuf);
  if (!user_agent.empty()) opt(CURLOPT_USERAGENT, user_agent.c_str());
  opt(CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, to_ms(limits.connect_timeout)));
  opt(CURLOPT_TIMEOUT_MS, to_ms(limits.timeout));
  opt(CURLOPT_SSL_VERIFYPEER, limits.verify_tls ? 1L : 0L);
  opt(CURLOPT_SSL_VERIFYHOST, limits.verify_tls ? 2L : 0L);
  opt(CURLOPT_HEADERFUNCTION, &on_header);
  opt(CURLOPT_HEADERDATA, static_cast<void*>(&st));
  opt(CURLOPT_WRITEFUNCTION, &on_body);
  opt(CURLOPT_WRITEDATA, static_cast<void*>(&st));
  opt(CURLOPT_DEBUGFUNCTION, &on_debug);
  opt(CURLOPT_DEBUGDATA, static_cast<void*>(&st));
  opt(CURLOPT_VERBOSE, 1L);  // routes what is sent to on_debug; nothing is printed
  opt(CURLOPT_NOPROGRESS, 0L);
  opt(CURLOPT_XFERINFOFUNCTION, &on_progress);
  opt(CURLOPT_XFERINFODATA, static_cast<void*>(&st));
  opt(CURLOPT_HTTPHEADER, headers.get());

  const std::string& method = request.method;
  if (method == "GET" && request.body.empty()) {
    opt(CURLOPT_HTTPGET, 1L);
  } else if (method == "HEAD") {
    opt(CURLOPT_NOBODY, 1L);
  } else {
    if (!request.body.empty() || method == "POST") {
      opt(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
      opt(CURLOPT_POSTFIELDS, request.body.data());
    }
    if (method != "POST") opt(CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  if (!set) return fail_invalid("libcurl rejected an option");

  if (stop.stop_requested()) {
    ex.result = Exchange::Result::kCancelled;
    ex.error = "cancelled";
    ex.received_wall = wall.now();
    ex.received_mono = mono.now();
    return ex;
  }

  // Run the transfer in this worker's multi handle; a stop wakes the poll.
  if (curl_multi_add_handle(m, e) != CURLM_OK) return fail_invalid("libcurl could not start the transfer");
  const TransferEnd end = run_transfer(m, e, stop, std::nullopt);
  curl_multi_remove_handle(m, e);  // aborts the transfer if it still runs
  const bool cancelled = end.kind == TransferEnd::Kind::kCancelled;
  const CURLcode code = end.kind == TransferEnd::Kind::kFinished ? end.code : CURLE_FAILED_INIT;

  ex.head_complete = head.complete();
  if (ex.head_complete) {
    ex.status = head.status();
    ex.received_wall = head.received_wall();
    ex.received_mono = head.received_mono();
    ex.headers = head.headers();
  } else {
    ex.received_wall = wall.now();
    ex.received_mono = mono.now();
  }

  const auto describe = [&](CURLcode c) {
    std::string s = curl_easy_strerror(c);
    // libcurl's detail may quote what the server sent ("Weird server reply").
    if (errbuf[0] != '\0') s += ": " + printable(errbuf, CURL_ERROR_SIZE);
    return s;
  };
  if (cancelled || code == CURLE_ABORTED_BY_CALLBACK || (code != CURLE_OK && stop.stop_requested())) {
    ex.result = Exchange::Result::kCancelled;
    ex.error = "cancelled";
  } else if (code == CURLE_OK) {
    if (ex.head_complete) {
      ex.result = Exchange::Result::kResponse;
      ex.sent = true;
    } else {
      ex.result = Exchange::Result::kFailed;
      ex.sent = true;
      ex.error = "no response head";
    }
  } else if (st.body_overflow) {
    ex.result = Exchange::Result::kBodyTooLarge;
    ex.sent = true;
    ex.error = "response body larger than " + std::to_string(limits.max_body_bytes) + " bytes";
  } else if (head.overflow()) {
    ex.result = Exchange::Result::kFailed;
    ex.sent = true;
    ex.error = "response head larger than " + std::to_string(limits.max_header_bytes) + " bytes";
  } else {
    ex.result = code == CURLE_OPERATION_TIMEDOUT ? Exchange::Result::kTimedOut : Exchange::Result::kFailed;
    if (!certain_before_send(code)) ex.sent = true;
    ex.error = describe(code);
  }
  if (ex.result != Exchange::Result::kResponse) ex.body.clear();  // never half a body
  return ex;
}

}  // namespace abide::curl_detail
