// One HTTP exchange over libcurl (see transport.h).
#include "transport.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
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

bool is_ows(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && (is_ows(s.back()) || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
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
  std::vector<Header> lines;  // the head being read
  int head_status = 0;
  std::size_t header_bytes = 0;
  bool header_overflow = false;
  bool body_overflow = false;
};

// Status line, header lines and the empty line that ends a head, one call each
// (also for 1xx heads and trailers).
std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto& st = *static_cast<TransferState*>(user);
  const std::size_t total = size * n;
  st.header_bytes += total;
  if (st.header_bytes > st.limits->max_header_bytes) {
    st.header_overflow = true;
    return 0;  // aborts the transfer
  }
  std::string_view line(data, total);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {  // a new head (after 1xx): start over
    st.lines.clear();
    st.head_status = 0;
    st.ex->head_complete = false;
    const auto sp = line.find(' ');
    if (sp != std::string_view::npos && line.size() >= sp + 4) {
      int code = 0;
      bool digits = true;
      for (std::size_t i = sp + 1; i < sp + 4; ++i) {
        if (line[i] < '0' || line[i] > '9') digits = false;
        else code = code * 10 + (line[i] - '0');
      }
      if (digits) st.head_status = code;
    }
    return total;
  }
  if (line.empty()) {  // the end of a head
    if (st.head_status >= 200 && !st.ex->head_complete) {
      st.ex->head_complete = true;
      st.ex->status = st.head_status;
      st.ex->received_wall = st.wall->now();
      st.ex->received_mono = st.mono->now();
    }
    return total;
  }
  if (is_ows(line.front())) {  // obsolete line folding: continues the previous value
    if (!st.lines.empty()) {
      st.lines.back().value += ' ';
      st.lines.back().value += trim(line);
    }
    return total;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || !valid_token(line.substr(0, colon))) return total;  // skipped
  st.lines.push_back({std::string(line.substr(0, colon)), std::string(trim(line.substr(colon + 1)))});
  return total;
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

// Errors that leave no doubt whether the request went out are decided by what
// libcurl reported sending; every other error counts as "sent" (the safe side:
// a non-idempotent request is then reported ambiguous, never repeated).
bool decided_by_debug(CURLcode c) {
  switch (c) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_FAILED_INIT:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_INTERFACE_FAILED:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_PROXY:
    case CURLE_OUT_OF_MEMORY:
      return true;
    default:
      return false;
  }
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

bool valid_token(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0) continue;
    if (std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
  }
  return true;
}

Result<UrlParts, std::string> parse_url(std::string_view url) {
  global_init();
  if (url.empty()) return fail(std::string("empty URL"));
  if (has_ctl(url) || url.find(' ') != std::string_view::npos) return fail(std::string("URL contains a space or control character"));
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> u(curl_url(), &curl_url_cleanup);
  if (!u) return fail(std::string("out of memory"));
  const std::string text(url);
  if (const CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, text.c_str(), 0); rc != CURLUE_OK)
    return fail(std::string(curl_url_strerror(rc)));
  auto part = [&](CURLUPart which) -> std::optional<std::string> {
    char* p = nullptr;
    if (curl_url_get(u.get(), which, &p, 0) != CURLUE_OK || p == nullptr) return std::nullopt;
    std::string s(p);
    curl_free(p);
    return s;
  };
  UrlParts out;
  out.scheme = part(CURLUPART_SCHEME).value_or("");
  for (char& c : out.scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (out.scheme != "http" && out.scheme != "https") return fail("unsupported scheme \"" + out.scheme + "\" (http and https only)");
  auto host = part(CURLUPART_HOST);
  if (!host || host->empty()) return fail(std::string("URL has no host"));
  for (char& c : *host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  out.origin = out.scheme + "://" + *host;
  if (auto port = part(CURLUPART_PORT)) {
    const bool default_port = (out.scheme == "http" && *port == "80") || (out.scheme == "https" && *port == "443");
    if (!default_port) out.origin += ":" + *port;
  }
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  out.host = std::move(*host);
  return out;
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

  TransferState st;
  st.ex = &ex;
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
  CURLcode code = CURLE_OK;
  bool finished = false;
  bool cancelled = false;
  if (curl_multi_add_handle(m, e) != CURLM_OK) return fail_invalid("libcurl could not start the transfer");
  {
    std::stop_callback wake(stop, [m] { curl_multi_wakeup(m); });
    for (;;) {
      int running = 0;
      if (curl_multi_perform(m, &running) != CURLM_OK) break;
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(m, &left)) {
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == e) {
          code = msg->data.result;
          finished = true;
        }
      }
      if (finished || running == 0) break;
      if (stop.stop_requested()) {
        cancelled = true;
        break;
      }
      if (curl_multi_poll(m, nullptr, 0, 1000, nullptr) != CURLM_OK) break;
    }
  }
  curl_multi_remove_handle(m, e);  // aborts the transfer if it still runs

  if (!ex.head_complete) {
    ex.received_wall = wall.now();
    ex.received_mono = mono.now();
  }
  ex.headers.reserve(st.lines.size());
  for (const Header& h : st.lines) ex.headers.add(h.name, h.value);
  if (!finished && !cancelled) code = CURLE_FAILED_INIT;

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
  } else if (st.header_overflow) {
    ex.result = Exchange::Result::kFailed;
    ex.sent = true;
    ex.error = "response head larger than " + std::to_string(limits.max_header_bytes) + " bytes";
  } else {
    ex.result = code == CURLE_OPERATION_TIMEDOUT ? Exchange::Result::kTimedOut : Exchange::Result::kFailed;
    if (!decided_by_debug(code)) ex.sent = true;
    ex.error = describe(code);
  }
  if (ex.result != Exchange::Result::kResponse) ex.body.clear();  // never half a body
  return ex;
}

}  // namespace abide::curl_detail
