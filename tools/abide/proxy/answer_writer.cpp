#include "proxy/answer_writer.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <optional>

namespace abide::proxy {
namespace answer_writer {  // private to this file (the CLI is compiled in batches)

using Steady = std::chrono::steady_clock;

// The socket's send timeout (SO_SNDTIMEO); nullopt: none.
std::optional<Steady::duration> send_timeout_of(int fd) noexcept {
  timeval tv{};
  socklen_t len = sizeof tv;
  if (::getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) != 0 || (tv.tv_sec == 0 && tv.tv_usec == 0)) {
    return std::nullopt;
  }
  return std::chrono::seconds{tv.tv_sec} + std::chrono::microseconds{tv.tv_usec};
}

// Sends every iovec whole, resuming after partial writes, within the
// socket's send timeout in all (counted from the call): a blocked sendmsg
// that wrote part returns only at that timeout, and a loop that simply
// resumed would give a caller that stopped reading twice the time, and one
// that takes a byte now and then forever.
bool send_iov(int fd, iovec* iov, int count) noexcept {
  msghdr msg{};
  const Steady::time_point start = Steady::now();
  std::optional<Steady::time_point> give_up;  // set at the first partial write
  while (count > 0) {
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(count);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | (give_up ? MSG_DONTWAIT : 0));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (give_up && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(*give_up - Steady::now()).count();
        if (left <= 0) return false;
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left, 60'000))) < 0 && errno != EINTR) return false;
        continue;
      }
      return false;  // gone, or the send timeout passed (a caller that stopped reading)
    }
    auto left = static_cast<std::size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
      if (!give_up) {
        const auto limit = send_timeout_of(fd);
        give_up = limit ? start + *limit : Steady::time_point::max();
      }
    }
  }
  return true;
}

iovec piece(std::string_view s) noexcept { return iovec{const_cast<char*>(s.data()), s.size()}; }

bool has_body(int status) noexcept { return status >= 200 && status != 204 && status != 304; }

void append_number(std::string& out, std::uint64_t n) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, r.ptr);
}

}  // namespace answer_writer

bool send_all(int fd, std::string_view a, std::string_view b) noexcept {
  iovec iov[2] = {answer_writer::piece(a), answer_writer::piece(b)};
  return answer_writer::send_iov(fd, iov, b.empty() ? 1 : 2);
}

bool AnswerWriter::head(const AnswerHead& h) {
  using namespace answer_writer;
  head_started_ = true;
  status_ = h.status;
  no_body_ = head_request_ || !has_body(h.status);
  std::string& s = scratch_;
  s.clear();
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
  return true;
}

bool AnswerWriter::flush_head(std::string_view chunk) {
  using namespace answer_writer;
  iovec iov[4];
  int n = 0;
  if (!head_sent_) iov[n++] = piece(scratch_);
  char size_line[24];
  if (!chunk.empty()) {
    if (chunked_) {
      const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk.size());
      iov[n++] = piece(std::string_view(size_line, static_cast<std::size_t>(len)));
      iov[n++] = piece(chunk);
      iov[n++] = piece("\r\n");
    } else {
      iov[n++] = piece(chunk);
    }
  }
  head_sent_ = true;
  return n == 0 || send_iov(fd_, iov, n);
}

bool AnswerWriter::body(std::string_view chunk) {
  if (no_body_ || chunk.empty()) return true;
  if (length_known_) {
    // Never more than the length said: the rest would be read as the next answer.
    if (written_ >= length_) return true;
    if (chunk.size() > length_ - written_) chunk = chunk.substr(0, static_cast<std::size_t>(length_ - written_));
  }
  written_ += chunk.size();
  return flush_head(chunk);
}

bool AnswerWriter::finish() {
  if (!flush_head({})) return false;
  if (chunked_) return send_all(fd_, "0\r\n\r\n");
  return true;
}

bool AnswerWriter::made(const MadeAnswer& answer) {
  AnswerHead h = answer.head;
  h.content_length = answer.body.size();
  if (!head(h)) return false;
  if (no_body_) return finish();
  length_known_ = false;  // the whole body goes in this one send
  head_sent_ = true;
  return send_all(fd_, scratch_, answer.body);
}

}  // namespace abide::proxy
