// abide parse http-date / abide parse retry-after.
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "abide/http_date.h"
#include "abide/retry_after.h"
#include "command.h"
#include "common.h"
#include "time_option.h"

namespace abide::cli {
namespace cmd_parse_dates {  // private to this file (the CLI is compiled as one unit)

struct DateOptions {
  bool lenient = false;
  std::optional<WallTime> now;
  std::string value;
};

struct RetryAfterOptions {
  bool lenient = false;
  std::optional<WallTime> now;
  std::vector<std::string> values;
};

// A wrong day name is accepted in both modes but is a warning: the server
// wrote something it did not mean, and the user should know which reading won.
// The other deviations, accepted only with --lenient, are notes.
void note_deviations(DateDeviations d) {
  if (d.has(DateDeviation::kWeekdayMismatch)) {
    std::cerr << "abide: warning: " << to_string(DateDeviation::kWeekdayMismatch) << "\n";
  }
  DateDeviations rest;
  for (const DateDeviation x : kAllDateDeviations) {
    if (x != DateDeviation::kWeekdayMismatch && d.has(x)) rest.add(x);
  }
  if (!rest.empty()) std::cerr << "abide: note: accepted " << to_string(rest) << "\n";
}

// parse http-date: the value as Unix seconds; deviations accepted are noted on stderr.
int run_http_date(const DateOptions& o) {
  const auto mode = o.lenient ? ParseMode::kRobust : ParseMode::kStrict;
  const auto date = parse_http_date(o.value, time_or_now(o.now), mode);
  if (!date) return reject("rejected HTTP-date: " + date.error().message());
  note_deviations(date->deviations);
  std::cout << date->seconds.time_since_epoch().count() << "\n";
  return kExitOk;
}

const Registration http_date_cmd{
    {"parse", "http-date"},
    "Parse an HTTP-date (IMF-fixdate, rfc850-date, asctime-date) and print it as Unix seconds",
    [](CLI::App& app) -> Run {
      auto opts = std::make_shared<DateOptions>();
      app.add_flag("--lenient", opts->lenient, "Robust mode: also accept unambiguous deviations (reported on stderr)");
      add_time_option(app, "--now", opts->now,
                      "Current time for rfc850-date's two-digit year, RFC 3339 (default: now)");
      app.add_option("value", opts->value, "The HTTP-date (put it after -- if it begins with '-')")->required();
      return [opts] { return run_http_date(*opts); };
    }};

// parse retry-after: the field's lines as one value, as JSON; what was accepted
// beyond the grammar is noted on stderr.
int run_retry_after(const RetryAfterOptions& o) {
  const auto mode = o.lenient ? ParseMode::kRobust : ParseMode::kStrict;
  const WallTime now = time_or_now(o.now);
  const std::vector<std::string_view> lines(o.values.begin(), o.values.end());
  const auto parsed = parse_retry_after_lines(lines, now, mode);
  if (!parsed) return reject("rejected Retry-After: " + parsed.error().message());
  for (const auto& w : parsed->warnings) std::cerr << "abide: warning: " << w << "\n";
  const RetryAfter& ra = parsed->value;
  nlohmann::ordered_json out;
  if (ra.kind == RetryAfter::Kind::kDelay) {
    if (ra.rounded_up) std::cerr << "abide: note: accepted a fractional delay, rounded up\n";
    if (ra.saturated) std::cerr << "abide: note: delay too large, saturated to the largest delay\n";
    out["kind"] = "delay";
    out["seconds"] = std::chrono::duration_cast<std::chrono::seconds>(ra.delay).count();
  } else {
    note_deviations(ra.date.deviations);
    out["kind"] = "date";
    out["unix"] = ra.date.seconds.time_since_epoch().count();
    out["delay_s"] = to_seconds(remaining(ra, now));
  }
  std::cout << out.dump() << "\n";
  return kExitOk;
}

const Registration retry_after_cmd{
    {"parse", "retry-after"},
    "Parse a Retry-After value and print it as JSON (one VALUE per field line)",
    [](CLI::App& app) -> Run {
      auto opts = std::make_shared<RetryAfterOptions>();
      app.add_flag("--lenient", opts->lenient,
                   "Robust mode: round a fractional delay up, accept unambiguous date deviations "
                   "(reported on stderr)");
      add_time_option(app, "--now", opts->now, "Receive time, RFC 3339 (default: now)");
      app.add_option("value", opts->values,
                     "The field value; several values are several field lines of one response "
                     "(put them after -- if one begins with '-')")
          ->required();
      return [opts] { return run_retry_after(*opts); };
    }};

}  // namespace cmd_parse_dates
}  // namespace abide::cli
