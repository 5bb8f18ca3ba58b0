#include "h2/channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace abide::h2 {
namespace {

// What produce() gathers before a write: one TLS record's worth and a frame.
constexpr std::size_t kWriteChunk = 16 * 1024;

}  // namespace

Channel::~Channel() {
  if (fd_ >= 0) ::close(fd_);
}

Channel::Want Channel::start(int fd, int connect_errno, std::shared_ptr<const TlsContext> tls, std::string_view host) {
  fd_ = fd;
  tls_context_ = std::move(tls);
  host_ = std::string(host);
  if (!session_.ok()) return fail(Failure::kIo, session_.error());
  if (connect_errno == EINPROGRESS) {
    state_ = State::kConnecting;
    return Want::kReadWrite;  // writable: connected (or failed; SO_ERROR says)
  }
  if (connect_errno != 0) return fail(Failure::kConnect, std::string("connect: ") + std::strerror(connect_errno));
  return connected();
}

Channel::Want Channel::fail(Failure kind, std::string why) {
  if (state_ == State::kClosed) return Want::kClosed;
  state_ = State::kClosed;
  failure_ = kind;
  error_ = std::move(why);
  session_.fail_all(error_);
  return Want::kClosed;
}

Channel::Want Channel::connected() {
  if (!tls_context_) {
    state_ = State::kOpen;
    return flush();
  }
  tls_ = std::make_unique<TlsStream>();
  if (!tls_->start(*tls_context_, fd_, host_)) return fail(Failure::kTls, tls_->error());
  state_ = State::kHandshaking;
  return handshake();
}

Channel::Want Channel::handshake() {
  const IoResult r = tls_->handshake();
  switch (r.io) {
    case Io::kDone:
      break;
    case Io::kWantRead:
      blocked_ = false;
      return Want::kRead;
    case Io::kWantWrite:
      blocked_ = true;
      return Want::kReadWrite;
    case Io::kClosed:
      return fail(Failure::kTls, "TLS handshake: the server closed the connection");
    case Io::kFailed:
      return fail(tls_->verify_failed() ? Failure::kVerify : Failure::kTls, tls_->error());
  }
  blocked_ = false;
  if (tls_->alpn() != "h2") {
    const std::string_view chose = tls_->alpn();
    return fail(Failure::kNoHttp2, "the server did not agree to HTTP/2 in TLS (ALPN: " +
                (chose.empty() ? std::string("none") : "\"" + std::string(chose) + "\"") + ")");
  }
  state_ = State::kOpen;
  return flush();
}

Channel::Want Channel::on_ready(std::span<char> scratch) {
  switch (state_) {
    case State::kClosed:
      return Want::kClosed;
    case State::kConnecting: {
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err == EINPROGRESS || err == EALREADY) return Want::kReadWrite;
      if (err != 0) return fail(Failure::kConnect, std::string("connect: ") + std::strerror(err));
      return connected();
    }
    case State::kHandshaking:
      return handshake();
    case State::kOpen:
      break;
  }
  if (const Want w = read_all(scratch); w == Want::kClosed) return w;
  return flush();
}

Channel::Want Channel::read_all(std::span<char> scratch) {
  // Everything the socket holds is read: TLS may hold decrypted bytes that
  // a level-triggered poll of the socket would not report again.
  for (;;) {
    std::size_t got = 0;
    bool eof = false;
    if (tls_) {
      const IoResult r = tls_->read(scratch);
      if (r.io == Io::kWantRead) return want();
      if (r.io == Io::kWantWrite) {
        blocked_ = true;
        return Want::kReadWrite;
      }
      if (r.io == Io::kFailed) return fail(Failure::kIo, tls_->error());
      eof = r.io == Io::kClosed;
      got = r.bytes;
    } else {
      const ssize_t n = ::recv(fd_, scratch.data(), scratch.size(), 0);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return want();
        if (errno == EINTR) continue;
        return fail(Failure::kIo, std::string("recv: ") + std::strerror(errno));
      }
      eof = n == 0;
      got = static_cast<std::size_t>(n);
    }
    if (eof) {
      // Streams still open lost their answers; a session with none left ends cleanly.
      if (session_.open_streams() == 0) {
        state_ = State::kClosed;
        session_.fail_all("the server closed the connection");
        return Want::kClosed;
      }
      return fail(Failure::kIo, "the server closed the connection");
    }
    if (!session_.receive(scratch.first(got))) return fail(Failure::kProtocol, session_.error());
  }
}

Channel::Sent Channel::send_some(std::span<const char> bytes) {
  if (tls_) {
    const IoResult r = tls_->write(bytes);
    if (r.io == Io::kDone) return {true, r.bytes};
    if (r.io == Io::kWantRead || r.io == Io::kWantWrite) return {true, 0};
    fail(Failure::kIo, r.io == Io::kClosed ? std::string("the server closed the connection") : tls_->error());
    return {false, 0};
  }
  for (;;) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n >= 0) return {true, static_cast<std::size_t>(n)};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {true, 0};
    fail(Failure::kIo, std::string("send: ") + std::strerror(errno));
    return {false, 0};
  }
}

Channel::Want Channel::flush() {
  if (state_ == State::kClosed) return Want::kClosed;
  if (state_ != State::kOpen) return blocked_ || state_ == State::kConnecting ? Want::kReadWrite : Want::kRead;
  blocked_ = false;
  for (;;) {
    if (out_done_ == out_.size()) {
      out_.clear();
      out_done_ = 0;
      if (!session_.produce(out_, kWriteChunk)) return fail(Failure::kProtocol, session_.error());
      if (out_.empty()) break;
    }
    const Sent sent = send_some(std::span<const char>(out_).subspan(out_done_));
    if (!sent.ok) return Want::kClosed;
    if (sent.bytes == 0) {
      blocked_ = true;
      break;
    }
    out_done_ += sent.bytes;
  }
  // Keep no large buffer for an idle connection.
  if (out_.empty() && out_.capacity() > 2 * kWriteChunk) out_.shrink_to_fit();
  if (out_done_ == out_.size() && session_.finished()) {  // GOAWAY, and its last stream ended
    state_ = State::kClosed;
    return Want::kClosed;
  }
  return want();
}

Channel::Want Channel::want() const {
  if (state_ == State::kClosed) return Want::kClosed;
  return blocked_ || out_done_ < out_.size() ? Want::kReadWrite : Want::kRead;
}

}  // namespace abide::h2
