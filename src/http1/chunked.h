// http1/chunked.h: HTTP/1 body framing shared by both sides of the wire
// (RFC 9112): the chunked coding's decoder, which the proxy runs on its
// callers' request bodies and the upstream client on answers, and the error
// both report. Bytes from either side are normal bad input: nothing here
// allocates beyond what it returns, and errors name no raw byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace abide::http1 {

// Why a head or body cannot be used, and the status a server answers it
// with: 400 (bad syntax), 431 (head too large), 413 (body too large), 501 (a
// transfer coding other than chunked), 505 (an HTTP version other than 1.0
// and 1.1).
struct HttpError {
  int status = 400;
  std::string reason;  // printable ASCII, one sentence without a final period
};

// field-vchar / SP / HTAB (RFC 9110 5.5): obs-text allowed, controls not.
constexpr bool is_field_byte(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}

// Decodes a chunked body incrementally (RFC 9112 7.1): chunk sizes in hex
// (with extensions, which are ignored), data, the last chunk and a trailer
// section, which is read and dropped. At most `max_body` decoded bytes (413
// beyond, before any byte of the chunk that would pass it), at most 16 hex
// digits after leading zeros, a chunk-size line of at most 4 KiB and a
// trailer section of at most 8 KiB (400 beyond). A bare LF ends a line too.
class ChunkedDecoder {
 public:
  explicit ChunkedDecoder(std::uint64_t max_body) noexcept : max_body_(max_body) {}

  enum class Status : std::uint8_t { kNeedMore, kDone, kError };

  // Consumes a prefix of `in` (reports how much in `consumed`; after kDone
  // the rest belongs to the next request) and appends the decoded data to
  // `out`. After kError, error() says why and the decoder stays in error.
  [[nodiscard]] Status feed(std::string_view in, std::size_t& consumed, std::string& out);

  const HttpError& error() const noexcept { return error_; }
  std::uint64_t decoded() const noexcept { return decoded_; }

 private:
  // kSizeBws: whitespace after the size, which only an extension may follow.
  enum class State : std::uint8_t {
    kSize,
    kSizeBws,
    kExtension,
    kSizeLf,
    kData,
    kDataCr,
    kDataLf,
    kTrailer,
    kTrailerLf,
    kDone,
    kError
  };
  Status fail(int status, std::string reason);
  Status end_size_line();
  Status end_trailer_line();
  // The steps of feed(), one for each kind of byte.
  std::size_t take_data(std::string_view rest, std::string& out);
  Status take_byte(char c);
  Status size_byte(char c);
  Status size_bws_byte(char c);
  Status extension_byte(char c);
  Status count_size_line_byte(Status s);
  Status data_end_byte(char c);
  Status trailer_byte(char c);

  std::uint64_t max_body_;
  std::uint64_t decoded_ = 0;
  std::uint64_t chunk_left_ = 0;    // the size being read, then the data left of the chunk
  std::size_t line_bytes_ = 0;      // of the current chunk-size line
  std::size_t size_digits_ = 0;     // hex digits of the size after leading zeros
  std::size_t trailer_bytes_ = 0;   // of the whole trailer section
  bool trailer_line_empty_ = true;  // no byte yet on the current trailer line
  State state_ = State::kSize;
  HttpError error_;
};

}  // namespace abide::http1
