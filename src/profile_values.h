// Internal: the value semantics of vendor profiles (abide/profiles.h), each
// usable on its own: durations, time values, counts and "k=v; k2=v2" members
// as vendors send them. Not installed.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "abide/clock.h"
#include "abide/profiles.h"

namespace abide {

// A Go time.Duration string: one or more <decimal>[.<fraction>]<unit> with
// units ns, us (µs, μs), ms, s, m, h; or "0". Signs are rejected (a negative
// wait means nothing); overflow saturates at kMaxDuration.
std::optional<Duration> parse_go_duration(std::string_view text) noexcept;

// A non-negative decimal number of `unit`s ("64.57" seconds, "1500" ms), exact
// to the nanosecond (further digits round up). No sign, no exponent.
// Saturates at kMaxDuration.
std::optional<Duration> parse_decimal_duration(std::string_view text, Duration unit) noexcept;

// How a time value reads, relative to the receipt of the response.
struct TimeValue {
  Duration from_receipt{};     // >= 0: for an instant, the larger of (t - received)
                               // and (t - server Date), clamped at zero
  std::optional<WallTime> at;  // the instant, for absolute formats
  // The step the value was stated in: 1 s for whole seconds, 1 ms for "1500"
  // milliseconds, 10 ms for "1.25" seconds, 60 s for a time without seconds.
  // For an instant, widened by how far apart its two readings are (up to a
  // second): from_receipt is at most this much after the true time.
  Duration resolution{};
};

// The furthest ahead a vendor's time may lie: no quota window abide knows is
// longer than a month, so a reset or delay beyond a year is garbage, not a
// wait of decades. Profiles and the heuristic both reject what lies beyond.
inline constexpr Duration kMaxAhead = std::chrono::hours{24 * 366};

// Reads a time value in the given format. Nullopt when malformed (including
// negative values).
std::optional<TimeValue> parse_time_value(std::string_view text, TimeFormat format, WallTime received,
                                          std::optional<WallTime> server_date) noexcept;

// A count: non-negative. For kNumber a fraction rounds down (round_up: up).
std::optional<std::int64_t> parse_count(std::string_view text, CountFormat format, bool round_up = false) noexcept;

// "32/40" or "17/250(appName=x)": used, limit and the parenthesised suffix.
struct UsedLimit {
  std::int64_t used = 0;
  std::int64_t limit = 0;
  std::string_view detail;  // "appName=x", or empty
};
std::optional<UsedLimit> parse_used_limit(std::string_view text) noexcept;

// The member `key` of a "k1=v1; k2=v2" value (OWS around members trimmed).
std::optional<std::string_view> find_member(std::string_view value, std::string_view key) noexcept;

// True for the formats that name an instant (Unix times, RFC 3339, HTTP-date).
bool is_absolute(TimeFormat f) noexcept;

// The step a value was stated in (TimeValue::resolution): for a decimal
// number of `unit`s, the unit over ten per fraction digit; for a Go duration,
// the unit of its last component ("6m0s": 1 s, "20ms": 1 ms, "1.5s": 100 ms).
Duration decimal_step(std::string_view text, Duration unit) noexcept;
Duration go_duration_step(std::string_view text) noexcept;

}  // namespace abide
