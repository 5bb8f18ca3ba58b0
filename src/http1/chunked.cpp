// The chunked coding's decoder (see http1/chunked.h).
#include "http1/chunked.h"

#include <algorithm>
#include <utility>

#include "ascii.h"

namespace abide::http1 {
namespace {

// A chunk-size line with its extensions, and a whole trailer section.
constexpr std::size_t kMaxSizeLine = 4096;
constexpr std::size_t kMaxTrailer = 8192;
// Hex digits of a chunk size beyond leading zeros: 16 fill 64 bits.
constexpr std::size_t kMaxSizeDigits = 16;

int hex_value(char c) noexcept {
  if (ascii::is_digit(c)) return c - '0';
  const char l = ascii::to_lower(c);
  if (l >= 'a' && l <= 'f') return l - 'a' + 10;
  return -1;
}

}  // namespace

ChunkedDecoder::Status ChunkedDecoder::fail(int status, std::string reason) {
  state_ = State::kError;
  error_ = HttpError{status, std::move(reason)};
  return Status::kError;
}

ChunkedDecoder::Status ChunkedDecoder::end_size_line() {
  line_bytes_ = 0;
  size_digits_ = 0;
  if (chunk_left_ == 0) {
    state_ = State::kTrailer;
    trailer_line_empty_ = true;
    return Status::kNeedMore;
  }
  // Refused before a byte of it is taken: decoded() never passes max_body.
  if (chunk_left_ > max_body_ - decoded_) {
    return fail(413, "the body is larger than " + std::to_string(max_body_) + " bytes");
  }
  state_ = State::kData;
  return Status::kNeedMore;
}

ChunkedDecoder::Status ChunkedDecoder::end_trailer_line() {
  if (trailer_line_empty_) {
    state_ = State::kDone;
    return Status::kDone;
  }
  trailer_line_empty_ = true;
  state_ = State::kTrailer;
  return Status::kNeedMore;
}

// Chunk data: as much of `rest` as the chunk has left.
std::size_t ChunkedDecoder::take_data(std::string_view rest, std::string& out) {
  const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_left_, rest.size()));
  out.append(rest.data(), take);
  chunk_left_ -= take;
  decoded_ += take;
  if (chunk_left_ == 0) state_ = State::kDataCr;
  return take;
}

// A byte of a chunk-size line was taken (`s`: what it did): the line has a
// length limit.
ChunkedDecoder::Status ChunkedDecoder::count_size_line_byte(Status s) {
  if (s == Status::kNeedMore && ++line_bytes_ > kMaxSizeLine) return fail(400, "a chunk size line is too long");
  return s;
}

// A byte of the size: a hex digit, else what ends the size (an extension,
// whitespace, the line's end).
ChunkedDecoder::Status ChunkedDecoder::size_byte(char c) {
  const int v = hex_value(c);
  if (v >= 0) {
    if (chunk_left_ != 0 || v != 0) ++size_digits_;
    if (size_digits_ > kMaxSizeDigits) return fail(400, "a chunk size is too large");
    chunk_left_ = (chunk_left_ << 4) | static_cast<std::uint64_t>(v);
  } else if (line_bytes_ == 0) {
    return fail(400, "a chunk size is not a hex number");
  } else if (c == ';') {
    state_ = State::kExtension;
  } else if (ascii::is_ows(c)) {
    state_ = State::kSizeBws;
  } else if (c == '\r') {
    state_ = State::kSizeLf;
  } else if (c == '\n') {
    return end_size_line();
  } else {
    return fail(400, "a chunk size is not a hex number");
  }
  return count_size_line_byte(Status::kNeedMore);
}

// Whitespace after a size is allowed only before an extension.
ChunkedDecoder::Status ChunkedDecoder::size_bws_byte(char c) {
  if (c == ';') {
    state_ = State::kExtension;
  } else if (!ascii::is_ows(c)) {
    return fail(400, "a chunk size is followed by something other than an extension");
  }
  return count_size_line_byte(Status::kNeedMore);
}

// A chunk extension, ignored to the line's end.
ChunkedDecoder::Status ChunkedDecoder::extension_byte(char c) {
  if (c == '\r') {
    state_ = State::kSizeLf;
  } else if (c == '\n') {
    return end_size_line();
  } else if (!is_field_byte(c)) {
    return fail(400, "a chunk extension holds a control byte");
  }
  return count_size_line_byte(Status::kNeedMore);
}

// The CRLF (or bare LF) after a chunk's data.
ChunkedDecoder::Status ChunkedDecoder::data_end_byte(char c) {
  if (c == '\n') {
    state_ = State::kSize;
    return Status::kNeedMore;
  }
  if (c == '\r' && state_ == State::kDataCr) {
    state_ = State::kDataLf;
    return Status::kNeedMore;
  }
  return fail(400, "chunk data is longer than its size");
}

// A byte of the trailer section, read and dropped; an empty line ends it.
ChunkedDecoder::Status ChunkedDecoder::trailer_byte(char c) {
  if (++trailer_bytes_ > kMaxTrailer) return fail(400, "the trailer section is too long");
  if (state_ == State::kTrailerLf)
    return c == '\n' ? end_trailer_line() : fail(400, "a trailer line has a CR without LF");
  if (c == '\r') {
    state_ = State::kTrailerLf;
  } else if (c == '\n') {
    return end_trailer_line();
  } else if (!is_field_byte(c)) {
    return fail(400, "a trailer field holds a control byte");
  } else {
    trailer_line_empty_ = false;
  }
  return Status::kNeedMore;
}

// One byte of anything but chunk data, by the state it arrives in.
ChunkedDecoder::Status ChunkedDecoder::take_byte(char c) {
  switch (state_) {
    case State::kSize: return size_byte(c);
    case State::kSizeBws: return size_bws_byte(c);
    case State::kExtension: return extension_byte(c);
    case State::kSizeLf: return c == '\n' ? end_size_line() : fail(400, "a chunk size line has a CR without LF");
    case State::kDataCr:
    case State::kDataLf: return data_end_byte(c);
    case State::kTrailer:
    case State::kTrailerLf: return trailer_byte(c);
    case State::kData:
    case State::kDone:
    case State::kError: break;
  }
  return Status::kNeedMore;
}

ChunkedDecoder::Status ChunkedDecoder::feed(std::string_view in, std::size_t& consumed, std::string& out) {
  consumed = 0;
  if (state_ == State::kError) return Status::kError;
  if (state_ == State::kDone) return Status::kDone;
  std::size_t i = 0;
  while (i < in.size()) {
    if (state_ == State::kData) {
      i += take_data(in.substr(i), out);
      continue;
    }
    const Status s = take_byte(in[i]);
    if (s == Status::kError) {
      consumed = i;
      return s;
    }
    ++i;
    if (s == Status::kDone) {
      consumed = i;
      return s;
    }
  }
  consumed = i;
  return Status::kNeedMore;
}

}  // namespace abide::http1
