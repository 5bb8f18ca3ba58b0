// One HTTP exchange over libcurl (see transport.h).
#include "transport.h"

#include "ascii.h"
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
  engine::Machine* machine = nullptr;
  const BodyTarget* body = nullptr;
  const MonotonicClock* mono = nullptr;
  const WallClock* wall = nullptr;
  HeadReader* head = nullptr;
  bool sent = false;        // the request is being written (on_prereq): it may have been applied
  bool reported = false;    // the machine has the final head
  bool wanted = false;      // ... and wants its body
  bool ended = false;       // the machine ended the request during the transfer (its body refused)
  std::size_t dropped = 0;  // bytes of a retried answer's body read and dropped
  bool threw = false;       // a callback failed (out of memory)
};

// The most of a retried answer's body read (and dropped) to keep its
// connection: reconnecting costs less than reading on.
constexpr std::size_t kMaxDroppedBytes = std::size_t{64} << 10;

// Each line of each head (1xx heads and trailers too), one call each. The
// final head goes to the machine at its empty line, before any body byte.
std::size_t header_line(TransferState& st, char* data, std::size_t total) {
  if (st.reported) return total;                                                    // trailers: not part of the head
  if (!st.head->line(std::string_view(data, total), *st.wall, *st.mono)) return 0;  // 0 aborts
  if (!st.head->complete()) return total;
  st.reported = true;
  st.wanted = st.machine->head(st.head->status(), st.head->take_headers(), st.head->received_wall(),
                               st.head->received_mono(), st.head->http_version());
  return total;
}

std::size_t body_bytes(TransferState& st, char* data, std::size_t total) {
  if (st.ended) return 0;
  // An empty call (libcurl makes some) is no body byte: it must not make the
  // head final before a byte or the end does.
  if (total == 0) return 0;
  if (!st.wanted) {
    // A retried answer's body is dropped as it comes, so that its (short)
    // end keeps the connection for the retry; a long one is cut instead.
    st.dropped += total;
    return st.dropped <= kMaxDroppedBytes ? total : 0;
  }
  if (std::string* keep = st.body->keep) {
    if (total > st.body->max_bytes - std::min(keep->size(), st.body->max_bytes)) {
      st.ended = true;
      st.machine->reject_body("response body larger than " + std::to_string(st.body->max_bytes) + " bytes");
      return 0;
    }
    keep->append(data, total);
    return total;
  }
  // Streamed: libcurl's buffer goes on as it is, no copy.
  if (!st.machine->body(std::string_view(data, total))) {
    st.ended = true;
    return 0;
  }
  return total;
}

// No exception may cross libcurl's C callbacks (an allocation that fails):
// it aborts the transfer, which then fails.
template <class Fn>
std::size_t guarded(TransferState& st, Fn fn) noexcept {
  try {
    return fn();
  } catch (...) {
    st.threw = true;
    return 0;
  }
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto& st = *static_cast<TransferState*>(user);
  return guarded(st, [&] { return header_line(st, data, size * n); });
}

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto& st = *static_cast<TransferState*>(user);
  return guarded(st, [&] { return body_bytes(st, data, size * n); });
}

// Called once the connection is ready (TCP, proxy tunnel and TLS handshake
// done, or a connection reused), just before libcurl writes the request: from
// here on the request may have been applied. This counts a failure of the
// very first write as sent, the safe side. (It replaces CURLOPT_VERBOSE and a
// debug callback, which made libcurl format every info line of every
// transfer: about 5% of a batch's instructions.)
int on_prereq(void* user, char*, char*, int, int) {
  static_cast<TransferState*>(user)->sent = true;
  return CURL_PREREQFUNC_OK;
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
  if (body.keep != nullptr) body.keep->clear();
  auto refuse = [&](std::string_view why) {
    machine.refuse(why);
    return End::kReported;
  };
  if (!ok()) return refuse("libcurl could not be initialized");
  if (!valid_token(request.method)) return refuse("invalid method \"" + printable(request.method) + "\"");
  if (has_ctl(request.url)) return refuse("URL contains a control character");

  Slist headers;
  bool ok_list = append(headers, "Expect:");  // no 100-continue round trip
  for (const Header& h : request.headers.lines()) {
    if (!valid_token(h.name)) return refuse("invalid header name \"" + printable(h.name) + "\"");
    if (has_ctl(h.value)) return refuse("header " + h.name + " contains CR, LF or NUL");
    // "Name;" is libcurl's way to send an empty value ("Name:" would remove it).
    ok_list = ok_list && append(headers, h.value.empty() ? h.name + ";" : h.name + ": " + h.value);
  }
  if (!limits.default_fields) {
    // "Name:" removes a field libcurl would add of its own.
    if (request.headers.count("Accept") == 0) ok_list = ok_list && append(headers, "Accept:");
    if (request.headers.count("Content-Type") == 0) ok_list = ok_list && append(headers, "Content-Type:");
  }
  if (request.idempotency_key && request.headers.count("Idempotency-Key") == 0) {
    if (has_ctl(*request.idempotency_key) || request.idempotency_key->empty()) return refuse("invalid idempotency key");
    ok_list = ok_list && append(headers, "Idempotency-Key: " + *request.idempotency_key);
  }
  if (!ok_list) return refuse("out of memory");

  CURL* e = easy_of(easy_);
  CURLM* m = multi_of(multi_);
  curl_easy_reset(e);  // keeps the connection and DNS caches

  HeadReader head(limits.max_header_bytes, /*keep_raw=*/false);
  TransferState st;
  st.machine = &machine;
  st.body = &body;
  st.head = &head;
  st.mono = &mono;
  st.wall = &wall;
  char errbuf[CURL_ERROR_SIZE] = {};
  const std::string user_agent(limits.user_agent);

  bool set = true;
  auto opt = [&](CURLoption o, auto v) { set = set && curl_easy_setopt(e, o, v) == CURLE_OK; };
  // The URL parsed once per request, not once more per attempt (libcurl's
  // parse is about 4% of a batch's instructions).
  if (url != nullptr && url->handle() != nullptr) opt(CURLOPT_CURLU, static_cast<CURLU*>(url->handle()));
  else opt(CURLOPT_URL, request.url.c_str());
  opt(CURLOPT_NOSIGNAL, 1L);
  opt(CURLOPT_PROTOCOLS_STR, "http,https");
  opt(CURLOPT_FOLLOWLOCATION, 0L);
  // A proxy's answer to CONNECT is not the server's: the header callback sees
  // only the server's heads, so a complete final head is the answer.
  opt(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  opt(CURLOPT_ERRORBUFFER, errbuf);
  if (!user_agent.empty()) opt(CURLOPT_USERAGENT, user_agent.c_str());
  opt(CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, to_ms(limits.connect_timeout)));
  opt(CURLOPT_TIMEOUT_MS, to_ms(limits.timeout));
  if (limits.read_timeout > Duration::zero()) {
    // A stalled server: less than a byte a second, either way, for that long.
    opt(CURLOPT_LOW_SPEED_LIMIT, 1L);
    opt(CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(std::chrono::ceil<std::chrono::seconds>(
                                                 std::min<Duration>(limits.read_timeout, std::chrono::hours{24}))
                                                 .count())));
  }
  opt(CURLOPT_SSL_VERIFYPEER, limits.verify_tls ? 1L : 0L);
  opt(CURLOPT_SSL_VERIFYHOST, limits.verify_tls ? 2L : 0L);
  opt(CURLOPT_HEADERFUNCTION, &on_header);
  opt(CURLOPT_HEADERDATA, static_cast<void*>(&st));
  opt(CURLOPT_WRITEFUNCTION, &on_body);
  opt(CURLOPT_WRITEDATA, static_cast<void*>(&st));
  opt(CURLOPT_PREREQFUNCTION, &on_prereq);
  opt(CURLOPT_PREREQDATA, static_cast<void*>(&st));
  // A stop ends the transfer through run_transfer (its poll is woken), never
  // from libcurl's progress callback: that one also runs once the last body
  // byte is in, and would turn an answer the caller has whole into a cancel.
  opt(CURLOPT_NOPROGRESS, 1L);
  opt(CURLOPT_HTTPHEADER, headers.get());
  // Empty: no option, so libcurl's own choice (http_proxy, https_proxy and
  // no_proxy from the environment) stands.
  const std::string proxy(limits.proxy);
  if (!proxy.empty()) opt(CURLOPT_PROXY, proxy.c_str());
  // "": every coding this libcurl can decode; the callbacks see decoded bytes.
  if (limits.decompress) opt(CURLOPT_ACCEPT_ENCODING, "");
  switch (limits.http_version) {
    case HttpVersion::kDefault: break;
    case HttpVersion::kHttp1_1: opt(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1)); break;
    case HttpVersion::kHttp2: opt(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS)); break;
  }

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
  if (!set) return refuse("libcurl rejected an option");

  if (stop.stop_requested()) {
    machine.failed("cancelled", false);
    return End::kReported;
  }

  // Run the transfer in this worker's multi handle; a stop wakes the poll.
  if (curl_multi_add_handle(m, e) != CURLM_OK) return refuse("libcurl could not start the transfer");
  const TransferEnd end = run_transfer(m, e, stop, std::nullopt);
  curl_multi_remove_handle(m, e);  // aborts the transfer if it still runs
  const CURLcode code = end.kind == TransferEnd::Kind::kFinished ? end.code : CURLE_FAILED_INIT;

  if (st.threw) {
    if (body.keep != nullptr) body.keep->clear();
    // (Ignored by a machine that has its decision already.)
    machine.failed("out of memory while reading the response", true);
    return End::kReported;
  }
  // The machine decided during the transfer: a retry (however the dropped
  // body ended), or a refused body.
  if (st.ended || (st.reported && !st.wanted)) {
    if (body.keep != nullptr) body.keep->clear();
    return End::kReported;
  }
  if (code == CURLE_OK && end.kind == TransferEnd::Kind::kFinished) {
    if (!st.reported) {
      machine.failed("no response head", true);
      return End::kReported;
    }
    // A kept body reaches the machine whole (it only counts it: no sink).
    if (body.keep != nullptr && !body.keep->empty() && !machine.body(*body.keep)) return End::kReported;
    return End::kComplete;
  }
  if (body.keep != nullptr) body.keep->clear();  // never half a body

  const bool cancelled = end.kind == TransferEnd::Kind::kCancelled || code == CURLE_ABORTED_BY_CALLBACK ||
                         (code != CURLE_OK && stop.stop_requested());
  if (cancelled) {
    // The answer is arriving: the request ends cancelled, whatever reached
    // the sink; else the engine ends it cancelled, sent as it was.
    if (st.reported) machine.cancel(true);
    else machine.failed("cancelled", st.sent);
    return End::kReported;
  }
  const std::string_view detail(errbuf, ::strnlen(errbuf, CURL_ERROR_SIZE));
  if (end.kind == TransferEnd::Kind::kFinished && !st.reported) {
    // The same head would come again: what of it was read is heard, and the
    // request ends here.
    if (auto too_large = head_limit_error(code, head, st.sent, detail, limits.max_header_bytes)) {
      machine.head_too_large(head.status(), head.headers(), wall.now(), mono.now(), *too_large);
      return End::kReported;
    }
    // Nothing went out, and nothing would differ on the next attempt.
    if (!st.sent) {
      if (auto lasting = lasting_error(code, detail)) {
        std::string why = curl_easy_strerror(code);
        if (!detail.empty()) why += ": " + printable(detail, CURL_ERROR_SIZE);
        machine.refuse(why + " (" + std::string(*lasting) + ")");
        return End::kReported;
      }
    }
  }
  std::string error = curl_easy_strerror(code);
  // libcurl's detail may quote what the server sent ("Weird server reply").
  if (!detail.empty()) error += ": " + printable(detail, CURL_ERROR_SIZE);
  // A head whose body then failed: the head's quota is real (the machine has
  // recorded it); the attempt failed like any transfer.
  machine.failed(error, st.reported || st.sent || !certain_before_send(code), code == CURLE_OPERATION_TIMEDOUT);
  return End::kReported;
}

}  // namespace abide::curl_detail
