// libFuzzer target for redaction. Invariants beyond "never crash": a password
// in a URL's userinfo never shows, whatever follows it (when the authority
// cannot be read, nothing after the scheme shows); a credential header's value
// never shows; and what is shown of any header is printable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "abide/redact.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::string_view kPassword = "ZqPasswordQz";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const std::string plain = abide::redact_url(input);
  check(plain.size() <= input.size() * (abide::kRedacted.size() + 1) + abide::kRedacted.size() + 16);

  if (input.find(kPassword) == std::string_view::npos) {
    for (std::string_view scheme : {"https://", "http:/", ""}) {
      const std::string url = std::string(scheme) + "user:" + std::string(kPassword) + "@" + std::string(input);
      check(abide::redact_url(url).find(kPassword) == std::string::npos);
    }
  }

  check(abide::printable_header_value("Authorization", input) == abide::kRedacted);
  check(abide::printable_header_value("x-api-key", input) == abide::kRedacted);
  for (std::string_view name : {"Location", "X-Anything"}) {
    for (unsigned char c : abide::printable_header_value(name, input)) check(c >= 0x20 && c != 0x7f);
  }
  return 0;
}
