// How `abide proxy` writes one answer to its caller's socket: the head with
// its framing (Content-Length, chunked for HTTP/1.1, or close-delimited for
// HTTP/1.0) and Connection, then the body as it arrives.
//
// The head is held back until the first body chunk (or the end), so that a
// short answer leaves in one writev. Sends use MSG_NOSIGNAL: a caller that is
// gone is a failed send, never a SIGPIPE.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "proxy/proxy_rules.h"

namespace abide::proxy {

// Sends all of `a` then `b` in as few syscalls as the kernel takes; false
// when the caller is gone, or did not take it all within the socket's send
// timeout (SO_SNDTIMEO) from the first partial write.
[[nodiscard]] bool send_all(int fd, std::string_view a, std::string_view b = {}) noexcept;

class AnswerWriter {
 public:
  // `scratch` is the connection's buffer for heads (reused: no allocation per
  // answer once it has grown). `head_request`: the caller's method was HEAD
  // (no body goes out, the framing fields stay as given).
  AnswerWriter(int fd, int version_minor, bool head_request, bool keep_alive, std::string& scratch) noexcept
      : fd_(fd),
        version_minor_(version_minor),
        head_request_(head_request),
        keep_alive_(keep_alive),
        scratch_(scratch) {}

  // Builds the head (sent with the first chunk or at finish()); false when
  // the caller is gone.
  [[nodiscard]] bool head(const AnswerHead& head);
  // One body chunk, framed; false when the caller is gone.
  [[nodiscard]] bool body(std::string_view chunk);
  // Ends the answer cleanly (the head if still held, the last chunk).
  [[nodiscard]] bool finish();
  // A whole answer made by the proxy (Content-Length is its body's).
  [[nodiscard]] bool made(const MadeAnswer& answer);

  bool head_started() const noexcept { return head_started_; }
  // After this answer the connection must close (the caller asked, or the
  // body is close-delimited).
  bool must_close() const noexcept { return !keep_alive_; }
  // The body went out as Content-Length and not all of it was written.
  bool incomplete() const noexcept { return length_known_ && written_ != length_; }
  int status() const noexcept { return status_; }

 private:
  bool flush_head(std::string_view chunk);

  int fd_;
  int version_minor_;
  bool head_request_;
  bool keep_alive_;
  std::string& scratch_;
  bool head_started_ = false;
  bool head_sent_ = false;
  bool chunked_ = false;
  bool no_body_ = false;
  bool length_known_ = false;
  std::uint64_t length_ = 0;
  std::uint64_t written_ = 0;
  int status_ = 0;
};

}  // namespace abide::proxy
