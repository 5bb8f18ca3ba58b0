// How `abide proxy` frames one answer for its caller: the head with its
// framing (Content-Length, chunked for HTTP/1.1, or close-delimited for
// HTTP/1.0) and Connection, then the body as it arrives. The bytes are
// appended to the connection's output buffer; its event loop sends them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "proxy/proxy_rules.h"

namespace abide::proxy {

class AnswerWriter {
 public:
  // Appends to `out`, the connection's output buffer. `head_request`: the
  // caller's method was HEAD (no body goes out, the framing fields stay as
  // given).
  AnswerWriter(std::string& out, int version_minor, bool head_request, bool keep_alive) noexcept
      : out_(out), version_minor_(version_minor), head_request_(head_request), keep_alive_(keep_alive) {}

  // The head.
  void head(const AnswerHead& head);
  // One body chunk, framed.
  void body(std::string_view chunk);
  // Ends the answer cleanly (the last chunk).
  void finish();
  // A whole answer made by the proxy (Content-Length is its body's).
  void made(const MadeAnswer& answer);

  bool head_started() const noexcept { return head_started_; }
  // After this answer the connection must close (the caller asked, or the
  // body is close-delimited).
  bool must_close() const noexcept { return !keep_alive_; }
  // The body went out as Content-Length and not all of it was written.
  bool incomplete() const noexcept { return length_known_ && written_ != length_; }
  int status() const noexcept { return status_; }

 private:
  std::string& out_;
  int version_minor_;
  bool head_request_;
  bool keep_alive_;
  bool head_started_ = false;
  bool chunked_ = false;
  bool no_body_ = false;
  bool length_known_ = false;
  std::uint64_t length_ = 0;
  std::uint64_t written_ = 0;
  int status_ = 0;
};

}  // namespace abide::proxy
