// The engine over a caller's own easy handle (see own_handle.h).
#include "own_handle.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

namespace abide::curl_detail {
namespace {

using Fn = HandleCallbacks::Fn;

// libcurl's own default write callback writes to a FILE* with fwrite.
std::size_t write_file(char* data, std::size_t size, std::size_t n, void* file) {
  return std::fwrite(data, size, n, static_cast<std::FILE*>(file));
}

// The function libcurl would call for the body with these options.
Fn body_function(const HandleCallbacks& c) { return c.write != nullptr ? c.write : &write_file; }

bool has_body_callback(const HandleCallbacks& c) { return c.write != nullptr || c.write_data != nullptr; }

// Headers go to the header callback, or (libcurl's rule) to the write
// callback when only CURLOPT_HEADERDATA is set; nowhere when neither is.
bool has_header_callback(const HandleCallbacks& c) { return c.header != nullptr || c.header_data != nullptr; }
Fn header_function(const HandleCallbacks& c) { return c.header != nullptr ? c.header : body_function(c); }

}  // namespace

HandleTransport::HandleTransport(CURL* easy, CURLM* multi, const HandleCallbacks& callbacks, std::size_t max_body_bytes,
                                 std::size_t max_header_bytes, TransferSlots& slots, const MonotonicClock& mono,
                                 const WallClock& wall)
    : easy_(easy),
      multi_(multi),
      callbacks_(callbacks),
      max_body_bytes_(max_body_bytes),
      max_header_bytes_(max_header_bytes),
      slots_(slots),
      mono_(mono),
      wall_(wall) {}

HandleTransport::~HandleTransport() {
  // libcurl cannot report an option's value: the caller said what they were.
  // Both null means libcurl's defaults (the body to stdout, headers nowhere).
  curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, callbacks_.write);
  curl_easy_setopt(easy_, CURLOPT_WRITEDATA, has_body_callback(callbacks_) ? callbacks_.write_data : stdout);
  curl_easy_setopt(easy_, CURLOPT_HEADERFUNCTION, callbacks_.header);
  curl_easy_setopt(easy_, CURLOPT_HEADERDATA, callbacks_.header_data);
}

engine::BodySink HandleTransport::sink() {
  if (!has_body_callback(callbacks_)) {
    return [this](std::string_view chunk) {
      if (head_owed_ && !give_head()) return false;
      body_.append(chunk);
      return true;
    };
  }
  return [this, fn = body_function(callbacks_), data = callbacks_.write_data](std::string_view chunk) {
    if (head_owed_ && !give_head()) return false;
    if (chunk.empty()) return true;  // libcurl never calls a write callback with nothing
    // The chunk is libcurl's own (writable) buffer, handed on as libcurl would.
    return fn(const_cast<char*>(chunk.data()), 1, chunk.size(), data) == chunk.size();
  };
}

// The caller's header callback sees the final answer's head, as it would
// without abide (the heads of answers that are retried are not its business).
bool HandleTransport::give_head() {
  head_owed_ = false;
  if (!has_header_callback(callbacks_)) return true;
  const Fn fn = header_function(callbacks_);
  for (const std::string& line : head_.raw_lines()) {
    std::string copy = line;  // libcurl hands out a writable buffer
    if (fn(copy.data(), 1, copy.size(), callbacks_.header_data) != copy.size()) return false;
  }
  return true;
}

bool HandleTransport::report_head() {
  if (reported_) return true;
  if (!head_.complete()) return false;
  reported_ = true;
  wanted_ = machine_->head(head_.status(), head_.headers(), head_.received_wall(), head_.received_mono(),
                           head_.http_version());
  if (!wanted_ || !has_header_callback(callbacks_)) return true;
  if (machine_->reading_body_first()) {
    // A limited answer whose body is read for its wait: its head is the
    // caller's only if the answer ends the request, with its body.
    head_owed_ = true;
    return true;
  }
  if (!give_head()) {
    stopped_ = true;
    machine_->reject_body("header callback refused the response head");
  }
  return true;
}

std::size_t HandleTransport::on_header(char* data, std::size_t size, std::size_t n, void* self) {
  auto& t = *static_cast<HandleTransport*>(self);
  const std::size_t total = size * n;
  if (t.reported_) return total;  // trailers
  return t.head_.line(std::string_view(data, total), t.wall_, t.mono_) ? total : 0;
}

std::size_t HandleTransport::on_body(char* data, std::size_t size, std::size_t n, void* self) {
  auto& t = *static_cast<HandleTransport*>(self);
  const std::size_t total = size * n;
  // Body bytes come after the last head: the one before them is the final one.
  if (!t.report_head()) return 0;
  if (t.stopped_) return 0;
  if (!t.wanted_) {
    // An answer that will be retried: read on (the connection stays usable)
    // up to the body limit, then give up on it.
    t.dropped_ += total;
    return t.dropped_ <= t.max_body_bytes_ ? total : 0;
  }
  if (!has_body_callback(t.callbacks_) && t.body_.size() + total > t.max_body_bytes_) {
    t.stopped_ = true;
    t.machine_->reject_body("response body larger than " + std::to_string(t.max_body_bytes_) + " bytes");
    return 0;
  }
  if (!t.machine_->body(std::string_view(data, total))) {
    t.stopped_ = true;
    return 0;
  }
  return total;
}

// Whether the request went out. libcurl counts the request bytes it has
// written (CURLINFO_REQUEST_SIZE) and notes when a transfer had its connection
// ready to send (CURLINFO_PRETRANSFER_TIME_T); an error that can strike before
// sending is judged by those, any other counts as sent (the safe side).
bool HandleTransport::sent(CURLcode code) const {
  if (!certain_before_send(code)) return true;
  long request_bytes = 0;
  curl_off_t pretransfer_us = 0;
  if (curl_easy_getinfo(easy_, CURLINFO_REQUEST_SIZE, &request_bytes) != CURLE_OK) return true;
  if (curl_easy_getinfo(easy_, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us) != CURLE_OK) return true;
  return request_bytes > 0 || pretransfer_us > 0;
}

void HandleTransport::perform(const engine::Request& request, const engine::Step& step, engine::Machine& machine,
                              std::stop_token stop) {
  if (!refusal_.empty()) {
    machine.refuse(refusal_);
    return;
  }
  if (!take_slot(slots_, request, machine, mono_, stop)) return;
  const TransferSlots::Held held(slots_.limit() != 0 ? &slots_ : nullptr);
  machine_ = &machine;
  head_ = HeadReader(max_header_bytes_);
  reported_ = wanted_ = stopped_ = head_owed_ = false;
  dropped_ = 0;

  bool set = curl_easy_setopt(easy_, CURLOPT_URL, request.url.c_str()) == CURLE_OK;
  set = set && curl_easy_setopt(easy_, CURLOPT_HEADERFUNCTION, &on_header) == CURLE_OK;
  set = set && curl_easy_setopt(easy_, CURLOPT_HEADERDATA, static_cast<void*>(this)) == CURLE_OK;
  set = set && curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, &on_body) == CURLE_OK;
  set = set && curl_easy_setopt(easy_, CURLOPT_WRITEDATA, static_cast<void*>(this)) == CURLE_OK;
  if (!set) {
    machine.refuse("libcurl rejected an option");
    return;
  }
  // The request's deadline ends the transfer; the handle's own timeouts stay.
  std::optional<std::chrono::steady_clock::time_point> until;
  if (step.deadline) {
    const Duration left = std::max(*step.deadline - mono_.now(), Duration{std::chrono::milliseconds{1}});
    until = std::chrono::steady_clock::now() + std::min<Duration>(left, std::chrono::hours{24 * 365});
  }
  if (curl_multi_add_handle(multi_, easy_) != CURLM_OK) {
    machine.refuse("libcurl could not start the transfer (is the handle in use elsewhere?)");
    return;
  }
  const TransferEnd end = run_transfer(multi_, easy_, stop, until);
  curl_multi_remove_handle(multi_, easy_);  // aborts the transfer if it still runs

  // The method libcurl sent: the rules judged the one the request states, so
  // a handle that sends another is never repeated.
  char* method = nullptr;
  long request_bytes = 0;
  if (curl_easy_getinfo(easy_, CURLINFO_REQUEST_SIZE, &request_bytes) == CURLE_OK && request_bytes > 0 &&
      curl_easy_getinfo(easy_, CURLINFO_EFFECTIVE_METHOD, &method) == CURLE_OK && method != nullptr &&
      request.method != method) {
    refusal_ = "the handle sends " + printable(method, 32) + ", not the " + printable(request.method, 32) +
               " the request states";
  }

  const CURLcode code = end.kind == TransferEnd::Kind::kFinished ? end.code : CURLE_FAILED_INIT;
  std::string error;
  switch (end.kind) {
    case TransferEnd::Kind::kCancelled: error = "cancelled"; break;
    case TransferEnd::Kind::kTimedOut: error = "the request's deadline passed during the transfer"; break;
    case TransferEnd::Kind::kBroken: error = "libcurl's transfer loop failed"; break;
    case TransferEnd::Kind::kFinished:
      if (code == CURLE_OK) break;
      error = curl_easy_strerror(code);
      break;
  }
  const bool ok = end.kind == TransferEnd::Kind::kFinished && code == CURLE_OK;
  if (stopped_) return;  // the machine has its outcome already
  // A complete head without body bytes (HEAD, 204, or cut before the body),
  // unless it was a proxy's answer to CONNECT (the server's status is not it).
  long server_status = 0;
  if (!reported_ && head_.complete() && curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &server_status) == CURLE_OK &&
      server_status == head_.status())
    static_cast<void>(report_head());
  if (stopped_) return;
  if (reported_) {
    if (!wanted_) return;  // retried: the machine asks for the next attempt
    if (ok) machine.complete();
    else machine.failed(error, true);
    return;
  }
  if (ok) {
    machine.failed("no response head", true);
    return;
  }
  // Stopped by a stop or the deadline, the counters alone tell.
  bool was_sent = true;
  if (end.kind == TransferEnd::Kind::kFinished) was_sent = sent(code);
  else if (end.kind != TransferEnd::Kind::kBroken) was_sent = sent(CURLE_OPERATION_TIMEDOUT);
  if (end.kind == TransferEnd::Kind::kFinished) {
    // The caller's error buffer (CURLOPT_ERRORBUFFER) is theirs and cannot be
    // read: the code alone judges, so an ambiguous TLS failure stays retryable.
    if (auto too_large = head_limit_error(code, head_, was_sent, {}, max_header_bytes_)) {
      machine.head_too_large(head_.status(), head_.headers(), wall_.now(), mono_.now(), *too_large);
      return;
    }
    if (!was_sent) {
      if (auto lasting = lasting_error(code, {})) {
        machine.refuse(error + " (" + std::string(*lasting) + ")");
        return;
      }
    }
  }
  machine.failed(error, was_sent);
}

}  // namespace abide::curl_detail
