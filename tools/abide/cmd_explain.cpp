// abide explain [options] [FILE]
//
// Reads a response head (status line and header lines, as `curl -sI` prints
// it) and explains what abide would do next: in words by default, as JSON with
// --json (fields as docs/RULES.md's command-line contract lists them, plus
// "status", "ambiguous", "retry_after" and "should_retry", the server's own
// retry verdict: true, false or null; quota observations as in `parse
// ratelimit`, with "cost" and "reset_is_full_refill").
//
// With --history the input holds a key's answers in the order received, each
// with its Date: they are replayed through a pacer of their own, at their
// Dates, and what they taught (the learned quota, while the server announces
// none) is said after the explanation of the last one; JSON "learned" (null
// when nothing was learned).
//
// Exit status: 0 whenever the decision was explained, whatever it is (retry,
// deferred, not_retryable, ...: the command succeeded in explaining it); 1 when
// the input cannot be read or is not a response head; 2 for a usage error.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/http_date.h"
#include "abide/pacer.h"
#include "abide/planner.h"
#include "abide/profiles.h"
#include "abide/signals.h"
#include "body_hint.h"
#include "command.h"
#include "common.h"
#include "explain_text.h"
#include "learned_text.h"
#include "llm/cost_estimate.h"
#include "profile_select.h"
#include "signals_json.h"
#include "time_option.h"

namespace abide::cli {
namespace cmd_explain {  // private to this file (the CLI is compiled as one unit)

struct Options {
  std::optional<WallTime> now;
  std::int64_t attempt = 1;
  std::int64_t max_attempts = 5;
  std::optional<double> deadline_s;
  std::string method = "GET";
  bool idempotency_key = false;
  std::string host;
  std::string profile;
  std::vector<std::string> profile_files;
  bool heuristic = false;
  bool strict = false;
  double backoff_base_s = 1.0;
  double backoff_cap_s = 60.0;
  std::string jitter = "equal";
  std::optional<std::uint64_t> seed;
  std::optional<double> max_wait_s;
  bool json = false;
  bool history = false;
  std::string cost;  // --cost: what the next request needs, as Abide-Cost
  std::string file;
};

// Clocks that stand still at the instant set: a history is replayed at the
// times its answers were received, without waiting.
class ReplayMono final : public MonotonicClock {
 public:
  MonoTime t{std::chrono::hours{1000}};
  MonoTime now() const noexcept override { return t; }
  WaitResult sleep_until(MonoTime, std::stop_token) const override { return WaitResult::kReached; }
};
class ReplayWall final : public WallClock {
 public:
  WallTime t{};
  WallTime now() const noexcept override { return t; }
};

// The heads of a text that holds several, in order: each begins with a
// status line at the start of the text or after an empty line.
std::vector<std::string_view> split_heads(std::string_view text) {
  std::vector<std::size_t> starts;
  bool after_empty = true;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (after_empty && line.starts_with("HTTP/")) starts.push_back(pos);
    after_empty = line.empty();
    pos = eol + 1;
  }
  std::vector<std::string_view> heads;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t end = i + 1 < starts.size() ? starts[i + 1] : text.size();
    heads.push_back(text.substr(starts[i], end - starts[i]));
  }
  return heads;
}

// The body after the last head of `text` (what follows its empty line), as
// `curl -sD - URL` prints an answer: a limited answer's wait may be there.
std::string_view body_after_last_head(std::string_view text) {
  const auto heads = split_heads(text);
  if (heads.empty()) return {};
  const std::string_view last = heads.back();
  for (const std::string_view end : {std::string_view("\r\n\r\n"), std::string_view("\n\n")}) {
    const auto at = last.find(end);
    if (at != std::string_view::npos) return last.substr(at + end.size());
  }
  return {};
}

// What the pacer would do with the next request of the key, given what it
// needs (--cost): send it now, or hold it until `at` for `cause`.
struct NextSend {
  std::vector<UnitCost> costs;
  bool now = false;
  Duration wait{};
  std::optional<WallTime> at;
  WaitCause cause = WaitCause::kNone;
  std::optional<QuotaHeld> held;
};

NextSend next_send(Pacer& pacer, const Pacer::Key& key, std::vector<UnitCost> costs, MonoTime mono, WallTime wall) {
  NextSend n;
  n.costs = std::move(costs);
  Pacer::Ticket ticket;
  const TryAcquireResult r = pacer.try_acquire(ticket, key, std::nullopt, n.costs);
  n.cause = r.cause;
  n.held = r.held;
  n.now = r.ok();
  if (!n.now) {
    n.wait = r.at > mono ? r.at - mono : Duration::zero();
    n.at = saturating_add(wall, n.wait);
  }
  if (r.ok() && r.probe) pacer.abandon_probe(key);  // nothing is sent
  return n;
}

std::string costs_text(std::span<const UnitCost> costs) {
  std::string s;
  for (const UnitCost& c : costs) s += (s.empty() ? "" : ", ") + c.unit + "=" + std::to_string(c.amount);
  return s;
}

std::string next_send_text(const NextSend& n) {
  std::string s = "Next request (" + costs_text(n.costs) + "): ";
  if (n.now) return s + "may be sent now; the quotas this answer states have room for it.\n";
  char wait[32];
  std::snprintf(wait, sizeof wait, "%.1f", to_seconds(n.wait));
  s += std::string("held ") + wait + " s, until " + format_rfc3339(*n.at) + ", by " + std::string(describe(n.cause));
  if (n.held) s += ": " + safe_text(describe(*n.held));
  return s + ".\n";
}

nlohmann::ordered_json next_send_json(const NextSend& n) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json costs = nlohmann::ordered_json::object();
  for (const UnitCost& c : n.costs) costs[c.unit] = c.amount;
  j["costs"] = std::move(costs);
  j["now"] = n.now;
  j["wait_s"] = seconds_json(n.wait);
  j["not_before"] = n.at ? nlohmann::ordered_json(format_rfc3339(*n.at)) : nlohmann::ordered_json(nullptr);
  j["cause"] = n.now ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(std::string(describe(n.cause)));
  if (n.held) {
    j["held_by"] = {{"unit", n.held->unit.empty() ? std::string("requests") : safe_text(n.held->unit)},
                    {"remaining", n.held->remaining >= 0 ? nlohmann::ordered_json(n.held->remaining) : nullptr},
                    {"limit", n.held->limit > 0 ? nlohmann::ordered_json(n.held->limit) : nullptr},
                    {"needed", n.held->need},
                    {"text", safe_text(describe(*n.held))}};
  } else {
    j["held_by"] = nullptr;
  }
  return j;
}

// What a run of answers from one key taught, replayed through a pacer of its
// own: each answer received at its Date. Nothing when no answer was limited.
struct History {
  std::optional<LearnedPolicy> learned;
  std::size_t answers = 0;
};

// Seconds from the command line to a Duration, saturating (finite values only:
// the options' validators reject the rest).
Duration seconds_duration(double s) {
  constexpr double kMaxSeconds = 9.2e9;  // below Duration::max() (about 9.22e9 s)
  if (s >= kMaxSeconds) return kMaxDuration;
  if (s <= -kMaxSeconds) return Duration::min();
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

nlohmann::ordered_json duration_or_null(const std::optional<Duration>& d) {
  return d ? seconds_json(*d) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json plan_json(const ExplainContext& c) {
  const Plan& p = c.plan;
  nlohmann::ordered_json j;
  j["decision"] = to_string(p.decision);
  j["delay_s"] = seconds_json(p.wait);
  j["not_before"] = p.not_before_wall ? nlohmann::ordered_json(format_rfc3339(*p.not_before_wall))
                                      : nlohmann::ordered_json(nullptr);
  j["basis"] = p.basis == Basis::kNone ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(to_string(p.basis));
  j["server_hint_s"] = duration_or_null(p.server_hint);
  j["backoff_s"] = seconds_json(p.backoff);
  j["jitter_s"] = seconds_json(p.jitter);
  j["clock_skew_s"] = duration_or_null(p.clock_skew);
  j["quota"] = quota_list_json(c.signals.quota);
  // Through signals_json for the same UTF-8 safety as `parse ratelimit`.
  const std::vector<std::string> warnings = explain_warnings(c);
  j["warnings"] = signals_json(Signals{}, warnings)["warnings"];
  // The planner's sentence may name a policy or source the server sent.
  j["reason"] = safe_text(c.planner.describe(p, c.input));
  j["status"] = p.status;
  j["ambiguous"] = p.ambiguous;
  j["retry_after"] = retry_hint_json(c.signals.retry_after);
  j["should_retry"] = should_retry_json(c.signals);
  return j;
}

// The learned policy as JSON: null when nothing was learned.
nlohmann::ordered_json learned_json(const History& h) {
  if (!h.learned) return nullptr;
  nlohmann::ordered_json j;
  put_learned_json(j, *h.learned);
  j["answers"] = h.answers;
  return j;
}

// What the next request needs (--cost); a value that cannot be read is a
// usage error, said on stderr.
Result<std::vector<UnitCost>, int> costs_of(const std::string& cost) {
  if (cost.empty()) return std::vector<UnitCost>{};
  auto parsed = detail::parse_cost_header(cost);
  if (!parsed) {
    std::cerr << "abide: --cost: " << parsed.error() << "\n";
    return fail(kExitUsage);
  }
  return std::move(*parsed);
}

// The answers go through a pacer of their own, at the times they were
// received: what they taught, and what the next request would meet.
struct Replay {
  ReplayMono mono;
  ReplayWall wall;
  Pacer pacer;
  Pacer::Key key;
  Replay() : pacer(config(mono, wall)), key(pacer.key("explain")) {}
  static PacerConfig config(ReplayMono& mono, ReplayWall& wall) {
    PacerConfig pc;
    pc.mono = &mono;
    pc.wall = &wall;
    return pc;
  }
};

// --history: every head of `text`, in order, through the replay, each
// received at its Date; the last one, the answer explained, at its Date
// unless --now says otherwise, and it is left to the caller to record. The
// replay's clocks are left at the last one's time. A head that cannot be
// read, or has no Date, is rejected (said on stderr) with its line.
Result<History, int> replay_history(const Options& o, std::string_view text, const std::string& where,
                                    const ObserveOptions& options, WallTime now, Replay& replay) {
  const auto heads = split_heads(text);
  std::optional<WallTime> first_date;
  std::size_t line = 1;
  History history;
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const auto h = parse_response_head(heads[i]);
    if (!h) return fail(reject(where + ":" + std::to_string(line + h.error().line - 1) + ": " + h.error().message));
    const std::size_t at_line = line;
    line += static_cast<std::size_t>(std::count(heads[i].begin(), heads[i].end(), '\n'));
    if (h->status < 200) continue;  // 100 Continue and the like answer nothing
    const auto date = h->headers.first("Date");
    // Two-digit years resolve against `now` (--now, or the clock), not yet replayed.
    const auto when = parse_http_date(date.value_or(""), now, ParseMode::kRobust);
    if (!date || !when) {
      return fail(reject(where + ":" + std::to_string(at_line) +
                         ": --history needs every answer's Date (when it was received), and this one has " +
                         (date ? "one that is not an HTTP-date" : "none")));
    }
    const WallTime at = when->time;
    if (!first_date) first_date = at;
    if (at < *first_date) return fail(reject(where + ":" + std::to_string(at_line) + ": a Date before the first answer's"));
    const bool last = i + 1 == heads.size();
    replay.wall.t = last && o.now ? *o.now : at;
    replay.mono.t = MonoTime{std::chrono::hours{1000}} + (replay.wall.t - *first_date);
    if (!last) replay.pacer.record(replay.key, observe(h->status, h->headers, replay.wall.t, replay.mono.t, options));
    ++history.answers;
  }
  return history;
}

// A limited answer whose vendor states the wait in the body (Gemini's
// retryDelay): read as the engine reads it, so the source is named.
void read_body_hint(std::string_view text, const ObserveOptions& options, Signals& s) {
  if (!s.limited) return;
  if (const Profile* profile = detail::selected_profile(options); profile != nullptr && !profile->body_hints.empty()) {
    const std::string_view body = body_after_last_head(text);
    (void)detail::apply_body_hint(profile->body_hints, body.substr(0, detail::kMaxBodyHintBytes), s);
  }
}

Planner planner_of(const Options& o) {
  PlannerConfig config;
  config.backoff = BackoffPolicy(seconds_duration(o.backoff_base_s), seconds_duration(o.backoff_cap_s),
                                 parse_jitter(o.jitter).value_or(Jitter::kEqual));
  if (o.max_wait_s) config.max_wait = seconds_duration(*o.max_wait_s);
  return Planner(std::move(config));
}

PlanInput plan_input(const Options& o, const Signals& s, MonoTime mono) {
  PlanInput input(s);
  input.method = o.method;
  input.idempotency_key = o.idempotency_key;
  input.attempt = o.attempt;
  input.max_attempts = o.max_attempts;
  if (o.deadline_s) input.deadline = saturating_add(mono, seconds_duration(*o.deadline_s));
  return input;
}

void print_explanation(const Options& o, const ExplainContext& c, const std::optional<History>& history,
                       const std::optional<NextSend>& next) {
  if (o.json) {
    nlohmann::ordered_json j = plan_json(c);
    if (history) j["learned"] = learned_json(*history);
    if (next) j["next"] = next_send_json(*next);
    // Every string is printable ASCII by now; the handler is the last guard
    // against a throw on invalid UTF-8.
    std::cout << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << explain_text(c);
  if (history) {
    std::cout << "\nLearned from " << history->answers << (history->answers == 1 ? " answer" : " answers") << ": "
              << (history->learned ? learned_text(*history->learned)
                                   : std::string("nothing (no limited answer, or the server announces its quota)"))
              << "\n";
  }
  if (next) std::cout << "\n" << next_send_text(*next);
}

int run(const Options& o) {
  auto profiles = load_chosen_profiles(o.profile_files, o.profile);
  if (!profiles) return profiles.error();
  ProfileRegistry& registry = *profiles;

  const auto text = read_input(o.file);
  if (!text) return kExitRejected;
  const std::string where = input_name(o.file);
  const auto head = parse_response_head(*text);
  if (!head) return reject(where + ":" + std::to_string(head.error().line) + ": " + head.error().message);
  auto costs = costs_of(o.cost);
  if (!costs) return costs.error();

  const std::string host = host_of(o.host);
  ObserveOptions options;
  options.host = host;
  options.profile = o.profile;
  options.registry = &registry;
  options.heuristic = o.heuristic;
  options.robust = !o.strict;
  WallTime now = time_or_now(o.now);
  MonoTime mono = system_monotonic_clock().now();

  Replay replay;
  std::optional<History> history;
  if (o.history) {
    auto replayed = replay_history(o, *text, where, options, now, replay);
    if (!replayed) return replayed.error();
    history = std::move(*replayed);
    now = replay.wall.t;
    mono = replay.mono.t;
  }
  Signals s = observe(head->status, head->headers, now, mono, options);
  read_body_hint(*text, options, s);
  replay.wall.t = now;
  replay.mono.t = mono;
  replay.pacer.record(replay.key, s);
  if (history) history->learned = replay.pacer.learned(replay.key);
  std::optional<NextSend> next;
  if (!costs->empty()) next = next_send(replay.pacer, replay.key, std::move(*costs), mono, now);

  const Planner planner = planner_of(o);
  const PlanInput input = plan_input(o, s, mono);
  SeededRandom rng(o.seed ? *o.seed : std::random_device{}());
  const Plan plan = planner.decide(input, rng);
  print_explanation(o, ExplainContext{s, plan, input, planner, head->warnings, host, o.profile}, history, next);
  return kExitOk;
}

// A number of seconds that is finite (CLI11's own checks take inf and nan).
CLI::Validator finite_seconds() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        try {
          std::size_t used = 0;
          const double d = std::stod(v, &used);
          if (used != v.size() || !std::isfinite(d)) return "not a finite number of seconds: " + v;
        } catch (const std::exception&) {
          return "not a number of seconds: " + v;
        }
        return {};
      },
      "SECONDS");
}

// The request and its attempt, and how the head is read (--help's first part).
void add_request_flags(CLI::App& app, Options& o, const CLI::Validator& finite) {
  add_time_option(app, "--now", o.now, "Receive time of the response, RFC 3339 UTC (default: now)");
  app.add_option("--attempt", o.attempt, "Attempts made, this one included (default 1)")
      ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
  app.add_option("--max-attempts", o.max_attempts, "Attempts allowed in all (default 5)")
      ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
  app.add_option("--deadline", o.deadline_s, "Time left for the task, in seconds from receipt (default: none)")
      ->check(finite);
  app.add_option("--method", o.method, "Request method (default GET); POST and PATCH need an idempotency key");
  app.add_flag("--idempotency-key", o.idempotency_key, "The request carried an Idempotency-Key");
  app.add_option("--host", o.host,
                 "Host the response came from (or a URL); selects its vendor profile (exact or domain suffix)");
  app.add_option("--profile", o.profile, "Vendor profile by name (github, gitlab, ...), or none");
  // One file per flag: a vector option would take every argument that follows,
  // the head FILE included.
  app.add_option("--profile-file", o.profile_files, "Load a profile from this JSON file first (repeat the flag for more)")
      ->allow_extra_args(false);
  app.add_flag("--heuristic", o.heuristic,
               "Interpret vendor-style headers from a host without a profile (low confidence; reported, not used)");
  app.add_flag("--strict", o.strict, "Strict Retry-After: reject fractional delays and date deviations");
}

// The planner's settings, and what is said (--help's second part).
void add_planner_flags(CLI::App& app, Options& o, const CLI::Validator& finite) {
  app.add_option("--backoff-base", o.backoff_base_s, "First local backoff, seconds (default 1)")
      ->check(finite & CLI::NonNegativeNumber);
  app.add_option("--backoff-cap", o.backoff_cap_s, "Largest local backoff, seconds (default 60)")
      ->check(finite & CLI::NonNegativeNumber);
  app.add_option("--jitter", o.jitter, "Jitter: none, full, equal or decorrelated (default equal)")
      ->check(CLI::IsMember({"none", "full", "equal", "decorrelated"}));
  app.add_option("--seed", o.seed, "Seed for the jitter (default: random)");
  app.add_option("--max-wait", o.max_wait_s, "Longest acceptable server hint, seconds (default: no limit)")
      ->check(finite & CLI::NonNegativeNumber);
  app.add_flag("--json", o.json, "Print JSON instead of words");
  app.add_flag("--history", o.history,
               "FILE holds a key's answers in the order received (curl -sD - URL URL ...), each with its "
               "Date: say what they teach (\"learned\"), and explain the last");
  app.add_option("--cost", o.cost,
                 "What the next request needs of the quotas, as Abide-Cost (tokens=4100, input-tokens=900): "
                 "say whether the answer's quotas hold it back, and which");
  app.add_option("file", o.file,
                 "File holding the response head, and the body after it if any (default: standard input)");
}

const Registration explain_cmd{{"explain"},
                               "Read a response head and explain what to do next: retry when, or why not",
                               [](CLI::App& app) -> Run {
                                 auto o = std::make_shared<Options>();
                                 const CLI::Validator finite = finite_seconds();
                                 add_request_flags(app, *o, finite);
                                 add_planner_flags(app, *o, finite);
                                 return [o] { return run(*o); };
                               }};

}  // namespace cmd_explain
}  // namespace abide::cli
