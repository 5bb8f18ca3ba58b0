// libFuzzer target for the proxy's HTTP/1 request reader. Invariants beyond
// "never crash": find_head_end finds the same end whether the bytes arrive at
// once or in pieces; a parsed head has a token method, a path (or "*") as
// target, token names and values without control bytes, and at most 256
// fields; bytes after a head's empty line change nothing; every error has an
// expected status and a printable reason; a chunked body decodes to the same
// bytes, status and boundary in any split, never past its limit.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "ascii.h"
#include "proxy/http1_request.h"

namespace {

using abide::proxy::ChunkedDecoder;

void check(bool ok) {
  if (!ok) std::abort();
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return abide::ascii::is_tchar(c); });
}

void check_reason(const abide::proxy::HttpError& e) {
  check(!e.reason.empty() && e.reason.size() <= 200);
  for (char c : e.reason) check(c >= 0x20 && c <= 0x7e);
}

// Piece sizes from the input's own bytes: 1 to 16, then again.
std::size_t piece(std::string_view in, std::size_t& k) {
  if (in.empty()) return 1;
  const auto b = static_cast<unsigned char>(in[k++ % in.size()]);
  return 1 + (b & 15u);
}

struct Decoded {
  ChunkedDecoder::Status status;
  std::string body;
  std::size_t consumed;
  int error;
};

Decoded decode(std::string_view in, std::uint64_t max_body, bool in_pieces) {
  ChunkedDecoder d(max_body);
  Decoded r{ChunkedDecoder::Status::kNeedMore, {}, 0, 0};
  std::size_t k = 0;
  std::size_t pos = 0;
  do {
    const std::size_t n = in_pieces ? std::min(piece(in, k), in.size() - pos) : in.size() - pos;
    std::size_t used = 0;
    r.status = d.feed(in.substr(pos, n), used, r.body);
    check(used <= n);
    pos += used;
    check(d.decoded() == r.body.size() && d.decoded() <= max_body);
    if (r.status != ChunkedDecoder::Status::kNeedMore) break;
    check(used == n);
  } while (pos < in.size());
  r.consumed = pos;
  if (r.status == ChunkedDecoder::Status::kError) {
    check(d.error().status == 400 || d.error().status == 413);
    check_reason(d.error());
    r.error = d.error().status;
  }
  // A finished decoder takes nothing more.
  std::size_t more = 1;
  std::string none;
  check(d.feed("0\r\n\r\n", more, none) == r.status || r.status == ChunkedDecoder::Status::kNeedMore);
  check(r.status == ChunkedDecoder::Status::kNeedMore || (more == 0 && none.empty()));
  return r;
}

void check_head(std::string_view text, std::string_view whole) {
  auto head = abide::proxy::parse_request_head(text);
  // Bytes after the head's empty line change nothing.
  if (whole.size() != text.size()) {
    auto again = abide::proxy::parse_request_head(whole);
    check(again.has_value() == head.has_value());
    if (head) {
      check(again->method == head->method && again->target == head->target);
      check(again->headers.size() == head->headers.size());
    } else {
      check(again.error().status == head.error().status && again.error().reason == head.error().reason);
    }
  }
  if (!head) {
    const int s = head.error().status;
    check(s == 400 || s == 431 || s == 501 || s == 505);
    check_reason(head.error());
    return;
  }
  check(is_token(head->method));
  check(head->target == "*" || (!head->target.empty() && head->target.front() == '/'));
  check(head->version_minor == 0 || head->version_minor == 1);
  check(head->headers.size() <= 256);
  for (const auto& h : head->headers.lines()) {
    check(is_token(h.name));
    for (char c : h.value) check(c == '\t' || static_cast<unsigned char>(c) >= 0x20);
    check(h.value.find('\x7f') == std::string::npos);
  }
  auto framing = abide::proxy::body_framing(*head);
  if (!framing) {
    const int s = framing.error().status;
    check(s == 400 || s == 413 || s == 501);
    check_reason(framing.error());
  }
  (void)abide::proxy::keeps_alive(*head);
  (void)abide::proxy::expects_continue(*head);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const auto end = abide::proxy::find_head_end(input);
  check(!end || (*end > 0 && *end <= input.size()));
  // Arriving in pieces, each call told how much was searched before.
  std::optional<std::size_t> seen;
  std::size_t k = 0;
  std::size_t have = 0;
  while (!seen && have < input.size()) {
    const std::size_t searched = have;
    have = std::min(input.size(), have + piece(input, k));
    seen = abide::proxy::find_head_end(input.substr(0, have), searched);
  }
  check(seen == end);

  check_head(end ? input.substr(0, *end) : input, input);

  // The bytes after the head (or all of them) as a chunked body, under a
  // limit taken from the input too.
  const std::string_view body = end ? input.substr(*end) : input;
  const std::uint64_t max_body = size == 0 || (data[0] & 3u) == 0 ? std::numeric_limits<std::uint64_t>::max()
                                                                  : static_cast<std::uint64_t>(data[0]) * 8;
  const Decoded whole = decode(body, max_body, false);
  const Decoded split = decode(body, max_body, true);
  check(whole.status == split.status && whole.body == split.body && whole.error == split.error);
  check(whole.status == ChunkedDecoder::Status::kError || whole.consumed == split.consumed);
  return 0;
}
