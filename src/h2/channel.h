// One HTTP/2 client connection on a socket: the socket's bytes, TLS when
// given (ALPN must agree on "h2"), and the Session whose streams carry the
// requests. Nothing waits: the owner's loop calls on_ready() when the socket
// is ready and flush() after opening or consuming streams, and each says
// what the socket should be watched for next.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "h2/session.h"
#include "h2/tls_stream.h"

namespace abide::h2 {

class Channel {
 public:
  enum class Want : std::uint8_t {
    kRead,       // readable (the server may always send)
    kReadWrite,  // readable or writable: bytes wait to be written
    kClosed,     // the connection is over: error() says why, unless it ended cleanly
  };

  // Why the connection failed.
  enum class Failure : std::uint8_t {
    kNone,
    kConnect,   // the TCP connection
    kTls,       // the TLS handshake
    kVerify,    // the server's certificate (the same on every attempt)
    kNoHttp2,   // the server did not agree to HTTP/2 in ALPN
    kIo,        // a read or write after the connection was set up, or the server hung up
    kProtocol,  // the server broke HTTP/2 (nghttp2 ended the connection)
  };

  explicit Channel(const Session::Settings& settings) : session_(settings) {}
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Takes `fd`, a non-blocking socket whose connect() returned
  // `connect_errno` (0, or EINPROGRESS), and closes it at the end. With
  // `tls`, speaks TLS to `host` (a name, or an IP literal without brackets);
  // without, HTTP/2 in cleartext from the first byte (prior knowledge).
  // Streams may be opened at once: they go out once the connection is ready.
  [[nodiscard]] Want start(int fd, int connect_errno, std::shared_ptr<const TlsContext> tls, std::string_view host);

  // The socket is ready (for what the last Want said, or in error).
  // `scratch` takes what is read.
  [[nodiscard]] Want on_ready(std::span<char> scratch);
  // Writes what the session has queued (after open(), consume(), cancel()).
  [[nodiscard]] Want flush();

  Session& session() noexcept { return session_; }
  // Connected, and HTTP/2 agreed.
  bool ready() const noexcept { return state_ == State::kOpen; }
  bool closed() const noexcept { return state_ == State::kClosed; }
  int fd() const noexcept { return fd_; }
  const std::string& error() const noexcept { return error_; }
  Failure failure() const noexcept { return failure_; }

 private:
  enum class State : std::uint8_t { kConnecting, kHandshaking, kOpen, kClosed };
  Want fail(Failure kind, std::string why);
  Want connected();
  Want handshake();
  Want read_all(std::span<char> scratch);
  Want want() const;
  struct Sent {
    bool ok;
    std::size_t bytes;
  };
  // Plain or TLS: bytes moved, 0 with ok for "not now", !ok after fail().
  Sent send_some(std::span<const char> bytes);

  Session session_;
  std::shared_ptr<const TlsContext> tls_context_;
  std::unique_ptr<TlsStream> tls_;
  std::string host_;
  std::string out_;          // bytes produced and not yet written
  std::size_t out_done_ = 0;  // of out_, written
  int fd_ = -1;
  State state_ = State::kConnecting;
  bool blocked_ = false;  // the last write could not go on: wait for writable
  Failure failure_ = Failure::kNone;
  std::string error_;
};

}  // namespace abide::h2
