#include "request_rules.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>

#include "ascii.h"

namespace abide::curl_detail {

bool steers_connection(std::string_view name) noexcept {
  for (std::string_view f : {"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Expect", "TE",
                             "Keep-Alive", "Proxy-Connection"}) {
    if (ascii::iequals(name, f)) return true;
  }
  return false;
}

bool path_as_libcurl_sends(std::string_view target) noexcept {
  const std::string_view path = target.substr(0, target.find('?'));
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (static_cast<unsigned char>(path[i]) >= 0x80) return false;
    if (path[i] == '%' && i + 2 < path.size() && path[i + 1] == '2' && ascii::to_lower(path[i + 2]) == 'e') return false;
    if (path[i] == '.' && (i == 0 || path[i - 1] == '/')) {
      const std::string_view rest = path.substr(i);
      if (rest == "." || rest == ".." || rest.starts_with("./") || rest.starts_with("../")) return false;
    }
  }
  for (char c : target) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// As set_method in easy_attempt.cpp sets it up.
bool sends_body(const engine::Request& r) noexcept {
  return r.method != "HEAD" && (!r.body.empty() || r.method == "POST");
}

std::optional<std::string> request_fields(const engine::Request& request, const TransferLimits& limits,
                                          std::string& length, std::vector<SentField>& out) {
  out.clear();
  if (!limits.user_agent.empty() && request.headers.count("User-Agent") == 0)
    out.push_back({"User-Agent", limits.user_agent});
  if (limits.default_fields && request.headers.count("Accept") == 0) out.push_back({"Accept", "*/*"});
  for (const Header& h : request.headers.lines()) {
    if (!valid_token(h.name)) return "invalid header name \"" + printable(h.name) + "\"";
    if (has_ctl(h.value)) return "header " + h.name + " contains CR, LF or NUL";
    out.push_back({h.name, h.value});
  }
  if (request.idempotency_key && request.headers.count("Idempotency-Key") == 0) {
    if (has_ctl(*request.idempotency_key) || request.idempotency_key->empty()) return "invalid idempotency key";
    out.push_back({"Idempotency-Key", *request.idempotency_key});
  }
  if (sends_body(request)) {
    length = std::to_string(request.body.size());
    out.push_back({"Content-Length", length});
    if (limits.default_fields && request.headers.count("Content-Type") == 0)
      out.push_back({"Content-Type", "application/x-www-form-urlencoded"});
  }
  return std::nullopt;
}

namespace {

// The socket address of an IP literal `host` (IPv6 without brackets) and
// `port`; false when `host` is not one.
bool ip_address(const std::string& host, std::uint16_t port, bool v6, sockaddr_storage& addr,
                socklen_t& len) noexcept {
  addr = {};
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    if (::inet_pton(AF_INET6, host.c_str(), &a->sin6_addr) != 1) return false;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
    return true;
  }
  auto* a = reinterpret_cast<sockaddr_in*>(&addr);
  if (::inet_pton(AF_INET, host.c_str(), &a->sin_addr) != 1) return false;
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  len = sizeof(sockaddr_in);
  return true;
}

}  // namespace

std::optional<OwnTarget> own_target(const engine::Request& request, std::string_view scheme,
                                    std::uint16_t default_port) {
  auto origin = parse_origin(request.url);
  if (!origin || origin->scheme != scheme) return std::nullopt;
  const std::string_view url = request.url;
  const std::size_t start = url.find("://") + 3;
  const std::string_view authority = url.substr(start, url.find_first_of("/?#", start) - start);
  if (authority.find('@') != std::string_view::npos) return std::nullopt;
  if (!path_as_libcurl_sends(origin->target)) return std::nullopt;
  for (const Header& h : request.headers.lines()) {
    if (steers_connection(h.name)) return std::nullopt;
  }
  OwnTarget t;
  const bool v6 = origin->origin.find('[') != std::string::npos;
  if (!ip_address(origin->host, origin->port, v6, t.addr, t.addr_len)) return std::nullopt;
  t.ip = origin->host;
  // (Appended, not "[" + host: GCC 12 at -O3 warns falsely on that form.)
  if (v6) t.authority += '[';
  t.authority += origin->host;
  if (v6) t.authority += ']';
  if (origin->port != default_port) t.authority += ":" + std::to_string(origin->port);
  t.shown = origin->host + " port " + std::to_string(origin->port);
  t.path = std::move(origin->target);
  t.pool = std::move(origin->origin);
  return t;
}

bool own_candidate(std::string_view url, std::string_view prefix) noexcept {
  if (url.size() <= prefix.size() || !ascii::istarts_with(url, prefix)) return false;
  return ascii::is_digit(url[prefix.size()]) || url[prefix.size()] == '[';
}

bool any_in_environment(std::initializer_list<const char*> names) noexcept {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return true;
  }
  return false;
}

std::optional<Transport::End> settle(engine::Machine& machine, const BodyTarget& body, const AttemptEnd& how) {
  if (how.withheld) {
    machine.withdraw();
    return Transport::End::kReported;
  }
  if (how.threw) {
    if (body.keep != nullptr) body.keep->clear();
    machine.failed("out of memory while reading the response", true);
    return Transport::End::kReported;
  }
  if (how.decided) {
    if (body.keep != nullptr) body.keep->clear();
    return Transport::End::kReported;
  }
  if (how.complete) {
    if (!how.reported) {
      machine.failed("no response head", true);
      return Transport::End::kReported;
    }
    // A kept body reaches the machine whole (it only counts it: no sink).
    if (body.keep != nullptr && !body.keep->empty() && !machine.body(*body.keep)) return Transport::End::kReported;
    return Transport::End::kComplete;
  }
  if (body.keep != nullptr) body.keep->clear();  // never half a body
  if (how.stopped) {
    if (how.reported) machine.cancel(true);
    else machine.failed("cancelled", how.sent);
    return Transport::End::kReported;
  }
  return std::nullopt;
}

std::string curl_error(CURLcode code, std::string_view detail) {
  std::string error = curl_easy_strerror(code);
  if (!detail.empty()) error += ": " + printable(detail, CURL_ERROR_SIZE);
  return error;
}

std::chrono::steady_clock::time_point after(std::chrono::steady_clock::time_point now,
                                            std::chrono::nanoseconds d) noexcept {
  if (d <= std::chrono::nanoseconds::zero()) return std::chrono::steady_clock::time_point::max();
  if (d > std::chrono::hours{24 * 365}) return std::chrono::steady_clock::time_point::max();
  return now + d;
}

std::string errno_text(int e) {
  char buf[128];
  return std::string(::strerror_r(e, buf, sizeof buf));
}

}  // namespace abide::curl_detail
