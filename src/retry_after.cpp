// Retry-After (RFC 9110 section 10.2.3): delay-seconds or HTTP-date.
#include "abide/retry_after.h"

#include <limits>

#include "abide/headers.h"
#include "ascii.h"
#include "concat.h"
#include "decimal.h"

namespace abide {
namespace {

// Whole seconds at and above which a delay no longer fits in Duration; such a
// delay saturates to kMaxDuration (see seconds_saturating).
constexpr std::uint64_t kSaturatingSeconds = static_cast<std::uint64_t>(Duration::max().count() / 1'000'000'000);

// Invalid lines described one by one in the warnings; more are only counted.
constexpr std::size_t kMaxIgnoredLineWarnings = 8;

constexpr unsigned digit(char c) noexcept { return static_cast<unsigned>(static_cast<unsigned char>(c)) - '0'; }

constexpr std::uint32_t u32(std::size_t v) noexcept {
  return v > std::numeric_limits<std::uint32_t>::max() ? std::numeric_limits<std::uint32_t>::max()
                                                       : static_cast<std::uint32_t>(v);
}

RetryAfterError error_at(RetryAfterErrorCode code, std::size_t at) noexcept {
  return RetryAfterError{code, u32(at), DateError{}};
}

// a - b for instants, saturating.
Duration difference(WallTime a, WallTime b) noexcept {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a.time_since_epoch().count(), b.time_since_epoch().count(), &r)) {
    return a > b ? Duration::max() : Duration::min();
  }
  return Duration{r};
}

bool same_value(const RetryAfter& a, const RetryAfter& b) noexcept {
  if (a.kind != b.kind) return false;
  return a.kind == RetryAfter::Kind::kDelay ? a.delay == b.delay : a.date.seconds == b.date.seconds;
}

// A field value for a warning: quoted, made printable, at most 64 bytes.
std::string quoted(std::string_view v) { return detail::cat({"\"", printable(v, 64), "\""}); }

}  // namespace

std::string_view to_string(RetryAfterErrorCode c) noexcept {
  switch (c) {
    case RetryAfterErrorCode::kEmpty: return "empty value";
    case RetryAfterErrorCode::kNegative: return "negative delay";
    case RetryAfterErrorCode::kSigned: return "signed delay";
    case RetryAfterErrorCode::kFractional: return "fractional delay";
    case RetryAfterErrorCode::kTrailingGarbage: return "unexpected text after the delay";
    case RetryAfterErrorCode::kBadDate: return "not a delay or an HTTP-date";
  }
  return "invalid value";
}

std::string RetryAfterError::message() const {
  if (code == RetryAfterErrorCode::kBadDate) return std::string(to_string(code)) + ": " + date_error.message();
  return std::string(to_string(code)) + " at byte " + std::to_string(offset);
}

Result<RetryAfter, RetryAfterError> parse_retry_after(std::string_view value, WallTime now, ParseMode mode) noexcept {
  // The field parser's job (RFC 9110 section 5.5): drop OWS at both ends.
  const std::string_view trimmed = ascii::trim_ows(value);
  const std::size_t b = static_cast<std::size_t>(trimmed.data() - value.data());
  const std::size_t e = b + trimmed.size();
  if (b == e) return fail(error_at(RetryAfterErrorCode::kEmpty, 0));

  const char first = value[b];
  if (digit(first) <= 9) {
    // delay-seconds = 1*DIGIT. Leading zeros are fine; the value is capped at
    // kSaturatingSeconds while reading, so any length is safe.
    const auto delay = detail::read_decimal<std::uint64_t, kSaturatingSeconds>(trimmed);
    std::uint64_t secs = delay.value;
    std::size_t i = b + delay.digits;
    RetryAfter out;
    out.kind = RetryAfter::Kind::kDelay;
    if (i < e) {
      if (value[i] != '.') return fail(error_at(RetryAfterErrorCode::kTrailingGarbage, i));
      // A fractional delay: strict rejects it; robust rounds it up and says so.
      if (mode == ParseMode::kStrict) return fail(error_at(RetryAfterErrorCode::kFractional, i));
      const std::size_t point = i++;
      bool nonzero = false;
      const std::size_t frac = i;
      for (; i < e && digit(value[i]) <= 9; ++i) nonzero |= value[i] != '0';
      if (i == frac) return fail(error_at(RetryAfterErrorCode::kFractional, point));
      if (i < e) return fail(error_at(RetryAfterErrorCode::kTrailingGarbage, i));
      if (nonzero && secs < kSaturatingSeconds) ++secs;
      out.rounded_up = true;
    }
    if (secs >= kSaturatingSeconds) {
      out.saturated = true;
      out.delay = kMaxDuration;
    } else {
      out.delay = seconds_saturating(static_cast<std::int64_t>(secs));
    }
    return out;
  }
  if (first == '-') return fail(error_at(RetryAfterErrorCode::kNegative, b));
  if (first == '+') return fail(error_at(RetryAfterErrorCode::kSigned, b));

  auto date = parse_http_date(value.substr(b, e - b), now, mode);
  if (!date) {
    DateError de = date.error();
    de.offset = u32(de.offset + b);
    return fail(RetryAfterError{RetryAfterErrorCode::kBadDate, de.offset, de});
  }
  RetryAfter out;
  out.kind = RetryAfter::Kind::kDate;
  out.date = *date;
  return out;
}

Duration remaining(const RetryAfter& hint, WallTime received) noexcept {
  if (hint.kind == RetryAfter::Kind::kDelay) return hint.delay;
  const Duration d = difference(hint.date.time, received);
  return d < Duration::zero() ? Duration::zero() : d;
}

Duration remaining(const RetryAfter& hint, WallTime received, std::optional<WallTime> server_date) noexcept {
  if (hint.kind == RetryAfter::Kind::kDelay || !server_date) return remaining(hint, received);
  const Duration local = difference(hint.date.time, received);
  const Duration server = difference(hint.date.time, *server_date);
  const Duration d = local > server ? local : server;
  return d < Duration::zero() ? Duration::zero() : d;
}

Result<RetryAfterLines, RetryAfterError> parse_retry_after_lines(std::span<const std::string_view> lines,
                                                                 WallTime received, ParseMode mode) {
  if (lines.empty()) return fail(error_at(RetryAfterErrorCode::kEmpty, 0));
  std::optional<RetryAfterLines> best;
  Duration best_wait{};
  std::optional<RetryAfterError> first_error;
  std::vector<std::string> ignored;
  std::size_t ignored_more = 0;
  bool conflict = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto r = parse_retry_after(lines[i], received, mode);
    if (!r) {
      if (!first_error) first_error = r.error();
      // A hostile server may send thousands of lines: a few are described, the rest counted.
      if (ignored.size() < kMaxIgnoredLineWarnings) {
        ignored.push_back("ignored an invalid Retry-After line " + quoted(lines[i]) + ": " + r.error().message());
      } else {
        ++ignored_more;
      }
      continue;
    }
    const Duration wait = remaining(*r, received);
    if (!best) {
      best = RetryAfterLines{*r, i, {}};
      best_wait = wait;
      continue;
    }
    if (!same_value(*r, best->value)) conflict = true;
    if (wait > best_wait) {
      best->value = *r;
      best->line = i;
      best_wait = wait;
    }
  }
  if (!best) return fail(*first_error);
  if (conflict) {
    best->warnings.push_back("conflicting Retry-After values; using the longest wait, " + quoted(lines[best->line]));
  }
  for (auto& w : ignored) best->warnings.push_back(std::move(w));
  if (ignored_more > 0) {
    best->warnings.push_back("ignored " + std::to_string(ignored_more) + " more invalid Retry-After line" +
                             (ignored_more == 1 ? "" : "s"));
  }
  return std::move(*best);
}

}  // namespace abide
