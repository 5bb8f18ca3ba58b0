// Hostile responses (issue 9): enormous values, enormous heads, absurd numbers.
// Everything abide reads comes from servers it does not control, so each case
// checks the same properties: no crash, a clear warning, results whose size is
// bounded (by the limits, or by the input itself, never more), and no reading
// that turns into "retry now". Speed is measured by the benchmarks, not here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "abide/backoff.h"
#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/planner.h"
#include "abide/signals.h"
#include "abide/testing/manual_clock.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr std::size_t kOneMegabyte = 1'000'000;
// No hostile response may produce more warnings than this, nor longer ones.
constexpr std::size_t kMaxWarnings = 64;
constexpr std::size_t kMaxWarningBytes = 1024;

class Hostile : public ::testing::Test {
 protected:
  ManualClock clock;  // 2026-01-01T00:00:00Z

  Signals see(int status, const HeaderList& h, ObserveOptions o = {}) {
    return observe(status, h, clock.wall_now(), clock.mono_now(), o);
  }

  // Reads a response head the way `abide explain` does, then observes it.
  Signals see_head(const std::string& text, ObserveOptions o = {}) {
    auto head = parse_response_head(text);
    EXPECT_TRUE(head) << (head ? "" : head.error().message);
    if (!head) return {};
    EXPECT_LE(head->headers.size(), HeadLimits{}.max_lines);
    EXPECT_LE(head->warnings.size(), 33u);  // 32 per-line warnings and a count
    return see(head->status, head->headers, o);
  }

  static bool warned(const Signals& s, std::string_view text) {
    for (const auto& w : s.warnings)
      if (w.find(text) != std::string::npos) return true;
    return false;
  }

  // The properties every hostile response must keep. `input_bytes`: the size
  // of what the server sent, the bound for everything kept from it.
  static void expect_bounded(const Signals& s, std::size_t input_bytes) {
    EXPECT_LE(s.warnings.size(), kMaxWarnings);
    std::size_t kept = 0;
    for (const auto& w : s.warnings) {
      EXPECT_LE(w.size(), kMaxWarningBytes) << w.substr(0, 200);
      kept += w.size();
    }
    // A field list holds at most 1024 members (RFC 9651 limits as abide sets them).
    EXPECT_LE(s.quota.size(), 2048u);
    for (const auto& q : s.quota) {
      kept += q.policy.size() + q.partition_key.value_or("").size();
      if (q.reset) {
        EXPECT_GE(*q.reset, Duration::zero()) << q.policy.substr(0, 40);
      }
      if (q.window) {
        EXPECT_GT(*q.window, Duration::zero()) << q.policy.substr(0, 40);
      }
      if (q.limit) {
        EXPECT_GE(*q.limit, 0);
      }
    }
    if (s.retry_after) {
      EXPECT_GE(s.retry_after->wait, Duration::zero());
    }
    EXPECT_LE(kept, input_bytes + kMaxWarnings * kMaxWarningBytes);
  }

  // What the planner makes of it when the response was a 429 (or a vendor's
  // limited status): never a retry without a wait.
  static Plan plan_for(const Signals& s, PlannerConfig config = {}) {
    SeededRandom rng(7);
    const Planner planner(config);
    PlanInput in{Outcome(s)};
    const Plan p = planner.decide(in, rng);
    EXPECT_NE(p.decision, Decision::kDone);
    if (p.decision == Decision::kRetry) {
      EXPECT_GT(p.wait, Duration::zero());
    }
    return p;
  }
};

std::string repeat(std::string_view piece, std::size_t n) {
  std::string out;
  out.reserve(piece.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += piece;
  return out;
}

// --- a day name that does not match its date -------------------------------------

TEST_F(Hostile, MismatchedDayNameWaitsForTheServersTimeInBothModes) {
  // 1 Jan 2026 is a Thursday; the server wrote "Fri" (or "Friday"), and an
  // hour after the receive time. The plan waits that hour, not a backoff.
  for (const char* value :
       {"Fri, 01 Jan 2026 01:00:00 GMT", "Friday, 01-Jan-26 01:00:00 GMT", "Fri Jan  1 01:00:00 2026"}) {
    for (const bool robust : {false, true}) {
      HeaderList h;
      h.add("Retry-After", value);
      ObserveOptions o;
      o.robust = robust;
      const Signals s = see(429, h, o);
      ASSERT_TRUE(s.retry_after) << value;
      EXPECT_FALSE(s.retry_after_rejected) << value;
      EXPECT_EQ(s.retry_after->wait, 1h) << value;
      EXPECT_TRUE(warned(s, "day name does not match")) << value;
      PlannerConfig config;
      config.backoff = BackoffPolicy(1s, 60s, Jitter::kNone);
      const Plan p = plan_for(s, config);
      EXPECT_EQ(p.basis, Basis::kRetryAfter) << value;
      EXPECT_GE(p.wait, 1h) << value;
    }
  }
}

// --- 1 MB header values ---------------------------------------------------------

TEST_F(Hostile, OneMegabyteRetryAfterOfDigitsSaturatesWithAWarning) {
  const std::string text = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: " + std::string(kOneMegabyte, '9') +
                           "\r\n\r\n";
  const Signals s = see_head(text);
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, kMaxDuration);
  EXPECT_TRUE(warned(s, "too large"));
  expect_bounded(s, text.size());
  const Plan p = plan_for(s);
  EXPECT_EQ(p.server_hint, kMaxDuration);
}

TEST_F(Hostile, OneMegabyteRetryAfterOfGarbageIsRejectedNotZero) {
  const std::string text = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: " + std::string(kOneMegabyte, 'x') +
                           "\r\n\r\n";
  const Signals s = see_head(text);
  EXPECT_FALSE(s.retry_after);
  EXPECT_TRUE(s.retry_after_rejected);
  EXPECT_TRUE(warned(s, "does not mean \"retry now\""));
  expect_bounded(s, text.size());
  const Plan p = plan_for(s);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kBackoff);
  EXPECT_TRUE(p.notes.has(PlanNote::kRetryAfterMalformed));
}

TEST_F(Hostile, OneMegabyteRateLimitFieldsAreIgnoredWithAWarning) {
  const std::string big(kOneMegabyte, '9');
  HeaderList h;
  h.add("RateLimit-Policy", "\"p\";q=10;w=" + big);
  h.add("RateLimit", "\"p\";r=0;t=" + big);
  const Signals s = see(429, h);
  EXPECT_TRUE(s.quota.empty());
  EXPECT_TRUE(warned(s, "RateLimit-Policy ignored"));
  EXPECT_TRUE(warned(s, "RateLimit ignored"));
  EXPECT_TRUE(warned(s, "too long"));
  expect_bounded(s, 2 * kOneMegabyte);
  plan_for(s);
}

TEST_F(Hostile, ValueBeyondTheHeadLimitIsSkippedAndTheRestIsRead) {
  // Longer than a field value may be (1 MiB): that line is dropped, with a warning.
  std::string text = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nRateLimit: ";
  text.append((std::size_t{1} << 20) + 1, 'a');
  text += "\r\n\r\n";
  auto head = parse_response_head(text);
  ASSERT_TRUE(head);
  EXPECT_FALSE(head->headers.first("ratelimit"));
  ASSERT_FALSE(head->warnings.empty());
  const Signals s = see(head->status, head->headers);
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 30s);
  expect_bounded(s, text.size());
}

// --- 10,000 header lines ------------------------------------------------------------

TEST_F(Hostile, TenThousandLinesBeforeRetryAfterDropItWithAWarningNeverZero) {
  // The line limit is 10,000: a Retry-After after 10,000 junk lines is not
  // kept, which is said, and the wait falls back to the local backoff.
  std::string text = "HTTP/1.1 429 Too Many Requests\r\n";
  for (int i = 0; i < 10'000; ++i) text += "X-Junk-" + std::to_string(i) + ": v\r\n";
  text += "Retry-After: 30\r\n\r\n";
  auto head = parse_response_head(text);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.size(), 10'000u);
  ASSERT_FALSE(head->warnings.empty());
  EXPECT_THAT(head->warnings.back(), HasSubstr("beyond the limit of 10000"));
  const Signals s = see(head->status, head->headers);
  EXPECT_FALSE(s.retry_after);
  expect_bounded(s, text.size());
  const Plan p = plan_for(s);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kBackoff);
}

TEST_F(Hostile, TenThousandRetryAfterLinesGiveTheLongestAndFewWarnings) {
  HeaderList h;
  h.reserve(10'000);
  for (int i = 0; i < 10'000; ++i) h.add("Retry-After", i % 2 == 0 ? std::to_string(i / 2) : "soon");
  const Signals s = see(429, h);
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 4999s);
  EXPECT_TRUE(warned(s, "conflicting"));
  EXPECT_TRUE(warned(s, "ignored an invalid Retry-After line"));
  EXPECT_TRUE(warned(s, "ignored 4992 more invalid Retry-After lines"));
  expect_bounded(s, 10'000 * 20);
  plan_for(s);
}

TEST_F(Hostile, TenThousandInvalidRetryAfterLinesAreOneRejection) {
  HeaderList h;
  for (int i = 0; i < 10'000; ++i) h.add("Retry-After", "later-" + std::to_string(i));
  const Signals s = see(429, h);
  EXPECT_FALSE(s.retry_after);
  EXPECT_TRUE(s.retry_after_rejected);
  EXPECT_EQ(s.warnings.size(), 1u);
  expect_bounded(s, 10'000 * 30);
  EXPECT_EQ(plan_for(s).basis, Basis::kBackoff);
}

TEST_F(Hostile, TenThousandRateLimitLinesAreIgnoredAsOneTooLongField) {
  // Field lines of one field are combined; the result exceeds the 64 KiB a
  // structured field may have, so the field is ignored as a whole.
  HeaderList h;
  for (int i = 0; i < 10'000; ++i) h.add("RateLimit", "\"p" + std::to_string(i) + "\";r=0;t=5");
  const Signals s = see(429, h);
  EXPECT_TRUE(s.quota.empty());
  EXPECT_TRUE(warned(s, "too long"));
  expect_bounded(s, 10'000 * 30);
  plan_for(s);
}

TEST_F(Hostile, TenThousandVendorLinesWithoutAProfileAreOneWarning) {
  HeaderList h;
  for (int i = 0; i < 10'000; ++i) h.add("X-RateLimit-Thing-" + std::to_string(i), "0");
  const Signals s = see(429, h);
  EXPECT_TRUE(s.quota.empty());
  EXPECT_EQ(s.uninterpreted.size(), 10'000u);  // bounded by the line limit of a head
  EXPECT_EQ(s.warnings.size(), 1u);
  EXPECT_THAT(s.warnings[0], HasSubstr("10000 vendor-style quota headers not interpreted"));
  expect_bounded(s, 10'000 * 30);
  plan_for(s);
}

// A header name is the server's bytes too: a warning that names it escapes it
// as values are escaped, so no terminal sequence reaches a log.
TEST_F(Hostile, AQuotaHeaderNameWithControlBytesIsEscapedInItsWarning) {
  HeaderList h;
  h.add("X-RateLimit-\x1b]0;owned\x07Left", "0");
  const Signals s = see(429, h);
  ASSERT_EQ(s.uninterpreted.size(), 1u);
  ASSERT_EQ(s.warnings.size(), 1u);
  for (const char c : s.warnings[0]) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << s.warnings[0];
  EXPECT_THAT(s.warnings[0], HasSubstr("X-RateLimit-"));
}

// --- 1,000 policies in one field -----------------------------------------------------

std::string policies(std::size_t n, std::string_view params) {
  std::string v;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) v += ", ";
    v += "\"p" + std::to_string(i) + "\";" + std::string(params);
  }
  return v;
}

TEST_F(Hostile, ThousandPoliciesInOneFieldAreReadAndBounded) {
  HeaderList h;
  h.add("RateLimit-Policy", policies(1000, "q=100;w=60"));
  h.add("RateLimit", policies(1000, "r=0;t=30"));
  const Signals s = see(429, h);
  ASSERT_EQ(s.quota.size(), 1000u);
  EXPECT_EQ(permitted_wait(s).quota, 30s);
  expect_bounded(s, 2 * 1000 * 20);
  const Plan p = plan_for(s);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_GE(p.wait, 30s);
}

TEST_F(Hostile, MorePoliciesThanAFieldMayHoldIgnoreTheFieldWithAWarning) {
  HeaderList h;
  h.add("Retry-After", "12");
  h.add("RateLimit-Policy", policies(2000, "q=100;w=60"));
  h.add("RateLimit", policies(2000, "r=0;t=30"));
  const Signals s = see(429, h);
  EXPECT_TRUE(s.quota.empty());
  EXPECT_TRUE(warned(s, "too many members"));
  ASSERT_TRUE(s.retry_after);  // the rest is still read
  EXPECT_EQ(s.retry_after->wait, 12s);
  expect_bounded(s, 2 * 2000 * 20);
  EXPECT_GE(plan_for(s).wait, 12s);
}

TEST_F(Hostile, ThousandPoliciesInADraft03LimitList) {
  std::string list = "10";
  for (int i = 1; i <= 1000; ++i) list += ", 10;w=" + std::to_string(i);
  HeaderList h;
  h.add("RateLimit-Limit", list);
  h.add("RateLimit-Remaining", "0");
  h.add("RateLimit-Reset", "7");
  const Signals s = see(429, h);
  EXPECT_FALSE(s.quota.empty());
  EXPECT_LE(s.quota.size(), 1001u);
  EXPECT_EQ(permitted_wait(s).quota, 7s);
  expect_bounded(s, list.size());
  EXPECT_GE(plan_for(s).wait, 7s);
}

// --- Retry-After of 10^30 ---------------------------------------------------------------

TEST_F(Hostile, RetryAfterOfTenToTheThirtySaturatesToALongWait) {
  HeaderList h;
  h.add("Retry-After", "1" + std::string(30, '0'));
  const Signals s = see(429, h);
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, kMaxDuration);
  EXPECT_TRUE(warned(s, "too large to represent; read as the longest wait"));
  expect_bounded(s, 64);

  // With the default (unbounded) acceptable wait the planner waits "forever";
  // with a bound, the request is deferred. Never a retry now.
  const Plan p = plan_for(s);
  EXPECT_EQ(p.server_hint, kMaxDuration);
  if (p.decision == Decision::kRetry) {
    EXPECT_EQ(p.wait, kMaxDuration);
  }
  PlannerConfig bounded;
  bounded.max_wait = 1h;
  const Plan d = plan_for(s, bounded);
  EXPECT_EQ(d.decision, Decision::kDeferred);
  EXPECT_EQ(d.reason, Reason::kHintTooLong);
  EXPECT_GT(d.wait, 1h);
}

TEST_F(Hostile, RetryAfterOfTenToTheThirtyInOtherSpellingsIsNeverZero) {
  for (const char* v :
       {"1e30", "1.0e30", "0x1p100", "1000000000000000000000000000000.5", "-1000000000000000000000000000000"}) {
    HeaderList h;
    h.add("Retry-After", v);
    const Signals s = see(429, h);
    expect_bounded(s, 64);
    EXPECT_FALSE(s.warnings.empty()) << v;
    if (s.retry_after) {
      EXPECT_EQ(s.retry_after->wait, kMaxDuration) << v;  // robust: a fraction rounds up
    } else {
      EXPECT_TRUE(s.retry_after_rejected) << v;
    }
    plan_for(s);
  }
}

// --- deeply repeated parameters -------------------------------------------------------

TEST_F(Hostile, ThousandsOfRepeatedParametersIgnoreTheFieldWithAWarning) {
  HeaderList h;
  h.add("RateLimit-Policy", "\"p\"" + repeat(";q=1", 5000) + ";w=60");
  h.add("RateLimit", "\"p\";r=0" + repeat(";t=1", 5000));
  const Signals s = see(429, h);
  EXPECT_TRUE(s.quota.empty());
  EXPECT_TRUE(warned(s, "too many parameters"));
  expect_bounded(s, 2 * 5000 * 4);
  EXPECT_EQ(plan_for(s).basis, Basis::kBackoff);
}

TEST_F(Hostile, RepeatedParametersWithinTheLimitKeepTheLastValue) {
  // RFC 9651: a repeated parameter key overwrites the earlier value.
  HeaderList h;
  h.add("RateLimit-Policy", "\"p\"" + repeat(";q=1", 200) + ";q=50;w=60");
  h.add("RateLimit", "\"p\"" + repeat(";r=9", 200) + ";r=0;t=40");
  const Signals s = see(429, h);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].limit, 50);
  EXPECT_EQ(s.quota[0].remaining, 0);
  EXPECT_EQ(permitted_wait(s).quota, 40s);
  expect_bounded(s, 2 * 200 * 4 + 64);
  EXPECT_GE(plan_for(s).wait, 40s);
}

TEST_F(Hostile, ThousandsOfRepeatedDictionaryKeysAreBounded) {
  // draft-07's Dictionary: repeated keys overwrite; too many members are refused.
  HeaderList h;
  h.add("RateLimit", repeat("limit=1, ", 5000) + "remaining=0, reset=9");
  const Signals s = see(429, h);
  EXPECT_TRUE(s.quota.empty());
  EXPECT_TRUE(warned(s, "RateLimit ignored"));
  expect_bounded(s, 5000 * 10);
  plan_for(s);
}

// --- a vendor profile with absurd numbers ----------------------------------------------

TEST_F(Hostile, GitHubProfileWithAbsurdNumbersWarnsAndNeverRetriesAtOnce) {
  ObserveOptions o;
  o.host = "api.github.com";
  HeaderList h;
  h.add("x-ratelimit-limit", "99999999999999999999999999");
  h.add("x-ratelimit-remaining", "0");
  h.add("x-ratelimit-used", "-99999999999999999999");
  h.add("x-ratelimit-reset", "1" + std::string(30, '0'));
  h.add("x-ratelimit-resource", "core");
  const Signals s = see(403, h, o);
  EXPECT_EQ(s.profile, "github");
  EXPECT_TRUE(s.limited);
  EXPECT_TRUE(warned(s, "x-ratelimit-limit"));
  EXPECT_TRUE(warned(s, "x-ratelimit-used"));
  EXPECT_TRUE(warned(s, "x-ratelimit-reset"));
  for (const auto& q : s.quota) EXPECT_FALSE(q.limit) << "an absurd limit is ignored, not wrapped";
  expect_bounded(s, 256);
  const Plan p = plan_for(s);
  EXPECT_EQ(p.decision, Decision::kRetry);  // limited, so retryable: after the local backoff
}

TEST_F(Hostile, GitHubProfileWithExtremeResetTimesIsNeverZero) {
  ObserveOptions o;
  o.host = "api.github.com";
  for (const char* reset :
       {"9223372036854775807", "-9223372036854775808", "0", "-1", "18446744073709551616", "1767225600.5", "1e10", ""}) {
    HeaderList h;
    h.add("x-ratelimit-limit", "60");
    h.add("x-ratelimit-remaining", "0");
    h.add("x-ratelimit-reset", reset);
    const Signals s = see(429, h, o);
    EXPECT_EQ(s.profile, "github") << reset;
    expect_bounded(s, 256);
    const Plan p = plan_for(s);
    EXPECT_EQ(p.decision, Decision::kRetry) << reset;
    EXPECT_GT(p.wait, Duration::zero()) << reset;
  }
}

TEST_F(Hostile, GitHubProfileWithAHugeResourceNameKeepsItBoundedByTheInput) {
  ObserveOptions o;
  o.host = "api.github.com";
  const std::string name(kOneMegabyte, 'r');
  HeaderList h;
  h.add("x-ratelimit-limit", "60");
  h.add("x-ratelimit-remaining", "0");
  h.add("x-ratelimit-reset", "1767225660");  // a minute after receipt
  h.add("x-ratelimit-resource", name);
  const Signals s = see(403, h, o);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(permitted_wait(s).quota, 60s);
  expect_bounded(s, name.size() + 128);
  EXPECT_GE(plan_for(s).wait, 60s);
}

// --- everything at once --------------------------------------------------------------------

TEST_F(Hostile, EverythingAtOnceInOneHead) {
  std::string text = "HTTP/1.1 429 Too Many Requests\r\n";
  text += "Retry-After: 1" + std::string(30, '0') + "\r\n";
  text += "Retry-After: soon\r\n";
  text += "Date: " + std::string(1000, '\x7f') + "\r\n";
  text += "RateLimit-Policy: " + policies(1000, "q=100;w=60") + "\r\n";
  text += "RateLimit: \"p\"" + repeat(";r=0", 300) + "\r\n";
  text += "X-RateLimit-Remaining: -99999999999999999999999\r\n";
  for (int i = 0; i < 5'000; ++i) text += "garbage line " + std::to_string(i) + "\r\n";
  text += "\r\n";
  const Signals s = see_head(text);
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, kMaxDuration);
  EXPECT_FALSE(s.warnings.empty());
  expect_bounded(s, text.size());
  plan_for(s);
}

}  // namespace
}  // namespace abide
