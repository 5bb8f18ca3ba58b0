// abide/profiles.h: vendor profiles, as data.
//
// The same header name means different things at different vendors
// (X-RateLimit-Reset is Unix seconds at GitHub, seconds from now at Reddit, an
// ISO time at Atlassian), so vendor headers are read only through the profile of
// the API that sent them (docs/RULES.md rule 8). A profile says which headers carry
// limit, remaining, used, reset, window and scope, what each value means, which
// other headers carry a retry delay, and which statuses mean "limited".
//
// Profiles are JSON files (profiles/*.json in the source tree, compiled into the
// library; users load their own with ProfileRegistry::load_file / load_text).
// The format is documented in profiles/README.md. A malformed profile is
// rejected with a message that names the file and the field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/result.h"

namespace abide {

// What a header value that names a time means (reset, window, retry delay).
enum class TimeFormat : std::uint8_t {
  kUnixSeconds,          // "unix_seconds": 1691591363
  kUnixSecondsFraction,  // "unix_seconds_fraction": 1470173023.123 (or a whole number)
  kDeltaSeconds,         // "delta_seconds": 30, seconds from receipt
  kFloatSeconds,         // "float_seconds": 64.57, seconds from receipt
  kMilliseconds,         // "milliseconds": 1500 (or 1500.5), from receipt
  kGoDuration,           // "go_duration": 6m0s, 1s, 20ms, 1h2m3.5s, from receipt
  kRfc3339,              // "rfc3339": 2025-08-21T12:40:59Z; also yyyy-MM-ddTHH:mmZ (Atlassian)
  kHttpDate,             // "http_date": Thu, 30 Jan 2020 14:15:17 GMT
  kUnixMilliseconds,     // "unix_milliseconds": 1767225660123 (Linear)
};

// What a header value that carries a count means.
enum class CountFormat : std::uint8_t {
  kInteger,     // "integer": 4999
  kNumber,      // "number": 596.0 (a fraction is accepted: remaining and limit round down, used up)
  kUsedLimit,   // "used_limit": 32/40 (Shopify), also 17/250(appName=x) (Salesforce)
  kPolicyList,  // "policy_list": name;197,name2;1297 (Azure resource providers): one quota each
};

// "unix_seconds", "go_duration", ... (the JSON spelling).
std::string_view to_string(TimeFormat f) noexcept;
std::string_view to_string(CountFormat f) noexcept;
std::optional<TimeFormat> time_format_from_string(std::string_view s) noexcept;
std::optional<CountFormat> count_format_from_string(std::string_view s) noexcept;

// Which rule prices a request to an API in quota units other than requests
// before it is sent, and reads what its answer says it used (profile "costs").
enum class CostRule : std::uint8_t {
  kNone,       // no such rule: requests cost one request each
  kOpenAI,     // "openai": tokens = max(max_tokens, text bytes / 4); usage.total_tokens
  kAnthropic,  // "anthropic": input-tokens, output-tokens and their sum as tokens
};

// Where a limited answer's body may state a wait (profile "body_hints").
enum class BodyHintKind : std::uint8_t {
  kGoogleRetryInfo,   // "google_retry_info": error.details[] RetryInfo retryDelay "52s" (Gemini, Vertex AI)
  kTryAgainSentence,  // "try_again_sentence": "Please try again in 1.5s" in the error message
};

// "openai", "google_retry_info", ... (the JSON spelling; "none" for CostRule::kNone).
std::string_view to_string(CostRule r) noexcept;
std::string_view to_string(BodyHintKind k) noexcept;
std::optional<CostRule> cost_rule_from_string(std::string_view s) noexcept;
std::optional<BodyHintKind> body_hint_kind_from_string(std::string_view s) noexcept;

// Where one value is read from.
struct FieldSpec {
  std::string header;  // lower-case field name
  // Optional: the value is a list of `key=value` members separated by ';'
  // (Salesforce `api-usage=25/5000; api-bursts=1/750`, Zendesk
  // `total=100; remaining=99; resets=41`); read the member with this key.
  std::string key;
  TimeFormat time = TimeFormat::kDeltaSeconds;  // for reset, window and retry delays
  CountFormat count = CountFormat::kInteger;    // for limit, remaining, used
  // Optional: read only the part before the first ';' (Docker Hub
  // `100;w=21600`, whose parameters other fields read with `key`).
  bool first_member = false;
};

// One quota a vendor describes in headers.
struct QuotaSpec {
  std::string policy;                    // fixed policy name ("" for none)
  std::optional<FieldSpec> policy_from;  // a header naming the policy (GitHub x-ratelimit-resource)
  std::optional<FieldSpec> limit;
  std::optional<FieldSpec> remaining;
  std::optional<FieldSpec> used;           // remaining = limit - used when remaining is absent
  std::optional<FieldSpec> used_limit;     // one header with "used/limit"
  std::vector<FieldSpec> reset;            // first valid one wins (prefer deltas: no clock skew)
  std::optional<Duration> window;          // fixed window length
  std::optional<FieldSpec> window_from;    // a header carrying the window
  std::optional<FieldSpec> partition_key;  // scope / bucket header (Discord x-ratelimit-bucket)
  std::optional<FieldSpec> cost;           // units the request consumed (Linear x-complexity)
  std::string unit = "requests";
  // The reset counts to a full refill, not to the next permitted request
  // (OpenAI x-ratelimit-reset-*): observations get reset_is_full_refill.
  bool reset_is_full_refill = false;
  // No reset header, and the window is the longest wait (HubSpot, Docker Hub):
  // when no reset is read, the window is taken as the reset.
  bool window_bounds_wait = false;
  // Remaining-only counters: every header whose name starts with this prefix
  // (and that no other quota of the profile reads) is one quota, named by the
  // rest of the name (Azure x-ms-ratelimit-remaining-subscription-reads).
  std::string header_prefix;
};

// One vendor API.
struct Profile {
  std::string name;  // "github"
  std::string description;
  std::string file;  // where it was loaded from ("github.json")
  // Hosts it applies to: "api.github.com" matches exactly; ".github.com"
  // matches github.com and every subdomain.
  std::vector<std::string> hosts;
  std::vector<int> limited_statuses;              // always mean "rate limited" (429)
  std::vector<int> limited_statuses_with_signal;  // mean it only with a Retry-After or an exhausted quota (GitHub 403)
  std::vector<FieldSpec> retry_delays;            // retry-after-ms, x-ms-retry-after-ms, ...
  // Headers carrying the server's own verdict, `true` or `false` (any case):
  // Stripe-Should-Retry, x-should-retry. The first valid one is used.
  std::vector<std::string> retry_verdicts;
  // Where the vendor documents that its limited answer refused the request
  // without processing it (empty: it does not): a POST it limited may then be
  // sent again without an idempotency key (rule 7).
  std::string limited_unprocessed;
  // The IETF RateLimit fields are also read under these name prefixes
  // (Envoy "x-": x-ratelimit-limit in draft-03 form; Atlassian "beta-").
  std::vector<std::string> ietf_prefixes;
  std::vector<std::string> informational;  // headers known but not used (never listed as uninterpreted)
  std::vector<QuotaSpec> quotas;
  CostRule costs = CostRule::kNone;      // how a request's token cost is estimated and its usage read
  std::vector<BodyHintKind> body_hints;  // where a limited answer's body states a wait, tried in order

  // Every header name the profile reads or knows (lower case, sorted), for
  // telling interpreted headers from uninterpreted ones.
  std::vector<std::string> known_headers;
  // True when the profile reads the unprefixed RateLimit-Limit / -Remaining /
  // -Reset itself (GitLab: Reset is Unix seconds there), so they are not read as
  // the IETF draft fields.
  bool overrides_ietf_fields = false;

  // True when the profile reads or knows this header (name in any case).
  bool knows(std::string_view header) const noexcept;
  // True when host (any case, optional ":port", optional trailing dot) matches.
  bool matches_host(std::string_view host) const noexcept;
};

// Why a profile was rejected: "github.json: quotas[0].reset[1].format: unknown
// time format \"epoch\"".
struct ProfileError {
  std::string file;
  std::string field;  // JSON path of the offending field; empty for a syntax error
  std::string message;
  std::size_t line = 0;  // 1-based, where known
  std::string what() const;
};

// A set of profiles, selectable by name or host. Thread-safety as a standard
// container's: any number of threads may use the const functions at once (the
// engine's per-thread host cache reads through them), and a change (load_*,
// assignment) must not overlap any other use of the same registry. A pointer
// to a profile stays valid while any registry holding it lives, copies included.
class ProfileRegistry {
 public:
  // An empty registry.
  ProfileRegistry() noexcept;
  // Copies share the (immutable) profiles.
  ProfileRegistry(const ProfileRegistry& other);
  ProfileRegistry(ProfileRegistry&& other) noexcept;
  ProfileRegistry& operator=(const ProfileRegistry& other);
  ProfileRegistry& operator=(ProfileRegistry&& other) noexcept;
  ~ProfileRegistry() = default;

  // The profiles compiled into the library (loaded once, on first use; a
  // built-in profile that fails to load is a build defect and is skipped).
  static const ProfileRegistry& builtin();
  // A registry starting with a copy of the built-in profiles, to add one's own.
  static ProfileRegistry with_builtins();

  // Parses one profile (a JSON object) and adds it; a profile with the same
  // name replaces the earlier one. `file` names the source in error messages.
  // Returns the profile's name.
  Result<std::string, ProfileError> load_text(std::string_view text, std::string_view file = "<text>");
  // Reads a profile file (at most 1 MiB) and adds it.
  Result<std::string, ProfileError> load_file(const std::filesystem::path& path);

  // The profile with this name (exact, case-insensitive), or nullptr.
  const Profile* find(std::string_view name) const noexcept;
  // The profile for this host: an exact host entry wins over a suffix, and a
  // longer suffix over a shorter one. nullptr when none matches.
  const Profile* for_host(std::string_view host) const noexcept;

  std::size_t size() const noexcept { return profiles_.size(); }
  // All profiles, in load order.
  std::vector<const Profile*> all() const;

  // The one profile whose distinctive fields an answer carries (a field no
  // other profile of this registry reads or knows, such as OpenAI's
  // x-ratelimit-limit-requests), for an upstream whose host selects none;
  // nullptr when the fields name no profile, or several. `field` gets the
  // first distinctive field seen, for saying why.
  const Profile* by_fields(const HeaderList& headers, std::string* field = nullptr) const;

  // Changes whenever this registry changes; never the same for two registry
  // states alive at once (lets observe() remember a host's profile).
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  static std::uint64_t next_generation() noexcept;
  std::vector<std::shared_ptr<const Profile>> profiles_;
  std::uint64_t generation_;
};

// Parses one profile without adding it anywhere.
Result<Profile, ProfileError> parse_profile(std::string_view text, std::string_view file = "<text>");

}  // namespace abide
