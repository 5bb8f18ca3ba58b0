// libFuzzer target for the event-stream usage reader (src/llm/usage.h): the
// first bytes pick the rule and the chunk sizes, the rest is the stream. The
// same bytes fed whole, byte by byte, and in the chosen chunks must read the
// same usage, the same error and the same number of events: a split never
// changes what a stream says. Amounts stay in bounds; error types are
// printable and short; a stated wait is within the cap.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "llm/json_fields.h"
#include "llm/usage.h"

namespace {

using abide::CostRule;
namespace detail = abide::detail;

void check(bool ok) {
  if (!ok) std::abort();
}

bool same(const detail::SseUsageReader& a, const detail::SseUsageReader& b) {
  if (a.usage() != b.usage() || a.events() != b.events() || a.dropped_events() != b.dropped_events()) return false;
  if (a.error().has_value() != b.error().has_value()) return false;
  if (!a.error()) return true;
  const auto& x = *a.error();
  const auto& y = *b.error();
  if (x.type != y.type || x.hint.has_value() != y.hint.has_value()) return false;
  return !x.hint || (x.hint->wait == y.hint->wait && x.hint->source == y.hint->source);
}

void check_reader(const detail::SseUsageReader& r) {
  if (const auto u = r.usage()) {
    for (const auto& c : *u) check(c.amount >= 0 && c.amount <= 3 * detail::kMaxUnitAmount);
  }
  if (const auto& e = r.error()) {
    check(!e->type.empty() && e->type.size() <= 64);
    for (const char c : e->type) check(static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f);
    if (e->hint) check(e->hint->wait >= abide::Duration::zero() && e->hint->wait <= detail::kMaxBodyHintWait);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const CostRule rule = (data[0] & 1) != 0 ? CostRule::kAnthropic : CostRule::kOpenAI;
  const std::uint8_t seed = data[1];
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);

  detail::SseUsageReader whole(rule);
  whole.feed(stream);
  check_reader(whole);

  detail::SseUsageReader bytes(rule);
  for (const char c : stream) bytes.feed(std::string_view(&c, 1));
  check(same(whole, bytes));

  // Chunk lengths from a small generator seeded by the input (0-length chunks included).
  detail::SseUsageReader chunks(rule);
  std::uint32_t state = seed * 2654435761u + 1;
  std::size_t at = 0;
  while (at < stream.size()) {
    state = state * 1103515245u + 12345u;
    const std::size_t len = (state >> 16) % 97;
    chunks.feed(stream.substr(at, len));
    at += len;
  }
  check(same(whole, chunks));
  return 0;
}
