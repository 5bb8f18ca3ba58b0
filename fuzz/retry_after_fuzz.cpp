// libFuzzer target for the Retry-After parser. Invariants beyond "never crash":
// a strict accept is a robust accept of the same value (with no deviation but
// a wrong day name); a strictly accepted delay comes only from digits (garbage
// never becomes "retry now"); delays and remaining intervals are never
// negative; several lines (the input split at '\n') resolve to the longest wait
// of the valid ones.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "abide/retry_after.h"

namespace {

using abide::Duration;
using abide::ParseMode;
using abide::RetryAfter;
using abide::WallTime;

void check(bool ok) {
  if (!ok) std::abort();
}

bool same(const RetryAfter& a, const RetryAfter& b) {
  if (a.kind != b.kind) return false;
  return a.kind == RetryAfter::Kind::kDelay ? a.delay == b.delay && a.saturated == b.saturated
                                            : a.date.seconds == b.date.seconds;
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const WallTime received{std::chrono::seconds{1795991400}};

  const auto strict = abide::parse_retry_after(text, received, ParseMode::kStrict);
  const auto robust = abide::parse_retry_after(text, received, ParseMode::kRobust);
  if (strict) {
    // The one deviation strict mode accepts is a wrong day name.
    abide::DateDeviations only_weekday;
    only_weekday.add(abide::DateDeviation::kWeekdayMismatch);
    check(!strict->rounded_up && (strict->date.deviations.empty() || strict->date.deviations == only_weekday));
    check(robust.has_value() && same(*strict, *robust) && !robust->rounded_up &&
          robust->date.deviations == strict->date.deviations);
    if (strict->kind == RetryAfter::Kind::kDelay) {
      const std::string_view digits = trim(text);
      check(!digits.empty());
      for (const char c : digits) check(c >= '0' && c <= '9');
    }
  } else {
    check(strict.error().offset <= size);
    check(!strict.error().message().empty());
  }
  for (const auto* r : {&strict, &robust}) {
    if (!*r) continue;
    const RetryAfter& v = **r;
    check(v.delay >= Duration::zero());
    check(abide::remaining(v, received) >= Duration::zero());
    check(abide::remaining(v, received, received - std::chrono::hours{1}) >= abide::remaining(v, received));
    check(v.kind != RetryAfter::Kind::kDelay || !v.saturated || v.delay == abide::kMaxDuration);
  }
  if (robust && robust->kind == RetryAfter::Kind::kDelay && !robust->rounded_up) check(strict.has_value());

  // The same bytes as several field lines.
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= size && lines.size() < 64; ++i) {
    if (i == size || text[i] == '\n') {
      lines.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  const auto all = abide::parse_retry_after_lines(lines, received, ParseMode::kRobust);
  bool any_valid = false;
  for (const auto line : lines) {
    const auto one = abide::parse_retry_after(line, received, ParseMode::kRobust);
    if (!one) continue;
    any_valid = true;
    check(all.has_value() && abide::remaining(all->value, received) >= abide::remaining(*one, received));
  }
  check(any_valid == all.has_value());
  return 0;
}
