// The pacer's state machine as one Lua script (src/redis/pacer.lua) and what
// C++ shares with it: the operation codes, the argument layout, the grant
// kinds it answers with and its limits.
//
// kScriptConstants is the one list of those numbers. CMake reads its lines
// (src/redis/CMakeLists.txt: one {"NAME", integer}, entry per line) and writes
// each value into the script wherever @NAME@ stands, so the script is built
// from these values and cannot drift from them. The named constants below are
// looked up in the same list at compile time.
//
// Call: EVALSHA <digest> 1 <redis key> <op> <op's arguments...>, every time a
// whole number of microseconds (Lua numbers are doubles: exact to 2^53 us,
// about 285 years).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ratio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abide/quota_store.h"
#include "mutex.h"

namespace abide::redis_detail {

struct ScriptConstant {
  std::string_view name;  // as written in pacer.lua: @NAME@
  std::int64_t value;
};

// clang-format off
inline constexpr ScriptConstant kScriptConstants[] = {
    // ARGV[1]: the operation.
    {"OP_ACQUIRE", 1},
    {"OP_RECORD", 2},
    {"OP_CHECK", 3},
    {"OP_ABANDON", 4},
    {"OP_LEARNED", 5},
    {"OP_PUBLISH", 6},
    {"OP_SETTLE", 7},
    // How many ARGV each operation takes (the operation included). An
    // acquire takes ACQUIRE_FIXED_ARGS (the last: how many costs follow), then
    // COST_ARGS for each cost; a record takes RECORD_FIXED_ARGS, then
    // POLICY_ARGS for each policy update, then a count and COST_ARGS for each
    // reserved cost, then a count and COST_ARGS for each used one.
    {"ACQUIRE_FIXED_ARGS", 8},
    {"COST_ARGS", 2},
    {"RECORD_FIXED_ARGS", 11},
    {"POLICY_ARGS", 7},
    {"CHECK_ARGS", 2},
    {"ABANDON_ARGS", 2},
    {"LEARNED_ARGS", 1},
    {"PUBLISH_ARGS", 40},  // op, now, then LEARNED_FIELDS twice
    // The numbers of a learned policy, as a lesson returns it and a publish
    // takes it (pacer.lua's L_ fields, in order; redis/learned_fields.cpp).
    {"LEARNED_FIELDS", 19},
    // The first integer an acquire returns: StoreGrant::Kind.
    {"GRANT_GRANTED", 0},
    {"GRANT_PROBE", 1},
    {"GRANT_AWAIT_PROBE", 2},
    {"GRANT_TOO_LATE", 3},
    // The fourth: what set the wait (WaitCause).
    {"CAUSE_NONE", 0},
    {"CAUSE_COOLDOWN", 1},
    {"CAUSE_QUOTA", 2},
    {"CAUSE_QUEUE", 3},
    {"CAUSE_PROBE", 4},
    // Limits: policies kept per key (QuotaStore::kMaxPolicies), bytes of a policy id.
    {"MAX_POLICIES", 8},
    {"MAX_ID_BYTES", 256},
    // The time unit of every argument and answer.
    {"MICROS_PER_SECOND", 1000000},
    // The learned policy's bounds (LearnedPolicyBounds, quota_store.h), times in microseconds.
    {"LEARNED_MAX", 1000000000},
    {"LEARNED_MIN_WINDOW", 1000},
    {"LEARNED_MAX_WINDOW", 86400000000},
    {"LEARNED_MAX_HOLD", 60000000},
    {"LEARNED_RAISE_AFTER", 8},
    {"LEARNED_BARE_SHRINK", 16},
    {"STATED_STEP", 1000000},
};
// clang-format on

// The value of the named constant; an unknown name does not compile.
consteval std::int64_t script_constant(std::string_view name) {
  for (const ScriptConstant& c : kScriptConstants) {
    if (c.name == name) return c.value;
  }
  throw "no such constant in kScriptConstants";
}

inline constexpr std::int64_t kOpAcquire = script_constant("OP_ACQUIRE");
inline constexpr std::int64_t kOpRecord = script_constant("OP_RECORD");
inline constexpr std::int64_t kOpCheck = script_constant("OP_CHECK");
inline constexpr std::int64_t kOpAbandon = script_constant("OP_ABANDON");
inline constexpr std::int64_t kOpLearned = script_constant("OP_LEARNED");
inline constexpr std::int64_t kOpPublish = script_constant("OP_PUBLISH");
inline constexpr std::int64_t kOpSettle = script_constant("OP_SETTLE");
inline constexpr std::size_t kAcquireFixedArgs = static_cast<std::size_t>(script_constant("ACQUIRE_FIXED_ARGS"));
inline constexpr std::size_t kCostArgs = static_cast<std::size_t>(script_constant("COST_ARGS"));
inline constexpr std::size_t kRecordFixedArgs = static_cast<std::size_t>(script_constant("RECORD_FIXED_ARGS"));
inline constexpr std::size_t kPolicyArgs = static_cast<std::size_t>(script_constant("POLICY_ARGS"));
inline constexpr std::size_t kCheckArgs = static_cast<std::size_t>(script_constant("CHECK_ARGS"));
inline constexpr std::size_t kAbandonArgs = static_cast<std::size_t>(script_constant("ABANDON_ARGS"));
inline constexpr std::size_t kLearnedArgs = static_cast<std::size_t>(script_constant("LEARNED_ARGS"));
inline constexpr std::size_t kPublishArgs = static_cast<std::size_t>(script_constant("PUBLISH_ARGS"));
inline constexpr std::size_t kLearnedFields = static_cast<std::size_t>(script_constant("LEARNED_FIELDS"));
static_assert(kPublishArgs == 2 + 2 * kLearnedFields);
inline constexpr std::int64_t kGrantGranted = script_constant("GRANT_GRANTED");
inline constexpr std::int64_t kGrantProbe = script_constant("GRANT_PROBE");
inline constexpr std::int64_t kGrantAwaitProbe = script_constant("GRANT_AWAIT_PROBE");
inline constexpr std::int64_t kGrantTooLate = script_constant("GRANT_TOO_LATE");
inline constexpr std::int64_t kCauseNone = script_constant("CAUSE_NONE");
inline constexpr std::int64_t kCauseCooldown = script_constant("CAUSE_COOLDOWN");
inline constexpr std::int64_t kCauseQuota = script_constant("CAUSE_QUOTA");
inline constexpr std::int64_t kCauseQueue = script_constant("CAUSE_QUEUE");
inline constexpr std::int64_t kCauseProbe = script_constant("CAUSE_PROBE");
inline constexpr std::size_t kMaxPolicies = static_cast<std::size_t>(script_constant("MAX_POLICIES"));
inline constexpr std::size_t kMaxIdBytes = static_cast<std::size_t>(script_constant("MAX_ID_BYTES"));
inline constexpr std::int64_t kMicrosPerSecond = script_constant("MICROS_PER_SECOND");

static_assert(kMaxPolicies == QuotaStore::kMaxPolicies, "the script keeps as many policies as every store");

// The script learns within the bounds every store keeps to.
consteval bool same_micros(std::string_view name, Duration d) {
  return script_constant(name) == std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}
static_assert(script_constant("LEARNED_MAX") == LearnedPolicyBounds::kMaxCount);
static_assert(same_micros("LEARNED_MIN_WINDOW", LearnedPolicyBounds::kMinWindow));
static_assert(same_micros("LEARNED_MAX_WINDOW", LearnedPolicyBounds::kMaxWindow));
static_assert(same_micros("LEARNED_MAX_HOLD", LearnedPolicyBounds::kMaxHold));
static_assert(script_constant("LEARNED_RAISE_AFTER") == LearnedPolicyBounds::kRaiseAfter);
static_assert(script_constant("LEARNED_BARE_SHRINK") == LearnedPolicyBounds::kBareShrink);
static_assert(same_micros("STATED_STEP", LearnedPolicyBounds::kStatedStep));
static_assert(kMicrosPerSecond == std::micro::den, "script times are microseconds");

// The script's text, as CMake generated it from pacer.lua (constants filled in).
std::string_view pacer_script() noexcept;

// What one run of the script gave.
struct ScriptReply {
  enum class Kind : std::uint8_t {
    kOk,       // `values` holds the integers it returned
    kNoReply,  // the connection failed (timeout, closed): nothing is known
    kError,    // Redis answered with an error: `error` (server bytes, at most 200)
  };
  Kind kind = Kind::kNoReply;
  std::vector<long long> values;  // a string element counts 0 here
  std::string error;
  std::string text{};  // the reply's first string element (a unit's name), at most kMaxTextBytes
};
inline constexpr std::size_t kMaxTextBytes = 64;

class Connection;

// Runs pacer.lua by its digest. The digest is what SCRIPT LOAD answers, asked
// once and kept; when Redis has lost the script (NOSCRIPT: a restart, SCRIPT
// FLUSH) it is loaded again and the call retried once. Thread-safe.
class PacerScript {
 public:
  // `args` are the operation's ARGV; every command sent is counted in `round_trips`.
  ScriptReply run(Connection& connection, std::string_view key, std::span<const std::string> args,
                  std::atomic<std::uint64_t>& round_trips);

  // The digest in use; empty until the first load.
  std::string digest() const;

 private:
  ScriptReply load(Connection& connection, std::string& digest, std::atomic<std::uint64_t>& round_trips);

  mutable detail::Mutex mu_;
  std::string digest_ ABIDE_GUARDED_BY(mu_);
};

}  // namespace abide::redis_detail
