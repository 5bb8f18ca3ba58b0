// parse_origin and origin_of (abide/engine.h): the parts of an http(s) URL
// that a transport and the pacer need.
#include <string>

#include "abide/engine.h"
#include "ascii.h"
#include "concat.h"
#include "decimal.h"

namespace abide {
namespace {

// What parse_origin rejects in any part of a URL.
bool url_bytes_ok(std::string_view url) noexcept {
  if (url.empty() || url.size() > 65536) return false;
  for (char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  return true;
}

bool host_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' || c == '%';
}

bool ipv6_char(char c) noexcept { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == ':' || c == '.'; }

using detail::cat;

}  // namespace

std::optional<UrlOrigin> parse_origin(std::string_view url) {
  if (!url_bytes_ok(url)) return std::nullopt;
  UrlOrigin out;
  const std::size_t colon = url.find("://");
  if (colon == std::string_view::npos) return std::nullopt;
  for (char c : url.substr(0, colon)) out.scheme.push_back(ascii::to_lower(c));
  if (out.scheme != "http" && out.scheme != "https") return std::nullopt;
  const std::uint16_t default_port = out.scheme == "http" ? 80 : 443;
  std::string_view rest = url.substr(colon + 3);
  const std::size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  std::string_view tail = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
  // Userinfo names no part of the origin (it is the transport's business).
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  if (authority.empty()) return std::nullopt;

  std::string_view host;
  std::string_view port_text;
  bool bracketed = false;
  if (authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    bracketed = true;
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return std::nullopt;
      port_text = after.substr(1);
      if (port_text.empty()) return std::nullopt;
    }
  } else {
    const std::size_t c = authority.find(':');
    host = authority.substr(0, c);
    if (c != std::string_view::npos) {
      port_text = authority.substr(c + 1);
      if (port_text.empty()) return std::nullopt;
    }
  }
  if (host.empty() || host.size() > 253) return std::nullopt;
  for (char c : host) out.host.push_back(ascii::to_lower(c));
  for (char c : out.host) {
    if (!(bracketed ? ipv6_char(c) : host_char(c))) return std::nullopt;
  }

  out.port = default_port;
  if (!port_text.empty()) {
    if (port_text.size() > 5) return std::nullopt;
    const auto value = detail::parse_decimal<unsigned, 65535>(port_text);
    if (!value || *value == 0) return std::nullopt;
    out.port = static_cast<std::uint16_t>(*value);
  }
  out.origin.reserve(out.scheme.size() + out.host.size() + 11);
  out.origin.append(out.scheme).append("://");
  if (bracketed) out.origin.push_back('[');
  out.origin.append(out.host);
  if (bracketed) out.origin.push_back(']');
  if (!port_text.empty() && out.port != default_port) out.origin.append(":").append(std::to_string(out.port));

  tail = tail.substr(0, tail.find('#'));
  out.target = cat({tail.empty() || tail.front() != '/' ? "/" : "", tail});
  return out;
}

std::optional<std::string> origin_of(std::string_view url) {
  auto parts = parse_origin(url);
  if (!parts) return std::nullopt;
  return std::move(parts->origin);
}

}  // namespace abide
