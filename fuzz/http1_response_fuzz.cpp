// libFuzzer target for how the upstream client frames an answer: the
// framing read from a head's fields (Content-Length, Transfer-Encoding,
// Connection, by method, status and version) and the chunked decoder it
// runs on the body. Invariants beyond "never crash": a length framing is the
// one Content-Length states; a framing that runs to the close never keeps
// the connection; a body without framing comes only for HEAD, 1xx, 204 and
// 304; the decoder never takes more than it was given, and what it decodes
// is what it counts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "abide/headers.h"
#include "http1/chunked.h"
#include "http1/response_framing.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

// Input: a method byte, two status bytes, a version byte, then field lines
// ("name: value", LF-separated) up to an empty line, then a chunked body.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  static constexpr std::string_view kMethods[] = {"GET", "HEAD", "POST", "PUT"};
  const std::string_view method = kMethods[data[0] % 4];
  const int status = 100 + (data[1] * 256 + data[2]) % 500;
  const int version = (data[3] & 1) != 0 ? 11 : 10;
  std::string_view rest = in.substr(4);
  const std::size_t end = rest.find("\n\n");
  std::string_view fields = rest.substr(0, end);
  const std::string_view body = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 2);

  abide::HeaderList headers;
  while (!fields.empty()) {
    const std::size_t nl = fields.find('\n');
    const std::string_view line = fields.substr(0, nl);
    if (const std::size_t colon = line.find(':'); colon != std::string_view::npos && colon > 0) {
      headers.add(line.substr(0, colon), line.substr(colon + 1));
    }
    if (nl == std::string_view::npos) break;
    fields.remove_prefix(nl + 1);
  }

  using Kind = abide::http1::ResponseFraming::Kind;
  const auto framing = abide::http1::response_framing(method, status, version, headers);
  const auto length = abide::http1::content_length(headers);
  if (framing) {
    if (framing->kind == Kind::kLength) check(length && *length == framing->length);
    if (framing->kind == Kind::kClose) check(!framing->keep_alive);
    if (framing->kind == Kind::kNone) {
      check(method == "HEAD" || status < 200 || status == 204 || status == 304);
    }
  } else {
    check(headers.count("Content-Length") > 0 && !length);
  }

  abide::http1::ChunkedDecoder decoder(std::numeric_limits<std::uint64_t>::max());
  std::string out;
  std::size_t at = 0;
  while (at < body.size()) {
    std::size_t consumed = 0;
    const std::string_view piece = body.substr(at, 1 + static_cast<unsigned char>(body[at]) % 7);
    const auto s = decoder.feed(piece, consumed, out);
    check(consumed <= piece.size());
    check(decoder.decoded() == out.size());
    at += consumed;
    if (s != abide::http1::ChunkedDecoder::Status::kNeedMore) break;
    if (consumed < piece.size()) break;
  }
  return 0;
}
