#include "fetch/shown_url.h"

#include <curl/curl.h>

#include <memory>
#include <string>

#include "abide/redact.h"

namespace abide::cli {
namespace shown_url_detail {  // private to this file (the tool is compiled in one unit)

struct UrlDeleter {
  void operator()(CURLU* h) const noexcept { curl_url_cleanup(h); }
};
struct TextDeleter {
  void operator()(char* p) const noexcept { curl_free(p); }
};

// True when libcurl's reading of the URL has this part, non-empty.
bool has_part(CURLU* h, CURLUPart part) {
  char* raw = nullptr;
  const CURLUcode rc = curl_url_get(h, part, &raw, 0);
  const std::unique_ptr<char, TextDeleter> text(raw);
  return rc == CURLUE_OK && text != nullptr && text.get()[0] != '\0';
}

}  // namespace shown_url_detail

std::string shown_url(std::string_view url) {
  using namespace shown_url_detail;
  // libcurl takes a C string: an embedded NUL would cut it short.
  if (url.find('\0') != std::string_view::npos) return std::string(kUnparsedUrl);
  const std::unique_ptr<CURLU, UrlDeleter> h(curl_url());
  if (h == nullptr) return std::string(kUnparsedUrl);
  // No flags, as abide::Client reads a URL before it sends anything: a scheme
  // is required, spaces and control bytes are refused.
  const std::string text(url);
  if (curl_url_set(h.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK) return std::string(kUnparsedUrl);
  std::string shown = redact_url(url);
  const bool userinfo = has_part(h.get(), CURLUPART_USER) || has_part(h.get(), CURLUPART_PASSWORD) ||
                        has_part(h.get(), CURLUPART_OPTIONS);
  if (userinfo && shown.find(std::string(kRedacted) + "@") == std::string::npos) return std::string(kUnparsedUrl);
  return shown;
}

}  // namespace abide::cli
