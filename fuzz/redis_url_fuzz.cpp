// libFuzzer target for the Redis location parser (parse_redis_url, in
// src/redis/url.cpp, which needs no hiredis). Invariants beyond "never crash":
// an accepted location has a port from 1 to 65535 and either an absolute
// socket path that fits sockaddr_un or a host; its description parses back to
// the same place; a rejection has a message without control bytes; and a
// password put in the location appears in neither the description nor a
// rejection's message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "abide/redis_store.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// A password no input is likely to hold by chance; inputs that do are skipped.
constexpr std::string_view kSecret = "Zq8secretPW3x";
// sockaddr_un's sun_path is 108 bytes on Linux, one for the NUL.
constexpr std::size_t kMaxSocketPath = 107;

bool printable_ascii(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

void check_endpoint(const abide::RedisEndpoint& e) {
  check(e.port >= 1);
  check(!e.prefix.empty());
  const std::string shown = e.describe();
  if (!e.unix_socket.empty()) {
    check(e.unix_socket.front() == '/' && e.unix_socket.size() <= kMaxSocketPath);
    check(shown == "unix:" + e.unix_socket);
  } else {
    check(!e.host.empty());
    check(shown.rfind("redis://", 0) == 0);
  }
  // What describe() prints is a location the parser reads back to the same
  // place. Not yet for two socket paths: one that starts with "//" ("unix:"
  // + "//x" reads as unix:// with an authority), and one with a '?' (the bare
  // /path form keeps it in the path; "unix:/path?..." reads a query there),
  // nor for a host with a '[' (taken from inside brackets, it prints unclosed).
  if (e.unix_socket.starts_with("//") || e.unix_socket.find('?') != std::string::npos) return;
  if (e.host.find('[') != std::string::npos) return;
  const auto again = abide::parse_redis_url(shown);
  check(again.has_value());
  check(again->unix_socket == e.unix_socket);
  if (e.unix_socket.empty()) check(again->host == e.host && again->port == e.port);
}

// Parses `url`; when `secret_inside`, the password must not leak.
void parse(std::string_view url, bool secret_inside) {
  const auto r = abide::parse_redis_url(url);
  if (!r) {
    check(!r.error().empty());
    check(printable_ascii(r.error()));
    if (secret_inside) check(r.error().find(kSecret) == std::string::npos);
    return;
  }
  check_endpoint(*r);
  if (secret_inside) check(r->describe().find(kSecret) == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  parse(text, false);
  // The same bytes after credentials, in both forms with an authority.
  if (text.find(kSecret) != std::string_view::npos) return 0;
  for (const std::string_view scheme : {"redis://", "unix://"}) {
    std::string url(scheme);
    url.append("u:").append(kSecret).append("@").append(text);
    parse(url, true);
  }
  return 0;
}
