// libFuzzer target for the waits stated in a limited answer's body
// (src/body_hint.h): the first byte picks the kinds and their order, the rest
// is the body. A hint's wait is never negative nor beyond the cap, its source
// is short printable ASCII naming where it came from, and the kinds together
// answer exactly what the first kind that reads anything answers alone.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "body_hint.h"

namespace {

using abide::BodyHintKind;
namespace detail = abide::detail;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_hint(const detail::BodyHint& h) {
  check(h.wait >= abide::Duration::zero() && h.wait <= detail::kMaxBodyHintWait);
  check(!h.source.empty() && h.source.size() <= 100 && h.source.rfind("body: ", 0) == 0);
  for (const char c : h.source) check(static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f);
}

bool same(const std::optional<detail::BodyHint>& a, const std::optional<detail::BodyHint>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->wait == b->wait && a->source == b->source);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool google_first = (data[0] & 1) != 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::array<BodyHintKind, 1> google = {BodyHintKind::kGoogleRetryInfo};
  const std::array<BodyHintKind, 1> sentence = {BodyHintKind::kTryAgainSentence};
  const std::array<BodyHintKind, 2> both = google_first ? std::array{BodyHintKind::kGoogleRetryInfo,
                                                                     BodyHintKind::kTryAgainSentence}
                                                        : std::array{BodyHintKind::kTryAgainSentence,
                                                                     BodyHintKind::kGoogleRetryInfo};
  const auto g = detail::read_body_hint(google, body);
  const auto s = detail::read_body_hint(sentence, body);
  const auto b = detail::read_body_hint(both, body);
  for (const auto* h : {&g, &s, &b}) {
    if (*h) check_hint(**h);
  }
  const auto& first = google_first ? g : s;
  const auto& second = google_first ? s : g;
  check(same(b, first ? first : second));
  check(!detail::read_body_hint({}, body));
  return 0;
}
