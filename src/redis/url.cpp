// parse_redis_url and RedisEndpoint::describe: where Redis listens, from the
// forms users write, and back to a form safe to print.
//
// Forms: see abide/redis_store.h.
//
// Messages name the part that is wrong and may quote the host, port, path or
// parameter name, never what comes before the '@' (the credentials).
#include <sys/un.h>

#include <cctype>
#include <charconv>
#include <optional>
#include <string>

#include "abide/headers.h"
#include "abide/redis_store.h"

namespace abide {
namespace {

using UrlResult = Result<RedisEndpoint, std::string>;

constexpr std::size_t kMaxUrlBytes = 4096;
// sun_path holds the path and its terminating NUL.
constexpr std::size_t kMaxSocketPathBytes = sizeof(sockaddr_un{}.sun_path) - 1;

UrlResult failure(std::string message) { return UrlResult(fail(std::move(message))); }

// A piece of the location, quoted in a message: bounded and escaped.
// (Built in place: GCC 12 at -O3 misreads `"\"" + std::string` as an
// overlapping copy, -Wrestrict.)
std::string quoted(std::string_view piece) {
  std::string s = printable(piece, 64);
  s.insert(s.begin(), '"');
  s.push_back('"');
  return s;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

std::optional<std::string> percent_decode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (s.size() - i < 3) return std::nullopt;
    const int hi = hex(s[i + 1]);
    const int lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

// host[:port] or [v6]:port, into the endpoint.
std::optional<std::string> parse_host_port(std::string_view authority, RedisEndpoint& e) {
  std::string_view host = authority;
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    if (close == std::string_view::npos) return "unclosed '[' in the Redis host " + quoted(authority);
    const std::string_view after = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return "unexpected " + quoted(after) + " after the Redis host [" + printable(host) + "]";
      port = after.substr(1);
    }
  } else if (const auto colon = host.find(':'); colon != std::string_view::npos) {
    if (host.find(':', colon + 1) != std::string_view::npos) {
      return "an IPv6 Redis host goes in brackets: redis://[" + printable(host) + "]:port";
    }
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (host.empty()) return std::string("missing Redis host (redis://HOST[:PORT])");
  e.host = std::string(host);
  if (!port.empty()) {  // "host:" keeps the default port, as in any URL
    unsigned value = 0;
    const auto r = std::from_chars(port.data(), port.data() + port.size(), value);
    if (r.ec != std::errc{} || r.ptr != port.data() + port.size() || value == 0 || value > 65535) {
      return "bad Redis port " + quoted(port) + ": expected a number from 1 to 65535";
    }
    e.port = static_cast<std::uint16_t>(value);
  }
  return std::nullopt;
}

std::optional<std::string> check_socket_path(std::string_view path) {
  if (path.empty() || path == "/") return std::string("missing unix socket path (unix:///path/to/socket)");
  if (path.front() != '/') return "the unix socket path must be absolute: " + quoted(path);
  if (path.size() > kMaxSocketPathBytes) {
    return "unix socket path longer than " + std::to_string(kMaxSocketPathBytes) + " bytes: " + quoted(path);
  }
  return std::nullopt;
}

// ?prefix=P[&...]: the only parameter there is.
std::optional<std::string> parse_query(std::string_view query, RedisEndpoint& e) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (param.empty()) continue;
    const std::string_view name = param.substr(0, param.find('='));
    if (name == "prefix" && name.size() == param.size()) return std::string("?prefix needs a value: ?prefix=P");
    if (name != "prefix") {
      // The name only: a value could be a secret put in the wrong place.
      return "unknown parameter " + quoted(name) + " in the Redis location (there is only prefix=)";
    }
    auto prefix = percent_decode(param.substr(name.size() + 1));
    if (!prefix)
      return std::string("bad percent-encoding in the Redis key prefix (a '%' not followed by two hex digits)");
    if (!prefix->empty()) e.prefix = std::move(*prefix);
  }
  return std::nullopt;
}

}  // namespace

std::string RedisEndpoint::describe() const {
  if (!unix_socket.empty()) return "unix:" + unix_socket;
  const bool v6 = host.find(':') != std::string::npos;
  return "redis://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

UrlResult parse_redis_url(std::string_view url) {
  RedisEndpoint e;
  if (url.empty()) return failure("empty Redis location");
  if (url.size() > kMaxUrlBytes)
    return failure("Redis location longer than " + std::to_string(kMaxUrlBytes) + " bytes");
  for (std::size_t i = 0; i < url.size(); ++i) {
    const auto u = static_cast<unsigned char>(url[i]);
    if (u <= 0x20 || u == 0x7f) {
      return failure(std::string(u == 0x20 ? "space" : "control character") + " at byte " + std::to_string(i) +
                     " of the Redis location");
    }
  }
  if (url.front() == '/') {
    if (auto why = check_socket_path(url)) return failure(std::move(*why));
    e.unix_socket = std::string(url);
    return e;
  }
  std::string_view rest;
  bool unix_scheme = false;
  bool has_authority = true;  // "unix:/path" has none: all of it is the path
  if (starts_with_ci(url, "redis://")) {
    rest = url.substr(8);
  } else if (starts_with_ci(url, "unix://")) {
    unix_scheme = true;
    rest = url.substr(7);
  } else if (starts_with_ci(url, "unix:")) {
    unix_scheme = true;
    has_authority = false;
    rest = url.substr(5);
  } else if (starts_with_ci(url, "rediss://")) {
    return failure("rediss:// (Redis over TLS) is not supported: use redis:// or a unix socket");
  } else {
    return failure("unsupported Redis location: expected redis://HOST[:PORT][/PREFIX], unix:///PATH or /PATH");
  }
  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const std::size_t slash = has_authority ? rest.find('/') : std::size_t{0};
  std::string_view authority = rest.substr(0, slash);
  const std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    auto user = percent_decode(userinfo.substr(0, colon));
    auto pass = colon == std::string_view::npos ? std::optional<std::string>{std::string{}}
                                                : percent_decode(userinfo.substr(colon + 1));
    if (!user || !pass) return failure("bad percent-encoding in the Redis user or password");
    e.user = std::move(*user);
    e.password = std::move(*pass);
  }
  // redis://[[user]:password@]unix:/path is a socket too: read as a host
  // named "unix" with an empty port and a prefix, it would silently connect
  // somewhere else than meant.
  if (!unix_scheme && authority.size() == 5 && starts_with_ci(authority, "unix:") && !path.empty()) {
    unix_scheme = true;
    authority = {};
  }
  if (unix_scheme) {
    if (!authority.empty() && authority != "localhost") {
      return failure("a unix socket location names no host, found " + quoted(authority) +
                     " (unix:///path, three slashes)");
    }
    if (auto why = check_socket_path(path)) return failure(std::move(*why));
    e.unix_socket = std::string(path);
  } else {
    if (auto why = parse_host_port(authority, e)) return failure(std::move(*why));
    if (path.size() > 1) {
      auto prefix = percent_decode(path.substr(1));
      if (!prefix)
        return failure("bad percent-encoding in the Redis key prefix (a '%' not followed by two hex digits)");
      e.prefix = std::move(*prefix);
    }
  }
  if (auto why = parse_query(query, e)) return failure(std::move(*why));
  return e;
}

}  // namespace abide
