// One attempt on a libcurl easy handle (see easy_attempt.h).
#include "easy_attempt.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "request_rules.h"

namespace abide::curl_detail {
namespace {

// Milliseconds for libcurl options, rounded up so a timeout never fires early,
// clamped to what a long holds.
long to_ms(Duration d) {
  if (d <= Duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  return static_cast<long>(std::min<std::int64_t>(ms, 0x7fffffff));
}

// The most of a retried answer's body read (and dropped) to keep its
// connection: reconnecting costs less than reading on.
constexpr std::size_t kMaxDroppedBytes = std::size_t{64} << 10;

// libcurl's own bounds for CURLOPT_BUFFERSIZE (READBUFFER_MIN and
// CURL_MAX_READ_SIZE), so the size asked is the size used.
constexpr std::size_t kMinReceiveBuffer = 1024;
constexpr std::size_t kMaxReceiveBuffer = std::size_t{512} << 10;

// Sets the receive buffer of `e`, just reset, to `bytes`. libcurl 7.88 frees
// a transfer's buffer when it is done, except when the transfer ends while
// others share its HTTP/2 connection: then the buffer outlives the transfer
// and curl_easy_reset, which puts the size back to the default, and libcurl
// refuses a new size while a buffer is there. That handle would read its
// default size into a buffer of `bytes`: it is replaced by a new one (the
// connections are the multi handle's, not the easy handle's).
bool sized_receive_buffer(CURL*& e, std::size_t bytes) {
  const long size = static_cast<long>(std::clamp(bytes, kMinReceiveBuffer, kMaxReceiveBuffer));
  if (size == CURL_MAX_WRITE_SIZE) return true;  // libcurl's default, which the reset set
  if (curl_easy_setopt(e, CURLOPT_BUFFERSIZE, size) == CURLE_OK) return true;
  CURL* fresh = curl_easy_init();
  if (fresh == nullptr) return false;
  curl_easy_cleanup(e);
  e = fresh;
  return curl_easy_setopt(e, CURLOPT_BUFFERSIZE, size) == CURLE_OK;
}

template <class List>
bool append(List& list, const std::string& line) {
  curl_slist* next = curl_slist_append(list.get(), line.c_str());
  if (next == nullptr) return false;
  static_cast<void>(list.release());
  list.reset(next);
  return true;
}

// The request's method, and its body when it has one.
bool set_method(CURL* e, const engine::Request& request) {
  bool set = true;
  auto opt = [&](CURLoption o, auto v) { set = set && curl_easy_setopt(e, o, v) == CURLE_OK; };
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
  return set;
}

}  // namespace

// Each line of each head (1xx heads and trailers too), one call each. The
// final head goes to the machine at its empty line, before any body byte.
std::size_t EasyAttempt::header_line(char* data, std::size_t total) {
  if (reported_) return total;                                               // trailers: not part of the head
  if (!head_.line(std::string_view(data, total), *wall_, *mono_)) return 0;  // 0 aborts
  if (!head_.complete()) return total;
  reported_ = true;
  wanted_ = machine_->head(head_.status(), head_.take_headers(), head_.received_wall(), head_.received_mono(),
                           head_.http_version());
  return total;
}

std::size_t EasyAttempt::body_bytes(char* data, std::size_t total) {
  if (ended_) return 0;
  // An empty call (libcurl makes some) is no body byte: it must not make the
  // head final before a byte or the end does.
  if (total == 0) return 0;
  if (!wanted_) {
    // A retried answer's body is dropped as it comes, so that its (short)
    // end keeps the connection for the retry; a long one is cut instead.
    dropped_ += total;
    return dropped_ <= kMaxDroppedBytes ? total : 0;
  }
  if (std::string* keep = body_->keep) {
    if (total > body_->max_bytes - std::min(keep->size(), body_->max_bytes)) {
      ended_ = true;
      machine_->reject_body("response body larger than " + std::to_string(body_->max_bytes) + " bytes");
      return 0;
    }
    keep->append(data, total);
    return total;
  }
  // Streamed: libcurl's buffer goes on as it is, no copy.
  if (!machine_->body(std::string_view(data, total))) {
    ended_ = true;
    return 0;
  }
  return total;
}

// No exception may cross libcurl's C callbacks (an allocation that fails):
// it aborts the transfer, which then fails.
template <class Fn>
std::size_t EasyAttempt::guarded(Fn fn) noexcept {
  try {
    return fn();
  } catch (...) {
    threw_ = true;
    return 0;
  }
}

std::size_t EasyAttempt::on_header(char* data, std::size_t size, std::size_t n, void* self) {
  auto& a = *static_cast<EasyAttempt*>(self);
  return a.guarded([&] { return a.header_line(data, size * n); });
}

std::size_t EasyAttempt::on_body(char* data, std::size_t size, std::size_t n, void* self) {
  auto& a = *static_cast<EasyAttempt*>(self);
  return a.guarded([&] { return a.body_bytes(data, size * n); });
}

// Called once the connection is ready (TCP, proxy tunnel and TLS handshake
// done, or a connection reused), just before libcurl writes the request: from
// here on the request may have been applied. This counts a failure of the
// very first write as sent, the safe side. (It replaces CURLOPT_VERBOSE and a
// debug callback, which made libcurl format every info line of every
// transfer: about 5% of a batch's instructions.)
int EasyAttempt::on_prereq(void* self, char*, char*, int, int) {
  auto& a = *static_cast<EasyAttempt*>(self);
  if (a.pacer_ != nullptr && a.pacer_->held_until(*a.key_)) {
    a.withheld_ = true;  // nothing written: the abort below cannot have sent it
    return CURL_PREREQFUNC_ABORT;
  }
  a.sent_ = true;
  return CURL_PREREQFUNC_OK;
}

// The request's header lines as libcurl sends them, in headers_; why the
// request cannot be sent, or nullopt.
std::optional<std::string> EasyAttempt::header_list(const engine::Request& request, const TransferLimits& limits) {
  bool ok_list = append(headers_, "Expect:");  // no 100-continue round trip
  for (const Header& h : request.headers.lines()) {
    if (!valid_token(h.name)) return "invalid header name \"" + printable(h.name) + "\"";
    if (has_ctl(h.value)) return "header " + h.name + " contains CR, LF or NUL";
    // "Name;" is libcurl's way to send an empty value ("Name:" would remove it).
    ok_list = ok_list && append(headers_, h.value.empty() ? h.name + ";" : h.name + ": " + h.value);
  }
  if (!limits.default_fields) {
    // "Name:" removes a field libcurl would add of its own.
    if (request.headers.count("Accept") == 0) ok_list = ok_list && append(headers_, "Accept:");
    if (request.headers.count("Content-Type") == 0) ok_list = ok_list && append(headers_, "Content-Type:");
  }
  if (request.idempotency_key && request.headers.count("Idempotency-Key") == 0) {
    if (has_ctl(*request.idempotency_key) || request.idempotency_key->empty()) return std::string("invalid idempotency key");
    ok_list = ok_list && append(headers_, "Idempotency-Key: " + *request.idempotency_key);
  }
  if (!ok_list) return std::string("out of memory");
  return std::nullopt;
}

// Every option of the transfer but its method; false when libcurl rejected one
// (those after it are not set).
bool EasyAttempt::set_options(CURL* e, const engine::Request& request, const TransferLimits& limits,
                              const ParsedUrl* url) {
  user_agent_.assign(limits.user_agent);
  proxy_.assign(limits.proxy);
  ca_file_.assign(limits.ca_file);
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
  opt(CURLOPT_ERRORBUFFER, errbuf_);
  if (!user_agent_.empty()) opt(CURLOPT_USERAGENT, user_agent_.c_str());
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
  if (!ca_file_.empty()) opt(CURLOPT_CAINFO, ca_file_.c_str());
  opt(CURLOPT_HEADERFUNCTION, &on_header);
  opt(CURLOPT_HEADERDATA, static_cast<void*>(this));
  opt(CURLOPT_WRITEFUNCTION, &on_body);
  opt(CURLOPT_WRITEDATA, static_cast<void*>(this));
  opt(CURLOPT_PREREQFUNCTION, &on_prereq);
  opt(CURLOPT_PREREQDATA, static_cast<void*>(this));
  // A stop ends the transfer through whoever runs it (its poll is woken, or
  // the handle is removed), never from libcurl's progress callback: that one
  // also runs once the last body byte is in, and would turn an answer the
  // caller has whole into a cancel.
  opt(CURLOPT_NOPROGRESS, 1L);
  opt(CURLOPT_HTTPHEADER, headers_.get());
  // Empty: no option, so libcurl's own choice (http_proxy, https_proxy and
  // no_proxy from the environment) stands.
  if (!proxy_.empty()) opt(CURLOPT_PROXY, proxy_.c_str());
  // "": every coding this libcurl can decode; the callbacks see decoded bytes.
  if (limits.decompress) opt(CURLOPT_ACCEPT_ENCODING, "");
  switch (limits.http_version) {
    case HttpVersion::kDefault: break;
    case HttpVersion::kHttp1_1: opt(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1)); break;
    case HttpVersion::kHttp2: opt(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS)); break;
  }
  return set;
}

bool EasyAttempt::start(CURL*& easy, const engine::Request& request, const TransferLimits& limits,
                        const BodyTarget& body, engine::Machine& machine, const MonotonicClock& mono,
                        const WallClock& wall, const ParsedUrl* url) {
  machine_ = &machine;
  body_ = &body;
  mono_ = &mono;
  wall_ = &wall;
  max_header_bytes_ = limits.max_header_bytes;
  head_ = HeadReader(limits.max_header_bytes, /*keep_raw=*/false);
  headers_.reset();
  errbuf_[0] = '\0';
  sent_ = reported_ = wanted_ = ended_ = threw_ = withheld_ = false;
  pacer_ = nullptr;
  key_ = nullptr;
  dropped_ = 0;
  if (body.keep != nullptr) body.keep->clear();
  const auto refuse = [&](std::string_view why) {
    machine.refuse(why);
    return false;
  };
  if (easy == nullptr) return refuse("libcurl could not be initialized");
  if (!valid_token(request.method)) return refuse("invalid method \"" + printable(request.method) + "\"");
  if (has_ctl(request.url)) return refuse("URL contains a control character");

  if (auto why = header_list(request, limits)) return refuse(*why);

  curl_easy_reset(easy);  // keeps the connection and DNS caches
  if (limits.receive_buffer_bytes != 0 && !sized_receive_buffer(easy, limits.receive_buffer_bytes)) {
    return refuse("libcurl could not create a handle");
  }
  if (!set_options(easy, request, limits, url) || !set_method(easy, request)) {
    return refuse("libcurl rejected an option");
  }
  return true;
}

Transport::End EasyAttempt::end(const TransferEnd& end, bool stopped) {
  engine::Machine& machine = *machine_;
  const CURLcode code = end.kind == TransferEnd::Kind::kFinished ? end.code : CURLE_FAILED_INIT;
  // A decision taken during the transfer: a retry (however the dropped body
  // ended), or a refused body. A stop while the answer arrives ends the
  // request cancelled, whatever reached the sink; before, the engine ends it
  // cancelled, sent as it was.
  const bool cancelled = end.kind == TransferEnd::Kind::kCancelled || code == CURLE_ABORTED_BY_CALLBACK ||
                         (code != CURLE_OK && stopped);
  if (auto settled = settle(machine, *body_,
                            {.withheld = withheld_,
                             .threw = threw_,
                             .decided = decided(),
                             .complete = code == CURLE_OK && end.kind == TransferEnd::Kind::kFinished,
                             .stopped = cancelled,
                             .reported = reported_,
                             .sent = sent_}))
    return *settled;
  const std::string_view detail(errbuf_, ::strnlen(errbuf_, CURL_ERROR_SIZE));
  if (end.kind == TransferEnd::Kind::kFinished && !reported_) {
    // The same head would come again: what of it was read is heard, and the
    // request ends here.
    if (auto too_large = head_limit_error(code, head_, sent_, detail, max_header_bytes_)) {
      machine.head_too_large(head_.status(), head_.headers(), wall_->now(), mono_->now(), *too_large);
      return Transport::End::kReported;
    }
    // Nothing went out, and nothing would differ on the next attempt.
    if (!sent_) {
      if (auto lasting = lasting_error(code, detail)) {
        machine.refuse(curl_error(code, detail) + " (" + std::string(*lasting) + ")");
        return Transport::End::kReported;
      }
    }
  }
  // (libcurl's detail may quote what the server sent: "Weird server reply".)
  // A head whose body then failed: the head's quota is real (the machine has
  // recorded it); the attempt failed like any transfer.
  machine.failed(curl_error(code, detail), reported_ || sent_ || !certain_before_send(code), code == CURLE_OPERATION_TIMEDOUT);
  return Transport::End::kReported;
}

}  // namespace abide::curl_detail
