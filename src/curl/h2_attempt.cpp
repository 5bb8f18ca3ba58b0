// One attempt over the own HTTP/2 client (see h2_attempt.h). What it sends
// and how it reports mirror PlainTransfer's, field for field, so that the
// machine hears the same whichever client carried the request.
#include "h2_attempt.h"

#include <curl/curl.h>

#include <cstdlib>
#include <utility>

#include "ascii.h"
#include "request_rules.h"

namespace abide::curl_detail {
namespace {

constexpr SteadyTime kNever = SteadyTime::max();
// As EasyAttempt: the most of a retried answer's body read and dropped.
constexpr std::size_t kMaxDroppedBytes = std::size_t{64} << 10;

}  // namespace

bool h2_allowed(const TransferLimits& limits) noexcept {
  return limits.proxy.empty() && !limits.decompress && limits.http_version != HttpVersion::kHttp1_1;
}

bool H2Attempt::start(const engine::Request& request, H2Target target, const TransferLimits& limits,
                      const BodyTarget& body, engine::Machine& machine, const MonotonicClock& mono,
                      const WallClock& wall, SteadyTime now) {
  machine_ = &machine;
  body_ = &body;
  mono_ = &mono;
  wall_ = &wall;
  request_ = &request;
  target_ = std::move(target);
  max_header_bytes_ = limits.max_header_bytes;
  if (body.keep != nullptr) body.keep->clear();
  if (!valid_token(request.method)) {
    machine.refuse("invalid method \"" + printable(request.method) + "\"");
    return false;
  }
  if (has_ctl(request.url)) {
    machine.refuse("URL contains a control character");
    return false;
  }
  std::string length;
  std::vector<SentField> sent;
  if (auto why = request_fields(request, limits, length, sent)) {
    machine.refuse(*why);
    return false;
  }
  fields_.clear();
  fields_.reserve(sent.size());
  for (const SentField& f : sent) fields_.push_back({std::string(f.name), std::string(f.value)});
  body_out_ = sends_body(request) ? std::string_view(request.body) : std::string_view{};
  end_by_ = after(now, limits.timeout);
  read_timeout_ = limits.read_timeout > Duration::zero()
                      ? std::chrono::ceil<std::chrono::seconds>(std::min<Duration>(limits.read_timeout, std::chrono::hours{24}))
                      : std::chrono::nanoseconds::zero();
  quiet_by_ = after(now, read_timeout_);
  connect_by_ = now + std::max<std::chrono::nanoseconds>(limits.connect_timeout, std::chrono::milliseconds{1});
  return true;
}

bool H2Attempt::open(h2::Session& session, int fd) {
  session_ = &session;
  fd_ = fd;
  if (pacer_ != nullptr && pacer_->held_until(*key_)) {
    withheld_ = true;
    ended_ = true;
    return false;
  }
  const h2::RequestHead head{request_->method, "https", target_.authority, target_.path, fields_};
  stream_ = session.open(head, body_out_, *this);
  if (stream_ == 0) {
    h2::StreamEnd end;
    end.why = session.error();
    end_ = std::move(end);
    ended_ = true;
    return false;
  }
  return true;
}

void H2Attempt::on_sent() {
  sent_ = true;
  if (read_timeout_ > std::chrono::nanoseconds::zero()) quiet_by_ = std::chrono::steady_clock::now() + read_timeout_;
}

void H2Attempt::on_head(int status, std::span<const h2::Field> fields) {
  if (status < 200 || reported_) return;  // informational heads, as libcurl passes them over
  try {
    HeaderList headers;
    for (const h2::Field& f : fields) headers.add(f.name, f.value);
    reported_ = true;
    wanted_ = machine_->head(status, std::move(headers), wall_->now(), mono_->now(), 20);
  } catch (...) {
    threw_ = true;
    stop_stream();
  }
}

void H2Attempt::on_data(std::string_view data) {
  if (ended_) return;
  if (read_timeout_ > std::chrono::nanoseconds::zero()) quiet_by_ = std::chrono::steady_clock::now() + read_timeout_;
  bool go_on = false;
  try {
    go_on = give_body(data);
  } catch (...) {
    threw_ = true;
  }
  if (!go_on) {
    stop_stream();
    return;
  }
  // The window reopens once the bytes are gone: at once, or at resume().
  if (paused_)
    held_ += data.size();
  else
    session_->consume(stream_, data.size());
}

// As PlainTransfer::give_body. False: the stream stops here.
bool H2Attempt::give_body(std::string_view data) {
  if (data.empty()) return true;
  if (!wanted_) {
    dropped_ += data.size();
    return dropped_ <= kMaxDroppedBytes;
  }
  if (std::string* keep = body_->keep) {
    if (data.size() > body_->max_bytes - std::min(keep->size(), body_->max_bytes)) {
      refused_body_ = true;
      machine_->reject_body("response body larger than " + std::to_string(body_->max_bytes) + " bytes");
      return false;
    }
    keep->append(data);
    return true;
  }
  if (!machine_->body(data)) {
    refused_body_ = true;
    return false;
  }
  return true;
}

void H2Attempt::on_end(const h2::StreamEnd& end) { end_here(end); }

void H2Attempt::end_here(h2::StreamEnd end) {
  if (ended_) return;
  ended_ = true;
  end_ = std::move(end);
  if (ended_list_ != nullptr) ended_list_->push_back(job_);
}

// Ends the stream from this side (from within the session's calls too).
void H2Attempt::stop_stream() {
  if (ended_) return;
  if (session_ != nullptr && stream_ != 0) session_->cancel(stream_);
  h2::StreamEnd end;
  end.sent = sent_;
  end_here(std::move(end));
}

void H2Attempt::stop() {
  if (ended_) return;
  if (session_ != nullptr && stream_ != 0) session_->cancel(stream_);
  ended_ = true;
  end_.sent = sent_;
}

void H2Attempt::resume() {
  paused_ = false;
  if (read_timeout_ > std::chrono::nanoseconds::zero()) quiet_by_ = std::chrono::steady_clock::now() + read_timeout_;
  if (held_ > 0 && !ended_ && session_ != nullptr) session_->consume(stream_, held_);
  held_ = 0;
}

SteadyTime H2Attempt::due() const noexcept {
  if (ended_) return kNever;
  SteadyTime t = std::min(end_by_, paused_ ? kNever : quiet_by_);
  if (!sent_) t = std::min(t, connect_by_);
  return t;
}

bool H2Attempt::on_time(SteadyTime now) {
  if (ended_) return false;
  if (!sent_ && now >= connect_by_) {
    timed_out_ = "Failed to connect to " + target_.shown + ": Connection timed out";
  } else if (now >= end_by_) {
    timed_out_ = "Operation timed out";
  } else if (!paused_ && now >= quiet_by_) {
    timed_out_ = "Operation too slow. Less than 1 bytes/sec transferred the last " +
                 std::to_string(std::chrono::duration_cast<std::chrono::seconds>(read_timeout_).count()) + " seconds";
  } else {
    return false;
  }
  stop_stream();
  return true;
}

Transport::End H2Attempt::end(bool stopped) {
  engine::Machine& machine = *machine_;
  if (auto settled = settle(machine, *body_,
                            {.withheld = withheld_,
                             .threw = threw_,
                             .decided = refused_body_ || (reported_ && !wanted_),
                             .complete = end_.complete && timed_out_.empty() && !stopped,
                             .stopped = stopped,
                             .reported = reported_,
                             .sent = end_.sent}))
    return *settled;
  if (!reported_ && end_.head_overflow) {
    HeaderList read;
    for (const h2::Field& f : end_.fields) read.add(f.name, f.value);
    machine.head_too_large(end_.status, std::move(read), wall_->now(), mono_->now(),
                           "response head is larger than " + std::to_string(max_header_bytes_) + " bytes");
    return Transport::End::kReported;
  }
  if (!timed_out_.empty()) {
    machine.failed(curl_error(CURLE_OPERATION_TIMEDOUT, timed_out_), end_.sent, true);
    return Transport::End::kReported;
  }
  using Failure = h2::Channel::Failure;
  switch (failure_) {
    case Failure::kVerify:
      // The same certificate would come again: as libcurl's lasting errors.
      machine.refuse(curl_error(CURLE_PEER_FAILED_VERIFICATION, end_.why) +
                     " (the server's certificate is not accepted)");
      return Transport::End::kReported;
    case Failure::kConnect:
      machine.failed(curl_error(CURLE_COULDNT_CONNECT,
                                "Failed to connect to " + target_.shown + ": " +
                                    (end_.why.starts_with("connect: ") ? end_.why.substr(9) : end_.why)),
                     false);
      return Transport::End::kReported;
    case Failure::kTls:
    case Failure::kNoHttp2:
      machine.failed(curl_error(CURLE_SSL_CONNECT_ERROR, end_.why), false);
      return Transport::End::kReported;
    case Failure::kIo:
      machine.failed(curl_error(end_.sent ? CURLE_RECV_ERROR : CURLE_SEND_ERROR, end_.why), end_.sent);
      return Transport::End::kReported;
    case Failure::kProtocol:
      machine.failed(curl_error(CURLE_HTTP2, end_.why), end_.sent);
      return Transport::End::kReported;
    case Failure::kNone:
      break;
  }
  // The stream alone failed (reset, refused), or the connection ended with it.
  machine.failed(curl_error(CURLE_HTTP2_STREAM, end_.why), end_.sent);
  return Transport::End::kReported;
}

}  // namespace abide::curl_detail
