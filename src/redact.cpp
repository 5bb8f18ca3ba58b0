#include "abide/redact.h"

#include <algorithm>
#include <array>

#include "abide/headers.h"
#include "ascii.h"

namespace abide {
namespace {

// Longer header values are cut (with "..."): a server can send kilobytes.
constexpr std::size_t kMaxShownHeaderValue = 1024;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii::to_lower(c);
  return out;
}

// Fragments of names that carry credentials, found anywhere in a name.
constexpr std::array<std::string_view, 15> kCredentialFragments{"auth",   "cookie", "key",       "token", "secret",
                                                                "passw",  "pwd",    "signature", "sess",  "credential",
                                                                "bearer", "jwt",    "csrf",      "xsrf",  "ticket"};
// Whole names only: inside other words ("design", "zip_code", "side",
// "compass") they are too common.
constexpr std::array<std::string_view, 4> kCredentialNames{"sig", "code", "sid", "pass"};

bool credential_name(std::string_view name) {
  const std::string n = lower(name);
  if (n == "idempotency-key") return false;  // not a credential, and useful to see
  // Quota fields name what they count ("x-ratelimit-remaining-tokens"), and
  // what they say is what a reader of the log needs.
  for (std::string_view quota : {"ratelimit", "x-ratelimit-", "x-rate-limit-", "anthropic-ratelimit-"})
    if (n.starts_with(quota)) return false;
  for (std::string_view f : kCredentialNames)
    if (n == f) return true;
  for (std::string_view f : kCredentialFragments)
    if (n.find(f) != std::string::npos) return true;
  return false;
}

int hex_value(char c) noexcept {
  if (ascii::is_digit(c)) return c - '0';
  const char l = ascii::to_lower(c);
  return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
}

// A parameter name as a server reads it: %XX decoded (so that "%61ccess_token"
// and "api%5Fkey" are recognised), '+' as a space.
std::string decoded_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 2 < name.size() && hex_value(name[i + 1]) >= 0 && hex_value(name[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_value(name[i + 1]) * 16 + hex_value(name[i + 2])));
      i += 2;
    } else {
      out.push_back(name[i] == '+' ? ' ' : name[i]);
    }
  }
  return out;
}

bool credential_param(std::string_view encoded_name) { return credential_name(decoded_name(encoded_name)); }

// The end of the run in s from i that holds none of the bytes in stops.
std::size_t run_end(std::string_view s, std::size_t i, std::string_view stops) {
  return std::min(s.find_first_of(stops, i), s.size());
}

// Scheme (RFC 3986 3.1): ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":".
// The length with its ':', or 0 when url does not start with one.
std::size_t scheme_length(std::string_view url) {
  if (url.empty() || !ascii::is_alpha(url[0])) return 0;
  for (std::size_t i = 1; i < url.size(); ++i) {
    const char c = url[i];
    if (c == ':') return i + 1;
    if (!ascii::is_alpha(c) && !ascii::is_digit(c) && c != '+' && c != '-' && c != '.') return 0;
  }
  return 0;
}

// A byte of a host name as hosts are named: unreserved or pct-encoded (RFC
// 3986), or >= 0x80 (an internationalised name, which parsers convert). The
// sub-delims a reg-name may also hold ("!$&'()*+,;=") name no real host, and
// a "host" holding them is more likely a path read as one ("x:/p;sid=...").
bool host_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || ascii::is_alpha(c) || ascii::is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
         c == '%';
}

// host[:port] with nothing in it that a parser would have to guess about: a
// reg-name or an IP literal in brackets, and a port of digits only.
bool plain_host_port(std::string_view hp) {
  std::size_t i = 0;
  if (!hp.empty() && hp[0] == '[') {
    const std::size_t close = hp.find(']');
    if (close == std::string_view::npos) return false;
    for (char c : hp.substr(1, close - 1))
      if (!ascii::is_alpha(c) && !ascii::is_digit(c) && std::string_view(":.%-_~").find(c) == std::string_view::npos)
        return false;
    i = close + 1;
  } else {
    while (i < hp.size() && hp[i] != ':') {
      if (!host_byte(hp[i])) return false;
      ++i;
    }
  }
  if (i == hp.size()) return true;
  if (hp[i] != ':') return false;
  return std::all_of(hp.begin() + static_cast<std::ptrdiff_t>(i) + 1, hp.end(), ascii::is_digit);
}

// Path parameters (";name=value" after a segment, as in "/a;jsessionid=X/b"):
// a credential's value is hidden up to the end of its segment.
void redact_path(std::string_view path, std::string& out) {
  std::size_t i = 0;
  while (i < path.size()) {
    const std::size_t semi = path.find(';', i);
    if (semi == std::string_view::npos) {
      out.append(path.substr(i));
      return;
    }
    out.append(path.substr(i, semi + 1 - i));
    i = semi + 1;
    const std::size_t name_end = run_end(path, i, "=;/");
    if (name_end < path.size() && path[name_end] == '=' && credential_param(path.substr(i, name_end - i))) {
      out.append(path.substr(i, name_end + 1 - i));
      out.append(kRedacted);
      i = run_end(path, name_end + 1, "/");
    }
  }
}

// The query and the fragment, from their '?' or '#': parameters split at '&'
// and ';', and a '?' or '#' starts a new run of them. A credential's value is
// hidden up to the next '&' (in the query also '#', where the fragment starts).
void redact_params(std::string_view rest, std::string& out) {
  bool in_query = true;
  std::size_t i = 0;
  while (i < rest.size()) {
    const char c = rest[i];
    if (c == '&' || c == ';' || c == '?' || c == '#') {
      if (c == '#') in_query = false;
      out.push_back(c);
      ++i;
      continue;
    }
    const std::size_t name_end = run_end(rest, i, "=&;?#");
    if (name_end < rest.size() && rest[name_end] == '=' && credential_param(rest.substr(i, name_end - i))) {
      out.append(rest.substr(i, name_end + 1 - i));
      out.append(kRedacted);
      i = run_end(rest, name_end + 1, in_query ? "&#" : "&");
    } else {
      const std::size_t end = run_end(rest, i, "&;?#");
      out.append(rest.substr(i, end - i));
      i = end;
    }
  }
}

}  // namespace

bool is_sensitive_header(std::string_view name) noexcept {
  try {
    return credential_name(name);
  } catch (...) {
    return true;  // out of memory: hide it
  }
}

std::string printable_header_value(std::string_view name, std::string_view value) {
  if (is_sensitive_header(name)) return std::string(kRedacted);
  const std::string n = lower(name);
  if (n == "location" || n == "content-location" || n == "referer")
    return abide::printable(redact_url(value), kMaxShownHeaderValue);
  return abide::printable(value, kMaxShownHeaderValue);
}

std::string redact_url(std::string_view url) {
  std::string out;
  out.reserve(url.size() + kRedacted.size());
  // The authority follows "scheme:" and its slashes (any number, either kind:
  // lenient parsers read "http:/host" and "http:\\host" as "http://host"),
  // or the two slashes of a scheme-relative URL. Without slashes, a parser
  // that guesses the scheme ("user:pw@host/path") reads it from the start. A
  // URL that starts with one slash is a path.
  const auto slash = [&](std::size_t i) { return i < url.size() && (url[i] == '/' || url[i] == '\\'); };
  const std::size_t scheme = scheme_length(url);
  std::size_t auth = scheme;
  while (slash(auth)) ++auth;
  if (scheme == 0 && auth == 1) {
    redact_path(url.substr(0, run_end(url, 0, "?#")), out);
    redact_params(url.substr(run_end(url, 0, "?#")), out);
    return out;
  }
  if (auth == scheme) auth = 0;
  out.append(url.substr(0, auth));
  const std::size_t auth_end = run_end(url, auth, "/\\?#");
  std::size_t host = auth;
  if (const std::size_t at = url.substr(auth, auth_end - auth).rfind('@'); at != std::string_view::npos)
    host = auth + at + 1;
  if (!plain_host_port(url.substr(host, auth_end - host))) {
    // A password holding '/', '?' or '#' unencoded ends the authority early
    // ("http://user:p#ss@host"): what follows cannot be told apart from it.
    out.append(kRedacted);
    return out;
  }
  if (host != auth) {
    out.append(kRedacted);
    out.push_back('@');
  }
  out.append(url.substr(host, auth_end - host));
  const std::size_t path_end = run_end(url, auth_end, "?#");
  redact_path(url.substr(auth_end, path_end - auth_end), out);
  redact_params(url.substr(path_end), out);
  return out;
}

}  // namespace abide
