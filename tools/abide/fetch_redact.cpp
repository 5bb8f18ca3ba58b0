#include "fetch_redact.h"

#include <array>
#include <cctype>

namespace abide::cli {
namespace {

constexpr std::string_view kRedacted = "[redacted]";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Fragments of names that carry credentials.
bool credential_name(std::string_view name) {
  static constexpr std::array<std::string_view, 11> kFragments{
      "auth", "cookie", "key", "token", "secret", "password", "passwd", "signature", "session", "credential", "sig"};
  const std::string n = lower(name);
  if (n == "idempotency-key") return false;  // not a credential, and useful to see
  for (std::string_view f : kFragments) {
    if (f == "sig") {
      if (n == "sig") return true;  // a bare "sig" parameter; "sig" inside other words is too common
      continue;
    }
    if (n.find(f) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

bool is_sensitive_header(std::string_view name) noexcept {
  try {
    return credential_name(name);
  } catch (...) {
    return true;
  }
}

std::string printable_header_value(std::string_view name, std::string_view value) {
  return is_sensitive_header(name) ? std::string(kRedacted) : std::string(value);
}

std::string redact_url(std::string_view url) {
  std::string out;
  // user:password@ in the authority.
  const auto scheme_end = url.find("://");
  std::size_t pos = 0;
  if (scheme_end != std::string_view::npos) {
    const std::size_t auth_start = scheme_end + 3;
    const std::size_t auth_end = std::min(url.find_first_of("/?#", auth_start), url.size());
    const std::size_t at = url.substr(auth_start, auth_end - auth_start).rfind('@');
    out.append(url.substr(0, auth_start));
    if (at != std::string_view::npos) {
      out.append(kRedacted);
      out.push_back('@');
      pos = auth_start + at + 1;
    } else {
      pos = auth_start;
    }
  }
  const std::size_t q = url.find('?', pos);
  if (q == std::string_view::npos) {
    out.append(url.substr(pos));
    return out;
  }
  out.append(url.substr(pos, q + 1 - pos));
  const std::size_t frag = std::min(url.find('#', q), url.size());
  std::string_view query = url.substr(q + 1, frag - q - 1);
  bool first = true;
  while (true) {
    const std::size_t amp = query.find('&');
    std::string_view param = query.substr(0, amp);
    if (!first) out.push_back('&');
    first = false;
    const std::size_t eq = param.find('=');
    if (eq != std::string_view::npos && credential_name(param.substr(0, eq))) {
      out.append(param.substr(0, eq + 1));
      out.append(kRedacted);
    } else {
      out.append(param);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  out.append(url.substr(frag));
  return out;
}

}  // namespace abide::cli
