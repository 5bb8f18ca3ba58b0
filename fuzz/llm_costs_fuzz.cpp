// libFuzzer target for the token cost readers (src/llm): the first byte picks
// the rule and the path, the rest is a request body for estimate_costs, an
// answer body for usage_from_json, and an Abide-Cost value. Invariants beyond
// "never crash": amounts are never negative nor beyond their bounds, a body
// that cannot be read gets the small default (never more), Anthropic's tokens
// are its input and output summed, and every explanation is printable ASCII.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "llm/cost_estimate.h"
#include "llm/json_fields.h"
#include "llm/usage.h"

namespace {

using abide::CostRule;
using abide::UnitCost;
namespace detail = abide::detail;

void check(bool ok) {
  if (!ok) std::abort();
}

bool printable(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  }
  return true;
}

std::int64_t amount(const std::vector<UnitCost>& costs, std::string_view unit) {
  for (const auto& c : costs) {
    if (c.unit == unit) return c.amount;
  }
  return -1;
}

void check_estimate(CostRule rule, const detail::CostEstimate& e) {
  check(printable(e.why));
  for (const auto& c : e.costs) check(c.amount >= 0 && c.amount <= 4 * detail::kMaxUnitAmount);
  if (e.fallback) check(!e.costs.empty());
  if (rule == CostRule::kAnthropic && !e.costs.empty()) {
    check(e.costs.size() == 3);
    check(amount(e.costs, "tokens") == amount(e.costs, "input-tokens") + amount(e.costs, "output-tokens"));
    if (e.fallback) check(amount(e.costs, "input-tokens") == detail::kFallbackTokens);
  }
  if (rule == CostRule::kOpenAI && !e.costs.empty()) {
    check(e.costs.size() == 1 && e.costs[0].unit == "tokens");
    if (e.fallback) check(e.costs[0].amount == detail::kFallbackTokens);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static constexpr std::string_view kPaths[] = {
      "/v1/chat/completions", "/v1/responses",
      "/v1/completions",      "/v1/embeddings",
      "/v1/messages",         "/openai/deployments/d/chat/completions?api-version=1",
      "/v1/models",           "/v1/messages/count_tokens"};
  const std::uint8_t pick = data[0];
  const CostRule rule = (pick & 1) != 0 ? CostRule::kAnthropic : CostRule::kOpenAI;
  const std::string_view path = kPaths[(pick >> 1) % std::size(kPaths)];
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);

  const auto e = detail::estimate_costs(rule, path, body);
  check_estimate(rule, e);
  // The method only decides whether a request is priced.
  const auto post = detail::estimate_costs(rule, "POST", path, body);
  check(post.costs == e.costs && post.fallback == e.fallback);
  check(detail::estimate_costs(rule, "GET", path, body).costs.empty());
  check(detail::estimate_costs(CostRule::kNone, path, body).costs.empty());

  if (const auto u = detail::usage_from_json(rule, body)) {
    check(!u->empty());
    for (const auto& c : *u) check(c.amount >= 0 && c.amount <= 3 * detail::kMaxUnitAmount);
    if (rule == CostRule::kAnthropic) {
      check(amount(*u, "tokens") == amount(*u, "input-tokens") + amount(*u, "output-tokens"));
    }
  }

  const auto header = detail::parse_cost_header(body);
  if (header) {
    check(!header->empty() && header->size() <= detail::kMaxCostMembers);
    for (const auto& c : *header) {
      check(!c.unit.empty() && c.amount >= 0 && c.amount <= detail::kMaxUnitAmount);
      for (const char ch : c.unit) check((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-');
    }
  } else {
    check(!header.error().empty() && printable(header.error()));
  }
  return 0;
}
