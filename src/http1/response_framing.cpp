// How an HTTP/1 answer is framed (see http1/response_framing.h).
#include "http1/response_framing.h"

#include <limits>

#include "ascii.h"
#include "decimal.h"

namespace abide::http1 {
namespace {

// Whether a comma-separated list field holds `token` (any case).
bool lists(const HeaderList& headers, std::string_view name, std::string_view token) {
  for (const std::string_view line : headers.all(name)) {
    std::string_view rest = line;
    while (true) {
      const std::size_t comma = rest.find(',');
      if (ascii::iequals(ascii::trim_ows(rest.substr(0, comma)), token)) return true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return false;
}

// Whether the last transfer coding listed is chunked.
bool ends_chunked(const HeaderList& headers) {
  std::string_view last;
  for (const std::string_view line : headers.all("Transfer-Encoding")) {
    const std::size_t comma = line.rfind(',');
    const std::string_view item = ascii::trim_ows(comma == std::string_view::npos ? line : line.substr(comma + 1));
    if (!item.empty()) last = item;
  }
  return ascii::iequals(last, "chunked");
}

}  // namespace

std::optional<std::uint64_t> content_length(const HeaderList& headers) {
  std::optional<std::uint64_t> out;
  for (const std::string_view line : headers.all("Content-Length")) {
    std::string_view rest = line;
    while (true) {
      const std::size_t comma = rest.find(',');
      const std::string_view item = ascii::trim_ows(rest.substr(0, comma));
      if (item.size() > 19) return std::nullopt;  // 19 digits always fit 64 bits
      const auto v = abide::detail::parse_decimal<std::uint64_t, std::numeric_limits<std::uint64_t>::max()>(item);
      if (!v || (out && *out != *v)) return std::nullopt;
      out = v;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return out;
}

std::optional<ResponseFraming> response_framing(std::string_view method, int status, int version,
                                                const HeaderList& headers) {
  ResponseFraming f;
  f.keep_alive = version >= 11 ? !lists(headers, "Connection", "close") : lists(headers, "Connection", "keep-alive");
  if (method == "HEAD" || (status >= 100 && status < 200) || status == 204 || status == 304) {
    f.kind = ResponseFraming::Kind::kNone;
    return f;
  }
  if (headers.count("Transfer-Encoding") > 0) {
    // With Content-Length too, the message may be one that a part of the
    // path framed otherwise: the connection is not used again.
    if (headers.count("Content-Length") > 0) f.keep_alive = false;
    if (version >= 11 && ends_chunked(headers)) {
      f.kind = ResponseFraming::Kind::kChunked;
      return f;
    }
    f.kind = ResponseFraming::Kind::kClose;
    f.keep_alive = false;
    return f;
  }
  if (headers.count("Content-Length") > 0) {
    const auto n = content_length(headers);
    if (!n) return std::nullopt;
    f.kind = ResponseFraming::Kind::kLength;
    f.length = *n;
    return f;
  }
  f.kind = ResponseFraming::Kind::kClose;
  f.keep_alive = false;
  return f;
}

}  // namespace abide::http1
