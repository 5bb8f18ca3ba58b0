// One attempt over the own HTTP/1.1 client (see plain_transfer.h). What it
// sends and how it reports mirror EasyAttempt's libcurl setup field for
// field, so that a request reads the same to the server and its outcome the
// same to the machine whichever client carried it.
#include "plain_transfer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "ascii.h"
#include "request_rules.h"

namespace abide::curl_detail {
namespace {

constexpr SteadyTime kNever = SteadyTime::max();
// As EasyAttempt: the most of a retried answer's body read and dropped to
// keep its connection.
constexpr std::size_t kMaxDroppedBytes = std::size_t{64} << 10;

bool idempotent(std::string_view method) noexcept {
  for (std::string_view m : {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"}) {
    if (method == m) return true;
  }
  return false;
}

}  // namespace

bool plain_allowed(const TransferLimits& limits) noexcept { return limits.proxy.empty() && !limits.decompress; }

bool PlainTransfer::start(const engine::Request& request, PlainTarget target, const TransferLimits& limits,
                          const BodyTarget& body, engine::Machine& machine, const MonotonicClock& mono,
                          const WallClock& wall, SteadyTime now) {
  machine_ = &machine;
  body_ = &body;
  mono_ = &mono;
  wall_ = &wall;
  request_ = &request;
  target_ = std::move(target);
  pacer_ = nullptr;
  key_ = nullptr;
  max_header_bytes_ = limits.max_header_bytes;
  // Bytes read at a time, as libcurl's receive buffer (its bounds and default).
  read_size_ = limits.receive_buffer_bytes == 0
                   ? std::size_t{16} << 10
                   : std::clamp<std::size_t>(limits.receive_buffer_bytes, std::size_t{1} << 10, std::size_t{512} << 10);
  head_ = HeadReader(limits.max_header_bytes, /*keep_raw=*/false);
  line_.clear();
  framing_.reset();
  chunked_.reset();
  left_ = 0;
  dropped_ = 0;
  written_ = 0;
  fd_ = -1;
  code_ = CURLE_OK;
  detail_.clear();
  head_overflow_ = connecting_ = reused_ = heard_ = sent_ = reported_ = wanted_ = ended_ = done_ = withheld_ = threw_ = paused_ =
      reusable_ = false;
  if (body.keep != nullptr) body.keep->clear();
  const auto refuse = [&](std::string_view why) {
    machine.refuse(why);
    return false;
  };
  if (!valid_token(request.method)) return refuse("invalid method \"" + printable(request.method) + "\"");
  if (has_ctl(request.url)) return refuse("URL contains a control character");

  // The head as libcurl writes it for the options EasyAttempt sets.
  out_.clear();
  out_.append(request.method).append(" ").append(target_.path).append(" HTTP/1.1\r\nHost: ").append(target_.authority);
  out_.append("\r\n");
  std::string length;
  std::vector<SentField> fields;
  if (auto why = request_fields(request, limits, length, fields)) return refuse(*why);
  for (const SentField& f : fields) out_.append(f.name).append(f.value.empty() ? ":" : ": ").append(f.value).append("\r\n");
  out_.append("\r\n");

  end_by_ = after(now, limits.timeout);
  // As libcurl's low-speed limit: less than a byte a second for the whole
  // seconds of read_timeout, rounded up.
  read_timeout_ = limits.read_timeout > Duration::zero()
                      ? std::chrono::ceil<std::chrono::seconds>(std::min<Duration>(limits.read_timeout, std::chrono::hours{24}))
                      : std::chrono::nanoseconds::zero();
  quiet_by_ = after(now, read_timeout_);
  connect_by_ = now + std::max<std::chrono::nanoseconds>(limits.connect_timeout, std::chrono::milliseconds{1});
  return true;
}

PlainTransfer::Want PlainTransfer::attach(int fd, bool reused, int connect_errno, SteadyTime now) {
  fd_ = fd;
  reused_ = reused;
  // A fresh start of the answer (after a stale socket, too).
  written_ = 0;
  stopped_sending_ = false;
  send_error_.clear();
  heard_ = false;
  head_ = HeadReader(max_header_bytes_, /*keep_raw=*/false);
  line_.clear();
  if (reused || connect_errno == 0) {
    connecting_ = false;
    return write_some(now);
  }
  if (connect_errno == EINPROGRESS) {
    connecting_ = true;
    return Want::kWrite;
  }
  return fail(CURLE_COULDNT_CONNECT, "Failed to connect to " + target_.shown + ": " + errno_text(connect_errno));
}

PlainTransfer::Want PlainTransfer::fail(CURLcode code, std::string detail) {
  done_ = true;
  reusable_ = false;
  code_ = code;
  detail_ = std::move(detail);
  return Want::kEnded;
}

PlainTransfer::Want PlainTransfer::finish() {
  done_ = true;
  code_ = CURLE_OK;
  if (written_ < request_bytes()) reusable_ = false;  // the server answered before reading it all
  return Want::kEnded;
}

// A socket kept alive may have been closed by the server just before the
// request went out: before any answer byte, a request that may be repeated
// goes again on a fresh socket, as libcurl does. Any other is not repeated.
PlainTransfer::Want PlainTransfer::stale_or_fail(CURLcode code, std::string detail) {
  if (!heard_ && !send_error_.empty()) {
    code = CURLE_SEND_ERROR;
    detail = send_error_;
  }
  if (reused_ && !heard_ && (idempotent(request_->method) || request_->idempotency_key)) return Want::kStale;
  return fail(code, std::move(detail));
}

// The server hung up before reading the whole request: it may have answered
// first (a 413 or a 401, then closed), and that answer is what the request
// got, as curl reports it. The socket is readable at once (its end or its
// reset); with nothing heard, the send failure is the error (stale_or_fail).
PlainTransfer::Want PlainTransfer::send_failed(int err) {
  stopped_sending_ = true;
  reusable_ = false;
  send_error_ = "Send failure: " + errno_text(err);
  return paused_ ? Want::kNothing : Want::kRead;
}

std::size_t PlainTransfer::request_bytes() const noexcept {
  return out_.size() + (sends_body(*request_) ? request_->body.size() : 0);
}

PlainTransfer::Want PlainTransfer::write_some(SteadyTime now) {
  if (!sent_) {
    if (pacer_ != nullptr && pacer_->held_until(*key_)) {
      withheld_ = true;  // nothing written
      done_ = true;
      return Want::kEnded;
    }
    sent_ = true;
  }
  const std::string_view body = sends_body(*request_) ? std::string_view(request_->body) : std::string_view{};
  const std::size_t total = out_.size() + body.size();
  while (written_ < total) {
    iovec iov[2];
    int n_iov = 0;
    if (written_ < out_.size()) {
      iov[n_iov++] = {out_.data() + written_, out_.size() - written_};
      if (!body.empty()) iov[n_iov++] = {const_cast<char*>(body.data()), body.size()};
    } else {
      const std::size_t at = written_ - out_.size();
      iov[n_iov++] = {const_cast<char*>(body.data()) + at, body.size() - at};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n_iov);
    const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Want::kReadWrite;
      return send_failed(errno);
    }
    written_ += static_cast<std::size_t>(n);
    if (read_timeout_ > std::chrono::nanoseconds::zero()) quiet_by_ = now + read_timeout_;
  }
  return paused_ ? Want::kNothing : Want::kRead;
}

PlainTransfer::Want PlainTransfer::on_ready(std::span<char> scratch, SteadyTime now) {
  if (done_) return Want::kEnded;
  try {
    if (connecting_) {
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err == EINPROGRESS || err == EALREADY) return Want::kWrite;
      if (err != 0) {
        return fail(CURLE_COULDNT_CONNECT, "Failed to connect to " + target_.shown + ": " + errno_text(err));
      }
      connecting_ = false;
    }
    if (sending()) {
      const Want w = write_some(now);
      if (w != Want::kReadWrite) return w;
      // Blocked with the request partly written: the server may have answered
      // already (a 413, a 401) and stopped reading; its answer is read now.
      if (paused_) return Want::kWrite;
      const Want r = read_some(scratch, now);
      if (r != Want::kRead) return r;
      return sending() ? Want::kReadWrite : Want::kRead;
    }
    if (paused_) return Want::kNothing;
    return read_some(scratch, now);
  } catch (...) {
    threw_ = true;
    done_ = true;
    reusable_ = false;
    return Want::kEnded;
  }
}

PlainTransfer::Want PlainTransfer::read_some(std::span<char> scratch, SteadyTime now) {
  scratch = scratch.first(std::min(scratch.size(), read_size_));
  for (;;) {
    const ssize_t n = ::recv(fd_, scratch.data(), scratch.size(), 0);
    if (n > 0) {
      heard_ = true;
      if (read_timeout_ > std::chrono::nanoseconds::zero()) quiet_by_ = now + read_timeout_;
      const Want w = take(std::string_view(scratch.data(), static_cast<std::size_t>(n)));
      // Less than the buffer: the socket is drained (the loop says when more comes).
      if (w != Want::kRead || static_cast<std::size_t>(n) < scratch.size()) return w;
      continue;
    }
    if (n == 0) return at_eof();
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Want::kRead;
    return stale_or_fail(CURLE_RECV_ERROR, "Recv failure: " + errno_text(errno));
  }
}

PlainTransfer::Want PlainTransfer::at_eof() {
  if (!heard_) return stale_or_fail(CURLE_GOT_NOTHING, "");
  if (!reported_) return fail(CURLE_RECV_ERROR, "the connection closed in the answer's head");
  if (framing_ && framing_->kind == http1::ResponseFraming::Kind::kClose) {
    reusable_ = false;
    return finish();
  }
  if (framing_ && framing_->kind == http1::ResponseFraming::Kind::kLength) {
    return fail(CURLE_PARTIAL_FILE, "transfer closed with " + std::to_string(left_) + " bytes remaining to read");
  }
  return fail(CURLE_PARTIAL_FILE, "transfer closed with outstanding read data remaining");
}

PlainTransfer::Want PlainTransfer::take(std::string_view data) {
  if (!reported_) {
    if (!take_head_bytes(data)) return Want::kEnded;
    if (!head_.complete()) return Want::kRead;
    if (!head_done()) return Want::kEnded;
  }
  return take_body(data);
}

// Feeds whole lines of `data` to the head reader until the final head is
// complete; `data` keeps what follows it. False: the exchange failed.
bool PlainTransfer::take_head_bytes(std::string_view& data) {
  while (!data.empty()) {
    const std::size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      // A line not ended yet counts against the head's limit as it grows.
      if (head_.bytes() + line_.size() + data.size() > max_header_bytes_) {
        head_overflow_ = true;
        fail(CURLE_WEIRD_SERVER_REPLY, "");
        return false;
      }
      line_.append(data);
      data = {};
      return true;
    }
    std::string_view line = data.substr(0, nl + 1);
    if (!line_.empty()) {
      line_.append(line);
      line = line_;
    }
    // An answer begins with its status line; no HTTP/0.9 (as libcurl 7.66+).
    if (head_.bytes() == 0 && !line.starts_with("HTTP/1.")) {
      fail(CURLE_WEIRD_SERVER_REPLY, "the answer does not start with an HTTP/1.x status line");
      return false;
    }
    const bool ok = head_.line(line, *wall_, *mono_);
    data.remove_prefix(nl + 1);
    line_.clear();
    if (!ok) {
      head_overflow_ = true;
      fail(CURLE_WEIRD_SERVER_REPLY, "");
      return false;
    }
    if (head_.complete()) return true;
  }
  return true;
}

// The final head is in: the machine hears it, and the body's framing is set.
bool PlainTransfer::head_done() {
  const int version = head_.http_version();
  if (version != 10 && version != 11) {
    fail(CURLE_WEIRD_SERVER_REPLY, "the answer's HTTP version is not 1.0 or 1.1");
    return false;
  }
  HeaderList headers = head_.take_headers();
  framing_ = http1::response_framing(request_->method, head_.status(), version, headers);
  if (!framing_) {
    fail(CURLE_WEIRD_SERVER_REPLY, "Invalid Content-Length: value");
    return false;
  }
  reported_ = true;
  wanted_ = machine_->head(head_.status(), std::move(headers), head_.received_wall(), head_.received_mono(), version);
  reusable_ = framing_->keep_alive;
  if (sending() && head_.status() >= 300) {
    stopped_sending_ = true;  // an error before the request was all read: the rest would be tossed
    reusable_ = false;
  }
  switch (framing_->kind) {
    case http1::ResponseFraming::Kind::kLength: left_ = framing_->length; break;
    case http1::ResponseFraming::Kind::kChunked: chunked_.emplace(std::numeric_limits<std::uint64_t>::max()); break;
    case http1::ResponseFraming::Kind::kNone:
    case http1::ResponseFraming::Kind::kClose: break;
  }
  return true;
}

PlainTransfer::Want PlainTransfer::take_body(std::string_view data) {
  using Kind = http1::ResponseFraming::Kind;
  switch (framing_->kind) {
    case Kind::kNone:
      if (!data.empty()) reusable_ = false;  // bytes no answer framed
      return finish();
    case Kind::kLength: {
      const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(left_, data.size()));
      if (!give_body(data.substr(0, take))) return Want::kEnded;
      left_ -= take;
      if (left_ == 0) {
        if (take < data.size()) reusable_ = false;
        return finish();
      }
      break;
    }
    case Kind::kClose:
      if (!give_body(data)) return Want::kEnded;
      break;
    case Kind::kChunked: {
      std::size_t consumed = 0;
      decoded_.clear();
      const auto status = chunked_->feed(data, consumed, decoded_);
      if (!decoded_.empty() && !give_body(decoded_)) return Want::kEnded;
      if (status == http1::ChunkedDecoder::Status::kError) {
        return fail(CURLE_RECV_ERROR, "invalid chunked encoding: " + chunked_->error().reason);
      }
      if (status == http1::ChunkedDecoder::Status::kDone) {
        if (consumed < data.size()) reusable_ = false;
        return finish();
      }
      break;
    }
  }
  return paused_ ? Want::kNothing : Want::kRead;
}

// One piece of the final answer's body, as EasyAttempt::body_bytes takes it.
// False: the exchange ends here (the machine refused the body, or a retried
// answer's body is too long to drop).
bool PlainTransfer::give_body(std::string_view data) {
  if (data.empty()) return true;
  const auto stop = [&] {
    done_ = true;
    reusable_ = false;
    code_ = CURLE_WRITE_ERROR;
    return false;
  };
  if (ended_) return stop();
  if (!wanted_) {
    dropped_ += data.size();
    return dropped_ <= kMaxDroppedBytes ? true : stop();
  }
  if (std::string* keep = body_->keep) {
    if (data.size() > body_->max_bytes - std::min(keep->size(), body_->max_bytes)) {
      ended_ = true;
      machine_->reject_body("response body larger than " + std::to_string(body_->max_bytes) + " bytes");
      return stop();
    }
    keep->append(data);
    return true;
  }
  if (!machine_->body(data)) {
    ended_ = true;
    return stop();
  }
  return true;
}

SteadyTime PlainTransfer::due() const noexcept {
  SteadyTime t = std::min(end_by_, paused_ ? kNever : quiet_by_);
  if (connecting_) t = std::min(t, connect_by_);
  return t;
}

PlainTransfer::Want PlainTransfer::on_time(SteadyTime now) {
  if (done_) return Want::kEnded;
  if (connecting_ && now >= connect_by_) {
    return fail(CURLE_OPERATION_TIMEDOUT, "Failed to connect to " + target_.shown + ": Connection timed out");
  }
  if (now >= end_by_) return fail(CURLE_OPERATION_TIMEDOUT, "Operation timed out");
  if (!paused_ && now >= quiet_by_) {
    return fail(CURLE_OPERATION_TIMEDOUT, "Operation too slow. Less than 1 bytes/sec transferred the last " +
                                              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(read_timeout_).count()) +
                                              " seconds");
  }
  if (connecting_) return Want::kWrite;
  if (sending()) return paused_ ? Want::kWrite : Want::kReadWrite;
  return paused_ ? Want::kNothing : Want::kRead;
}

PlainTransfer::Want PlainTransfer::resume() noexcept {
  paused_ = false;
  if (done_) return Want::kEnded;
  if (read_timeout_ > std::chrono::nanoseconds::zero()) quiet_by_ = std::chrono::steady_clock::now() + read_timeout_;
  if (connecting_) return Want::kWrite;
  return sending() ? Want::kReadWrite : Want::kRead;
}

Transport::End PlainTransfer::end(bool stopped) {
  engine::Machine& machine = *machine_;
  const bool complete = done_ && code_ == CURLE_OK;
  if (auto settled = settle(machine, *body_,
                            {.withheld = withheld_,
                             .threw = threw_,
                             .decided = ended_ || (reported_ && !wanted_),
                             .complete = complete,
                             .stopped = stopped,
                             .reported = reported_,
                             .sent = sent_})) {
    if (stopped && !complete) reusable_ = false;
    return *settled;
  }
  reusable_ = false;
  if (!reported_ && head_overflow_) {
    machine.head_too_large(head_.status(), head_.headers(), wall_->now(), mono_->now(),
                           "response head is larger than " + std::to_string(max_header_bytes_) + " bytes");
    return Transport::End::kReported;
  }
  machine.failed(curl_error(code_, detail_), reported_ || sent_ || !certain_before_send(code_), code_ == CURLE_OPERATION_TIMEDOUT);
  return Transport::End::kReported;
}

}  // namespace abide::curl_detail
