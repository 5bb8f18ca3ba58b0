#include "fetch/fetch_redirect.h"

#include <curl/curl.h>

#include <array>
#include <memory>

#include "abide/engine.h"

namespace abide::cli {
namespace fetch_redirect {  // private to this file (the CLI is compiled in unity batches)

// A Location is server bytes: only this much of it is ever shown.
constexpr std::size_t kShownLocation = 200;

struct UrlDeleter {
  void operator()(CURLU* h) const noexcept { curl_url_cleanup(h); }
};
struct TextDeleter {
  void operator()(char* p) const noexcept { curl_free(p); }
};

bool is_credential(std::string_view name) noexcept {
  static constexpr std::array<std::string_view, 3> kNames = {"Authorization", "Cookie", "Proxy-Authorization"};
  for (std::string_view n : kNames)
    if (iequals(name, n)) return true;
  return false;
}

}  // namespace fetch_redirect

bool is_followed_redirect(int status) noexcept {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

Result<std::string, ErrorMessage> resolve_location(const std::string& base, std::string_view location) {
  using namespace fetch_redirect;
  const std::string shown = printable(location, kShownLocation);
  if (location.empty()) return fail(std::string("the redirect has an empty Location"));
  // libcurl takes C strings: an embedded NUL would cut the Location short.
  if (location.find('\0') != std::string_view::npos || base.find('\0') != std::string::npos)
    return fail("the redirect's Location \"" + shown + "\" is not a URL");
  const std::unique_ptr<CURLU, UrlDeleter> h(curl_url());
  if (h == nullptr) return fail(std::string("out of memory resolving a redirect"));
  if (curl_url_set(h.get(), CURLUPART_URL, base.c_str(), 0) != CURLUE_OK)
    return fail(std::string("the redirected request's URL cannot be parsed"));
  // With a base set, a relative reference is resolved against it.
  const std::string loc(location);
  if (curl_url_set(h.get(), CURLUPART_URL, loc.c_str(), 0) != CURLUE_OK)
    return fail("the redirect's Location \"" + shown + "\" is not a URL");
  char* scheme_raw = nullptr;
  const CURLUcode src = curl_url_get(h.get(), CURLUPART_SCHEME, &scheme_raw, 0);
  const std::unique_ptr<char, TextDeleter> scheme(scheme_raw);
  if (src != CURLUE_OK || scheme == nullptr ||
      (std::string_view(scheme.get()) != "http" && std::string_view(scheme.get()) != "https"))
    return fail("the redirect's Location \"" + shown + "\" is not an http or https URL");
  char* url_raw = nullptr;
  const CURLUcode urc = curl_url_get(h.get(), CURLUPART_URL, &url_raw, 0);
  const std::unique_ptr<char, TextDeleter> url(url_raw);
  if (urc != CURLUE_OK || url == nullptr) return fail("the redirect's Location \"" + shown + "\" is not a URL");
  return std::string(url.get());
}

Request redirected_request(const Request& previous, int status, const std::string& next_url,
                           const std::string& first_url, const HeaderList& headers,
                           const std::optional<WallTime>& not_before) {
  Request r;
  r.url = next_url;
  r.method = previous.method;
  r.body = previous.body;
  const bool to_get = (status == 303 && previous.method != "HEAD") ||
                      ((status == 301 || status == 302) && previous.method == "POST");
  if (to_get) {
    r.method = "GET";
    r.body.clear();
  }
  const auto first = origin_of(first_url);
  const auto next = origin_of(next_url);
  const bool same_origin = first && next && *first == *next;
  for (const Header& h : headers.lines()) {
    if (!same_origin && fetch_redirect::is_credential(h.name)) continue;
    r.headers.add(h.name, h.value);
  }
  r.idempotency_key = previous.idempotency_key;
  r.non_idempotent = previous.non_idempotent;
  r.deadline = previous.deadline;
  r.send_by = previous.send_by;
  r.not_before = not_before;
  return r;
}

}  // namespace abide::cli
