// TLS over a connected non-blocking socket (OpenSSL), for abide's own HTTP/2
// client. Nothing here waits: each call does what the socket allows at once
// and says what it needs next (the socket readable or writable), so one loop
// runs many of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

// OpenSSL's types, named here without its headers.
struct ssl_ctx_st;
struct ssl_st;

namespace abide::h2 {

// How servers are verified, and what is offered in ALPN.
struct TlsOptions {
  bool verify = true;       // false: any certificate is taken (curl's --insecure)
  std::string ca_file;      // PEM CA certificates to verify with; empty: the system's
  // Offered in ALPN, in order of preference: curl's offer, so that a server
  // without HTTP/2 picks HTTP/1.1 rather than ending the handshake.
  std::vector<std::string> alpn = {"h2", "http/1.1"};
};

// A client context, made once and shared by every connection made with it.
class TlsContext {
 public:
  // The context for `options`; nullptr, and `error` says why (a CA file
  // that cannot be loaded, OpenSSL out of memory).
  [[nodiscard]] static std::shared_ptr<const TlsContext> make(const TlsOptions& options, std::string& error);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool verify() const noexcept { return verify_; }
  ssl_ctx_st* native() const noexcept { return ctx_; }

 private:
  TlsContext(ssl_ctx_st* ctx, bool verify) : ctx_(ctx), verify_(verify) {}
  ssl_ctx_st* ctx_;
  bool verify_;
};

// What one call did.
enum class Io : std::uint8_t {
  kDone,       // the handshake is complete, or `bytes` were moved
  kWantRead,   // nothing more until the socket is readable
  kWantWrite,  // nothing more until the socket is writable
  kClosed,     // the peer ended the TLS session (or the connection, without close_notify)
  kFailed,     // error() says why; the connection is unusable
};
struct IoResult {
  Io io;
  std::size_t bytes = 0;
};

class TlsStream {
 public:
  TlsStream() = default;
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Binds to `fd` (connected, non-blocking; it stays the caller's) to talk
  // to `host`: a name (sent as SNI and verified) or an IP literal without
  // brackets (verified against the certificate's IP addresses). false: error().
  [[nodiscard]] bool start(const TlsContext& context, int fd, std::string_view host);

  [[nodiscard]] IoResult handshake();
  [[nodiscard]] IoResult read(std::span<char> into);
  [[nodiscard]] IoResult write(std::span<const char> bytes);

  // The protocol the server chose in ALPN ("" when it chose none).
  std::string_view alpn() const noexcept;
  const std::string& error() const noexcept { return error_; }
  // The failure was the server's certificate (it would fail the same way again).
  bool verify_failed() const noexcept { return verify_failed_; }

 private:
  IoResult outcome(int ret, const char* doing);

  ssl_st* ssl_ = nullptr;
  std::string error_;
  bool verify_failed_ = false;
};

}  // namespace abide::h2
