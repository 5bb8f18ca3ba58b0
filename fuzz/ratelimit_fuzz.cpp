// libFuzzer target for the IETF RateLimit reader: the input, split at '\n',
// gives the values of RateLimit-Policy, RateLimit, RateLimit-Limit,
// RateLimit-Remaining, RateLimit-Reset, a second RateLimit line (so field
// lines get combined) and RateLimit-Partition. Invariants: never a negative
// count, cost or duration; a delta reset is never more than a year (a Unix
// time where a delay belongs is an instant near the Date, or ignored); a cost
// only from the provisional draft-12; low confidence only with a warning that
// says why; every observation names its form; a reading is deterministic; and
// most_restrictive() returns an index in range.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "abide/headers.h"
#include "abide/ratelimit.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::array<std::string_view, 7> kNames = {"RateLimit-Policy",    "RateLimit",       "RateLimit-Limit",
                                                    "RateLimit-Remaining", "RateLimit-Reset", "ratelimit",
                                                    "RateLimit-Partition"};

// The longest delta reset (ratelimit.h): a year of 366 days.
constexpr abide::Duration kYear = std::chrono::hours{24 * 366};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t opts = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  abide::HeaderList headers;
  for (std::size_t i = 0; i < kNames.size() && !rest.empty(); ++i) {
    const std::size_t nl = rest.find('\n');
    const std::string_view value = rest.substr(0, nl);
    if (!value.empty() || (opts & 1)) headers.add(kNames[i], value);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
  }
  abide::RateLimitOptions o;
  o.heuristic = (opts & 2) != 0;
  o.received = abide::WallTime{std::chrono::seconds{1767225600}};
  // The server's clock behind ours by up to 31 s, or ahead by up to 31 days
  // (the epoch rule judges an instant against the Date).
  if (opts & 4) o.server_date = o.received - std::chrono::seconds{opts >> 3};
  if ((opts & 6) == 6) o.server_date = o.received + std::chrono::hours{24 * (opts >> 3)};
  const auto a = abide::read_ratelimit(headers, o);
  const auto b = abide::read_ratelimit(headers, o);
  check(a.quota.size() == b.quota.size() && a.warnings == b.warnings);
  for (const auto& q : a.quota) {
    if (q.limit) check(*q.limit >= 0);
    if (q.remaining) check(*q.remaining >= 0);
    if (q.reset) check(*q.reset >= abide::Duration::zero());
    if (q.window) check(*q.window > abide::Duration::zero());
    if (q.reset && q.source != abide::QuotaSource::kDraftPolli00) check(*q.reset <= kYear);
    if (q.cost) check(*q.cost >= 0 && q.source == abide::QuotaSource::kDraft12Provisional);
    check(abide::is_ietf_draft(q.source) && q.profile.empty());
    if (q.confidence == abide::Confidence::kLow) check(!a.warnings.empty());
  }
  if (const auto i = abide::most_restrictive(a.quota)) check(*i < a.quota.size());
  else check(a.quota.empty());
  return 0;
}
