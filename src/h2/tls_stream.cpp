#include "h2/tls_stream.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace abide::h2 {
namespace {

// The oldest error OpenSSL queued on this thread, then the queue emptied (a
// stale entry would be blamed on the next connection).
std::string take_openssl_error(const char* doing) {
  std::string why = doing;
  const unsigned long code = ERR_get_error();
  if (code != 0) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    why += ": ";
    why += text;
  }
  ERR_clear_error();
  return why;
}

bool is_ip_literal(const std::string& host) {
  unsigned char addr[16];
  return inet_pton(AF_INET, host.c_str(), addr) == 1 || inet_pton(AF_INET6, host.c_str(), addr) == 1;
}

}  // namespace

std::shared_ptr<const TlsContext> TlsContext::make(const TlsOptions& options, std::string& error) {
  // ALPN's wire form: each name after its length byte.
  std::string wire;
  for (const std::string& name : options.alpn) {
    if (name.empty() || name.size() > 255) {
      error = "an ALPN protocol name is 1 to 255 bytes";
      return nullptr;
    }
    wire += static_cast<char>(name.size());
    wire += name;
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    error = take_openssl_error("cannot make a TLS context");
    return nullptr;
  }
  std::shared_ptr<const TlsContext> made(new TlsContext(ctx, options.verify));
  // HTTP/2 over TLS needs TLS 1.2 at least (RFC 9113, 9.2).
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // A write may be retried with the same bytes at another address (the
  // caller's buffer moves as it grows), and may take part of them.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  // A server that closes without close_notify ends the stream as a plain
  // EOF would; HTTP/2 framing says whether anything was cut short.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (options.verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    const int loaded = options.ca_file.empty()
                           ? SSL_CTX_set_default_verify_paths(ctx)
                           : SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr);
    if (loaded != 1) {
      error = take_openssl_error(options.ca_file.empty() ? "cannot load the system's CA certificates"
                                                         : "cannot load the CA file");
      if (!options.ca_file.empty()) error += " (" + options.ca_file + ")";
      return nullptr;
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!wire.empty() && SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(wire.data()),
                              static_cast<unsigned>(wire.size())) != 0) {
    error = take_openssl_error("cannot set ALPN");
    return nullptr;
  }
  return made;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

TlsStream::~TlsStream() { SSL_free(ssl_); }

bool TlsStream::start(const TlsContext& context, int fd, std::string_view host_view) {
  ssl_ = SSL_new(context.native());
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd) != 1) {
    error_ = take_openssl_error("cannot start TLS");
    return false;
  }
  SSL_set_connect_state(ssl_);
  const std::string host(host_view);
  const bool ip = is_ip_literal(host);
  // SNI names a host, never an address (RFC 6066, 3).
  // (SSL_set_tlsext_host_name, without its macro's C cast.)
  if (!ip && SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                      const_cast<char*>(host.c_str())) != 1) {
    error_ = take_openssl_error("cannot set the server name");
    return false;
  }
  if (context.verify()) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                       : X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
    if (set != 1) {
      error_ = take_openssl_error("cannot set the name to verify");
      return false;
    }
  }
  return true;
}

IoResult TlsStream::outcome(int ret, const char* doing) {
  const int err = SSL_get_error(ssl_, ret);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      return {Io::kWantRead};
    case SSL_ERROR_WANT_WRITE:
      return {Io::kWantWrite};
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error();
      return {Io::kClosed};
    case SSL_ERROR_SYSCALL: {
      const int saved = errno;
      if (ERR_peek_error() == 0 && saved == 0) {  // EOF without close_notify, before the handshake's end
        error_ = std::string(doing) + ": the server closed the connection";
        return {Io::kFailed};
      }
      error_ = take_openssl_error(doing);
      if (saved != 0) error_ += std::string(": ") + std::strerror(saved);
      return {Io::kFailed};
    }
    default: {
      const long verified = SSL_get_verify_result(ssl_);
      if (verified != X509_V_OK) {
        ERR_clear_error();
        verify_failed_ = true;
        // curl's words, which users search for.
        error_ = std::string("SSL certificate problem: ") + X509_verify_cert_error_string(verified);
        return {Io::kFailed};
      }
      error_ = take_openssl_error(doing);
      return {Io::kFailed};
    }
  }
}

IoResult TlsStream::handshake() {
  errno = 0;
  const int ret = SSL_do_handshake(ssl_);
  return ret == 1 ? IoResult{Io::kDone} : outcome(ret, "TLS handshake");
}

IoResult TlsStream::read(std::span<char> into) {
  if (into.empty()) return {Io::kDone};
  errno = 0;
  const int ret = SSL_read(ssl_, into.data(), static_cast<int>(std::min<std::size_t>(into.size(), INT_MAX)));
  if (ret > 0) return {Io::kDone, static_cast<std::size_t>(ret)};
  return outcome(ret, "TLS read");
}

IoResult TlsStream::write(std::span<const char> bytes) {
  if (bytes.empty()) return {Io::kDone};
  errno = 0;
  const int ret = SSL_write(ssl_, bytes.data(), static_cast<int>(std::min<std::size_t>(bytes.size(), INT_MAX)));
  if (ret > 0) return {Io::kDone, static_cast<std::size_t>(ret)};
  return outcome(ret, "TLS write");
}

std::string_view TlsStream::alpn() const noexcept {
  const unsigned char* data = nullptr;
  unsigned len = 0;
  if (ssl_ != nullptr) SSL_get0_alpn_selected(ssl_, &data, &len);
  return data == nullptr ? std::string_view() : std::string_view(reinterpret_cast<const char*>(data), len);
}

}  // namespace abide::h2
