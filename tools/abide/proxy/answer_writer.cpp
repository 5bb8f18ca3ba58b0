#include "proxy/answer_writer.h"

#include <charconv>
#include <cstdio>

namespace abide::proxy {
namespace answer_writer {  // private to this file (the CLI is compiled in batches)

bool has_body(int status) noexcept { return status >= 200 && status != 204 && status != 304; }

void append_number(std::string& out, std::uint64_t n) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, r.ptr);
}

}  // namespace answer_writer

void AnswerWriter::head(const AnswerHead& h) {
  using namespace answer_writer;
  head_started_ = true;
  status_ = h.status;
  no_body_ = head_request_ || !has_body(h.status);
  std::string& s = out_;
  s += "HTTP/1.1 ";
  append_number(s, static_cast<std::uint64_t>(h.status < 100 || h.status > 999 ? 502 : h.status));
  s += ' ';
  s += reason_phrase(h.status);
  s += "\r\n";
  for (const Header& f : h.headers.lines()) {
    s += f.name;
    s += ": ";
    s += f.value;
    s += "\r\n";
  }
  if (h.content_length && h.status != 204 && h.status >= 200) {
    // A HEAD's Content-Length is the field answer_head kept; only a made
    // answer's length arrives here for HEAD.
    length_known_ = !no_body_;
    length_ = *h.content_length;
    s += "Content-Length: ";
    append_number(s, *h.content_length);
    s += "\r\n";
  } else if (!no_body_) {
    if (version_minor_ >= 1) {
      chunked_ = true;
      s += "Transfer-Encoding: chunked\r\n";
    } else {
      keep_alive_ = false;  // close-delimited: the end of the body is the end of the connection
    }
  }
  if (!keep_alive_) s += "Connection: close\r\n";
  else if (version_minor_ == 0) s += "Connection: keep-alive\r\n";
  s += "\r\n";
}

void AnswerWriter::body(std::string_view chunk) {
  if (no_body_ || chunk.empty()) return;
  if (length_known_) {
    // Never more than the length said: the rest would be read as the next answer.
    if (written_ >= length_) return;
    if (chunk.size() > length_ - written_) chunk = chunk.substr(0, static_cast<std::size_t>(length_ - written_));
  }
  written_ += chunk.size();
  if (chunked_) {
    char size_line[24];
    const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk.size());
    out_.append(size_line, static_cast<std::size_t>(len));
    out_ += chunk;
    out_ += "\r\n";
  } else {
    out_ += chunk;
  }
}

void AnswerWriter::finish() {
  if (chunked_) out_ += "0\r\n\r\n";
}

void AnswerWriter::made(const MadeAnswer& answer) {
  AnswerHead h = answer.head;
  h.content_length = answer.body.size();
  head(h);
  length_known_ = false;  // the whole body goes in at once
  if (!no_body_) out_ += answer.body;
}

}  // namespace abide::proxy
