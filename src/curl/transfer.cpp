// Heads and transfers over libcurl (see transfer.h).
#include "transfer.h"

#include <algorithm>
#include <optional>

#include "ascii.h"
#include "decimal.h"
#include "transport.h"

namespace abide::curl_detail {
namespace {

using ascii::is_ows;
using ascii::trim_ows;

// The status of "HTTP/x yyy ...", or 0.
int status_of(std::string_view line) {
  const auto sp = line.find(' ');
  if (sp == std::string_view::npos || line.size() < sp + 4) return 0;
  const auto code = detail::read_decimal<int, 999, 3>(line.substr(sp + 1));
  return code.digits == 3 ? code.value : 0;
}

// The version of "HTTP/x yyy ...": 10, 11, 20 or 30, as curl's
// CURLINFO_HTTP_VERSION numbers them (libcurl writes "HTTP/2" and "HTTP/3"
// for its own status lines), or 0.
int version_of(std::string_view line) {
  // `line` starts with "HTTP/": a space is at 5 or later (npos - 5 still reaches the end).
  const std::string_view v = line.substr(5, line.find(' ') - 5);
  if (v == "1.1") return 11;
  if (v == "2" || v == "2.0") return 20;
  if (v == "1.0") return 10;
  if (v == "3" || v == "3.0") return 30;
  return 0;
}

}  // namespace

bool HeadReader::line(std::string_view raw, const WallClock& wall, const MonotonicClock& mono) {
  bytes_ += raw.size();
  if (bytes_ > max_bytes_) {
    overflow_ = true;
    return false;
  }
  std::string_view line = raw;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {  // a new head (after 1xx, CONNECT or a redirect): start over
    lines_.clear();
    raw_.clear();
    complete_ = false;
    status_ = status_of(line);
    http_version_ = version_of(line);
    if (keep_raw_) raw_.emplace_back(raw);
    return true;
  }
  if (complete_) return true;  // trailers: not part of the head
  if (keep_raw_) raw_.emplace_back(raw);
  if (line.empty()) {  // the end of a head
    if (status_ >= 200) {
      complete_ = true;
      received_wall_ = wall.now();
      received_mono_ = mono.now();
    }
    return true;
  }
  if (is_ows(line.front())) {  // obsolete line folding: continues the previous value
    if (!lines_.empty()) {
      lines_.back().value += ' ';
      lines_.back().value += trim_ows(line);
    }
    return true;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || !valid_token(line.substr(0, colon))) return true;  // skipped
  lines_.push_back({std::string(line.substr(0, colon)), std::string(trim_ows(line.substr(colon + 1)))});
  return true;
}

HeaderList HeadReader::headers() const {
  HeaderList out;
  out.reserve(lines_.size());
  for (const Header& h : lines_) out.add(h.name, h.value);
  return out;
}

HeaderList HeadReader::take_headers() {
  // What HeaderList::add() does to each value, done in place: OWS trimmed
  // (a folded value may start with the SP that joined it), then CR, LF and
  // NUL inside become SP.
  for (Header& h : lines_) {
    const std::string_view trimmed = trim_ows(h.value);
    if (trimmed.size() != h.value.size()) h.value = std::string(trimmed);
    for (char& c : h.value) {
      if (c == '\r' || c == '\n' || c == '\0') c = ' ';
    }
  }
  HeaderList out(std::move(lines_));
  lines_.clear();  // (a moved-from vector is valid but unspecified)
  return out;
}

TransferEnd run_transfer(CURLM* multi, CURL* easy, std::stop_token stop,
                         std::optional<std::chrono::steady_clock::time_point> until) {
  TransferEnd end;
  std::stop_callback wake(stop, [multi] { curl_multi_wakeup(multi); });
  for (;;) {
    int running = 0;
    if (curl_multi_perform(multi, &running) != CURLM_OK) return end;
    int left = 0;
    bool finished = false;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
        end.code = msg->data.result;
        finished = true;
      }
    }
    if (finished) {
      end.kind = TransferEnd::Kind::kFinished;
      return end;
    }
    if (running == 0) return end;
    if (stop.stop_requested()) {
      end.kind = TransferEnd::Kind::kCancelled;
      return end;
    }
    int timeout_ms = 1000;
    if (until) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= *until) {
        end.kind = TransferEnd::Kind::kTimedOut;
        return end;
      }
      // Rounded up: the transfer is never cut before its time.
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*until - now).count();
      timeout_ms = static_cast<int>(std::min<std::int64_t>(ms, timeout_ms));
    }
    if (curl_multi_poll(multi, nullptr, 0, timeout_ms, nullptr) != CURLM_OK) return end;
  }
}

bool certain_before_send(CURLcode c) noexcept {
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
    case CURLE_OUT_OF_MEMORY: return true;
    default: return false;
  }
}

std::optional<std::string> head_limit_error(CURLcode code, const HeadReader& head, bool sent, std::string_view detail,
                                            std::size_t max_header_bytes) {
  if (head.complete()) return std::nullopt;
  if (head.overflow()) return "response head is larger than " + std::to_string(max_header_bytes) + " bytes";
  // libcurl says no more than "Out of memory" when one line outgrows its
  // buffer; once the request is out, that is what it means.
  if (code == CURLE_OUT_OF_MEMORY && sent)
    return "response head has a line longer than libcurl's " + std::to_string(kCurlMaxHeaderLine >> 10) + " KiB limit";
  if (code == CURLE_RECV_ERROR &&
      (detail.starts_with("Too large response headers") || head.bytes() > kCurlMaxHeadBytes)) {
    std::string error = "response head is larger than libcurl's limit";
    if (!detail.empty()) error += " (" + printable(detail, 120) + ")";
    return error;
  }
  return std::nullopt;
}

namespace {

// `s` holds `word`, ignoring ASCII case.
bool contains_nocase(std::string_view s, std::string_view word) noexcept {
  if (word.size() > s.size()) return false;
  for (std::size_t i = 0; i + word.size() <= s.size(); ++i) {
    bool same = true;
    for (std::size_t j = 0; j < word.size() && same; ++j) same = ascii::to_lower(s[i + j]) == ascii::to_lower(word[j]);
    if (same) return true;
  }
  return false;
}

// What OpenSSL (and the other TLS libraries) say when the two ends share no
// protocol version or cipher, or a certificate is refused: the handshake got
// an answer, and it would be the same again. A handshake cut short (reset,
// end of file, SSL_ERROR_SYSCALL) is not among them: an overloaded server
// does that.
constexpr std::string_view kLastingTlsFailures[] = {
    "alert protocol version",  "unsupported protocol", "no protocols available", "wrong version number",
    "version too low",         "handshake failure",    "no shared cipher",       "no ciphers available",
    "insufficient security",   "certificate required", "bad certificate",        "certificate unknown",
    "unsupported certificate", "certificate revoked",  "certificate expired",    "unknown ca",
};

}  // namespace

std::optional<std::string_view> lasting_error(CURLcode code, std::string_view detail) noexcept {
  switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL: return "libcurl does not speak this URL's scheme";
    case CURLE_URL_MALFORMAT: return "libcurl cannot parse the URL";
    case CURLE_NOT_BUILT_IN: return "this libcurl was built without a feature the request needs";
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_UNKNOWN_OPTION: return "libcurl refused an option";
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED: return "the TLS engine cannot be used";
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CLIENTCERT: return "the client certificate cannot be used";
    case CURLE_SSL_CIPHER: return "the TLS cipher setting cannot be used";
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CRL_BADFILE: return "the CA or CRL file cannot be read";
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH: return "the server's certificate is not accepted";
    case CURLE_SSL_CONNECT_ERROR:
      for (std::string_view word : kLastingTlsFailures)
        if (contains_nocase(detail, word))
          return "the server and client share no TLS version or cipher, or refuse a certificate";
      return std::nullopt;
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      // A proxy URL libcurl cannot read comes out as a lookup or connect error.
      if (detail.starts_with("Unsupported proxy")) return "libcurl cannot use the proxy URL";
      return std::nullopt;
    default: return std::nullopt;
  }
}

TransferSlots::Result TransferSlots::acquire(std::stop_token stop,
                                             std::optional<std::chrono::steady_clock::time_point> until) {
  if (limit_ == 0) return Result::kAcquired;
  detail::UniqueLock lock(mu_);
  if (queue_.empty() && active_ < limit_) {
    ++active_;
    return Result::kAcquired;
  }
  if (stop.stop_requested()) return Result::kCancelled;
  Waiter w;
  const auto place = queue_.insert(queue_.end(), &w);
  const auto granted = [&w] { return w.granted; };
  if (until) w.cv.wait_until(lock.native(), stop, *until, granted);
  else w.cv.wait(lock.native(), stop, granted);
  if (w.granted) {
    if (!stop.stop_requested()) return Result::kAcquired;
    // Handed over just as the stop came: the next in line has it instead.
    lock.unlock();
    release();
    return Result::kCancelled;
  }
  queue_.erase(place);
  return stop.stop_requested() ? Result::kCancelled : Result::kTimedOut;
}

void TransferSlots::release() noexcept {
  if (limit_ == 0) return;
  detail::MutexLock lock(mu_);
  if (!queue_.empty()) {
    // The slot passes straight on (active_ stays): nobody can take it between.
    // Notified under the lock, so the waiter (and its cv) outlives the call.
    Waiter* next = queue_.front();
    queue_.pop_front();
    next->granted = true;
    next->cv.notify_one();
    return;
  }
  if (active_ > 0) --active_;
}

namespace {

// When the request's deadline and send_by leave no more time to wait for a
// transfer slot, on the steady clock (the slots' own), or nullopt: no bound.
std::optional<std::chrono::steady_clock::time_point> slot_wait_bound(const engine::Request& r,
                                                                     const MonotonicClock& mono) {
  std::optional<MonoTime> bound = r.deadline;
  if (r.send_by && (!bound || *r.send_by < *bound)) bound = r.send_by;
  if (!bound) return std::nullopt;
  // The injected clock may not be the steady clock: carry the time left over.
  const Duration left = std::clamp<Duration>(saturating_sub(bound->time_since_epoch(), mono.now().time_since_epoch()),
                                             Duration::zero(), std::chrono::hours{24 * 365});
  return std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::steady_clock::duration>(left);
}

}  // namespace

bool take_slot(TransferSlots& slots, const engine::Request& request, engine::Machine& m, const MonotonicClock& mono,
               std::stop_token stop) {
  if (slots.limit() == 0) return true;
  switch (slots.acquire(stop, slot_wait_bound(request, mono))) {
    case TransferSlots::Result::kAcquired: return true;
    case TransferSlots::Result::kCancelled:
      m.failed("cancelled while waiting for a transfer slot", false);
      return false;
    case TransferSlots::Result::kTimedOut:
      m.failed("the deadline passed while waiting for a transfer slot", false);
      return false;
  }
  return false;
}

std::size_t TransferSlots::active() const {
  detail::MutexLock lock(mu_);
  return active_;
}

std::size_t TransferSlots::waiting() const {
  detail::MutexLock lock(mu_);
  return queue_.size();
}

}  // namespace abide::curl_detail
