// abide/retry_after.h: the Retry-After field (RFC 9110 section 10.2.3).
//
//   Retry-After = HTTP-date / delay-seconds      delay-seconds = 1*DIGIT
//
// A value that does not parse is an error, never "retry now". A delay too large
// to represent saturates to kMaxDuration: a valid, enormous hint that later
// stages treat as too long to wait.
//
// Whitespace: these functions take a field value as it came off the wire and
// trim OWS (SP / HTAB) at both ends, as RFC 9110 section 5.5 asks of a field
// parser. Error offsets count from the start of the untrimmed value. The
// HTTP-date grammar parser underneath (http_date.h) trims nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/http_date.h"
#include "abide/result.h"

namespace abide {

// A parsed Retry-After value.
struct RetryAfter {
  enum class Kind : std::uint8_t {
    kDelay,  // delay-seconds: counts from the receipt of the response
    kDate,   // HTTP-date: an instant
  };
  Kind kind = Kind::kDelay;
  Duration delay{};         // kDelay: whole seconds, saturated at kMaxDuration
  HttpDate date{};          // kDate: the date (with its form and accepted deviations)
  bool saturated = false;   // kDelay: the value was too large and saturated
  bool rounded_up = false;  // kDelay, robust mode: a fractional value ("2.5")
                            // was accepted and rounded up to whole seconds

  // True when something the grammar does not allow was accepted: in robust
  // mode, or a day name that does not match its date (both modes).
  bool has_deviations() const noexcept { return rounded_up || !date.deviations.empty(); }
};

// What was wrong with a Retry-After value.
enum class RetryAfterErrorCode : std::uint8_t {
  kEmpty,            // empty or whitespace only (also: no field line at all)
  kNegative,         // "-5"
  kSigned,           // "+5"
  kFractional,       // "2.5" in strict mode, or "2." with no digit after the point
  kTrailingGarbage,  // digits followed by anything else ("12s", "0x1A", "30, 60")
  kBadDate,          // not a number and not a valid HTTP-date (see date_error)
};

// A rejected Retry-After value: what, and at which byte of the untrimmed value.
struct RetryAfterError {
  RetryAfterErrorCode code = RetryAfterErrorCode::kEmpty;
  std::uint32_t offset = 0;
  DateError date_error{};  // for kBadDate; its offset is already shifted to the value

  // e.g. "negative delay at byte 0" or "not a delay or an HTTP-date: expected
  // ',' at byte 3".
  std::string message() const;
};

// A short description of the code alone.
std::string_view to_string(RetryAfterErrorCode c) noexcept;

// Parses one Retry-After field value. `now` is only used for rfc850-date's
// two-digit year (see parse_http_date); pass the receive time.
Result<RetryAfter, RetryAfterError> parse_retry_after(std::string_view value, WallTime now,
                                                      ParseMode mode = ParseMode::kStrict) noexcept;

// The interval from `received` until the hint permits a retry: the delay
// itself, or date - received; a date in the past gives zero. Saturating.
Duration remaining(const RetryAfter& hint, WallTime received) noexcept;

// As above, but with the response's Date field when valid: for a date hint,
// max(date - received, date - server_date) clamped at zero, so that clock skew
// can never make a retry early. A delay hint ignores server_date.
Duration remaining(const RetryAfter& hint, WallTime received, std::optional<WallTime> server_date) noexcept;

// The outcome of a response with several Retry-After field lines.
struct RetryAfterLines {
  RetryAfter value;                   // the value that waits longest
  std::size_t line = 0;               // its index in the lines given
  std::vector<std::string> warnings;  // conflicts and ignored invalid lines
};

// Reads every Retry-After field line of one response (Retry-After is a
// singleton, but servers send duplicates). Identical values are fine.
// Conflicting valid values resolve to the one that waits longest from
// `received`, with a warning; invalid lines are ignored, with a warning, when
// a valid one exists (the first 8 are described, the rest counted in one
// warning). When none is valid: the first line's error (kEmpty for no lines).
Result<RetryAfterLines, RetryAfterError> parse_retry_after_lines(std::span<const std::string_view> lines,
                                                                 WallTime received,
                                                                 ParseMode mode = ParseMode::kStrict);

}  // namespace abide
