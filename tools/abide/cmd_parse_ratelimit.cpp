// abide parse ratelimit [--now TIME] [--host HOST] [--profile NAME] [FILE]
//
// Reads a response head (status line and header lines, as `curl -sI` prints
// it) and prints what it says about quota and waiting, as JSON
// (signals_json.h documents the shape).
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/profiles.h"
#include "abide/signals.h"
#include "command.h"
#include "common.h"
#include "signals_json.h"
#include "time_option.h"

namespace abide::cli {
namespace cmd_parse_ratelimit {  // private to this file (the CLI is compiled as one unit)

struct Options {
  std::optional<WallTime> now;
  std::string host;
  std::string profile;
  std::vector<std::string> profile_files;
  bool heuristic = false;
  bool strict = false;
  std::string file;
};

int run(const Options& o) {
  auto profiles = load_chosen_profiles(o.profile_files, o.profile);
  if (!profiles) return profiles.error();
  ProfileRegistry& registry = *profiles;
  const auto text = read_input(o.file);
  if (!text) return kExitRejected;
  const auto head = parse_response_head(*text);
  if (!head) return reject(input_name(o.file) + ":" + std::to_string(head.error().line) + ": " + head.error().message);
  const std::string host = host_of(o.host);
  ObserveOptions options;
  options.host = host;
  options.profile = o.profile;
  options.registry = &registry;
  options.heuristic = o.heuristic;
  options.robust = !o.strict;
  const WallTime now = time_or_now(o.now);
  const Signals s = observe(head->status, head->headers, now, system_monotonic_clock().now(), options);
  // Strings are printable ASCII by now; the handler is the last guard against
  // a throw on invalid UTF-8.
  std::cout << signals_json(s, head->warnings).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
            << "\n";
  return kExitOk;
}

const Registration parse_ratelimit_cmd{
    {"parse", "ratelimit"},
    "Read a response head and print its quota observations, Retry-After, clock skew and warnings as JSON",
    [](CLI::App& app) -> Run {
      auto opts = std::make_shared<Options>();
      add_time_option(app, "--now", opts->now, "Receive time, RFC 3339 UTC (default: now)");
      app.add_option("--host", opts->host,
                     "Host the response came from (or a URL); selects its vendor profile (exact or domain suffix)");
      app.add_option("--profile", opts->profile, "Vendor profile by name (github, gitlab, ...), or none");
      // One file per flag: a vector option would take every argument that follows,
      // the head FILE included.
      app.add_option("--profile-file", opts->profile_files,
                     "Load a profile from this JSON file first (repeat the flag for more)")
          ->allow_extra_args(false);
      app.add_flag("--heuristic", opts->heuristic,
                   "Interpret vendor-style headers from a host without a profile (low confidence)");
      app.add_flag("--strict", opts->strict,
                   "Strict Retry-After: reject fractional delays and date deviations instead of accepting them");
      app.add_option("file", opts->file, "File holding the response head (default: standard input)");
      return [opts] { return run(*opts); };
    }};

}  // namespace cmd_parse_ratelimit
}  // namespace abide::cli
