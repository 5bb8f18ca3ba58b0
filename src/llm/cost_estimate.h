// Internal: what a request to a language-model API will take from its token
// quotas, estimated before it is sent (issue 28), and the caller's own word
// for it (`Abide-Cost: tokens=1200`). Pure functions over bytes: no clock, no
// state, no exceptions for bad input. Not installed.
//
// The estimate must never be below what the server counts at admission, or
// the pacer lets through a request the server refuses. OpenAI documents its
// admission count as "the maximum of max_tokens and the estimated number of
// tokens based on the character count of your request"; Anthropic documents
// no character rule, so its estimate is generous (a token per 3 bytes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "abide/profiles.h"
#include "abide/quota.h"
#include "abide/result.h"

namespace abide::detail {

// Bodies longer than this are not read: the estimate falls back.
inline constexpr std::size_t kMaxEstimatedBody = 4 * 1024 * 1024;
// The reservation when a body cannot be read (not JSON, too large, missing
// what the rule needs): small, so that a request abide cannot price is paced
// like a modest one and never waits for the whole quota.
inline constexpr std::int64_t kFallbackTokens = 1000;
// The output reserved for an OpenAI request that names no maximum.
inline constexpr std::int64_t kDefaultMaxTokens = 4096;
// A maximum output beyond this is not a request any model serves: the body
// is treated as unreadable rather than reserving a quota no server has.
inline constexpr std::int64_t kMaxOutputTokens = 10'000'000;

struct CostEstimate {
  std::vector<UnitCost> costs;  // empty: the request costs no tokens (not a priced request)
  bool fallback = false;        // the body could not be read; costs are the small default
  std::string why;              // one line, printable ASCII, for logs and explanations
};

// The estimate for a POST of `body` to `path` (a request target: a query
// string is ignored) under `rule`. Priced paths: openai .../chat/completions,
// .../responses, .../completions, .../embeddings (Azure OpenAI's
// /openai/deployments/NAME/... included); anthropic .../v1/messages. Another
// path, or CostRule::kNone: no costs.
[[nodiscard]] CostEstimate estimate_costs(CostRule rule, std::string_view path, std::string_view body);
// The same for any method: only a POST is priced.
[[nodiscard]] CostEstimate estimate_costs(CostRule rule, std::string_view method, std::string_view path,
                                          std::string_view body);

// A caller's own statement of a request's cost: `tokens=1200, input-tokens=800`.
// Comma-separated unit=amount members (optional spaces and tabs around them),
// units lower-case [a-z0-9-] and at most 64 bytes, amounts whole numbers from
// 0 to 1e12, at most 8 members, each unit once.
inline constexpr std::size_t kMaxCostMembers = 8;
[[nodiscard]] Result<std::vector<UnitCost>, std::string> parse_cost_header(std::string_view value);

}  // namespace abide::detail
