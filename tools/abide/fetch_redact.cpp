#include "fetch_redact.h"

#include <array>
#include <cctype>

#include "abide/headers.h"

namespace abide::cli {
namespace {

constexpr std::string_view kRedacted = "[redacted]";
// Longer header values are cut (with "..."): a server can send kilobytes.
constexpr std::size_t kMaxShownHeaderValue = 1024;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Fragments of names that carry credentials.
bool credential_name(std::string_view name) {
  static constexpr std::array<std::string_view, 12> kFragments{
      "auth",    "cookie",     "key", "token", "secret", "password", "passwd", "signature",
      "session", "credential", "sig", "code"};
  const std::string n = lower(name);
  if (n == "idempotency-key") return false;  // not a credential, and useful to see
  for (std::string_view f : kFragments) {
    if (f == "sig" || f == "code") {
      // Bare "sig" and OAuth's authorization "code"; inside other words
      // ("design", "zip_code") they are too common.
      if (n == f) return true;
      continue;
    }
    if (n.find(f) != std::string::npos) return true;
  }
  return false;
}

// A parameter name as the server reads it: %XX decoded (so that
// "%61ccess_token" and "api%5Fkey" are recognised), '+' as a space.
std::string decoded_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    const char l = static_cast<char>(c | 0x20);
    return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
  };
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 2 < name.size() && hex(name[i + 1]) >= 0 && hex(name[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(name[i + 1]) * 16 + hex(name[i + 2])));
      i += 2;
    } else {
      out.push_back(name[i] == '+' ? ' ' : name[i]);
    }
  }
  return out;
}

// Copies a query or fragment (from its '?' or '#') to out, with the value of
// every credential-named parameter replaced. Parameters are split at '&' and
// ';', and a '?' or '#' starts a new run of them; everything else is copied.
void redact_params(std::string_view rest, std::string& out) {
  std::size_t i = 0;
  while (i < rest.size()) {
    const std::size_t end = std::min(rest.find_first_of("&;?#", i + 1), rest.size());
    // rest[i] is a separator (or the first byte); the parameter follows it.
    const bool sep = std::string_view("&;?#").find(rest[i]) != std::string_view::npos;
    const std::size_t start = sep ? i + 1 : i;
    if (sep) out.push_back(rest[i]);
    const std::string_view param = rest.substr(start, end - start);
    const std::size_t eq = param.find('=');
    if (eq != std::string_view::npos && credential_name(decoded_name(param.substr(0, eq)))) {
      out.append(param.substr(0, eq + 1));
      out.append(kRedacted);
    } else {
      out.append(param);
    }
    i = end;
  }
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
  return is_sensitive_header(name) ? std::string(kRedacted) : abide::printable(value, kMaxShownHeaderValue);
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
  // The query and the fragment are both read as parameters: OAuth's implicit
  // flow puts access_token and id_token in the fragment, and single-page apps
  // route with "#/path?name=value".
  const std::size_t q = std::min(url.find_first_of("?#", pos), url.size());
  out.append(url.substr(pos, q - pos));
  redact_params(url.substr(q), out);
  return out;
}

}  // namespace abide::cli
