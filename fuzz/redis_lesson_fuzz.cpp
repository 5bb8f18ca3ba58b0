// libFuzzer target for the lesson a Redis record returns (src/redis/
// learned_fields.cpp, which needs no hiredis) and the learner run on it, as
// RedisStore runs it before a publish. Invariants beyond "never crash":
// a decoded policy holds only what the kernel keeps (a known mode, counts in
// [0, kMaxLearned], lengths zero or within the learned bounds, holds and
// round trips at most the longest hold, instants in [0, kMaxMicros]) and
// encodes back to the same numbers; the learner keeps all of that; and the
// kernel, given the result, grants no negative wait.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "learned_fields.h"
#include "pacing/kernel.h"
#include "pacing/learner.h"

namespace {

using abide::pacing::Learned;
using abide::pacing::Micros;

// Names the broken invariant by its line, then stops the run.
void check(bool ok, int line = __builtin_LINE()) {
  if (ok) return;
  std::fprintf(stderr, "redis lesson: the invariant at line %d broke\n", line);
  std::abort();
}

bool span_ok(Micros d) { return d >= Micros::zero() && d <= abide::pacing::kMaxMicros; }
bool learned_length_ok(Micros d) {
  return d >= abide::pacing::kMinLearnedWindow && d <= abide::pacing::kMaxLearnedWindow;
}
bool count_ok(std::int64_t n) { return n >= 0 && n <= abide::pacing::kMaxLearned; }

void check_kept(const Learned& l) {
  check(l.mode == Learned::kNothing || l.mode == Learned::kRetryAfter || l.mode == Learned::kBare);
  for (const std::int64_t n : {l.n, l.since, l.accepted, l.used, l.quiet, l.windows}) check(count_ok(n));
}

long long some_number(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: return in.ConsumeIntegralInRange<long long>(0, 3);
    case 1: return in.ConsumeIntegralInRange<long long>(0, 10'000'000);
    case 2: return in.ConsumeIntegralInRange<long long>(0, 1'000'000'000'000'000);
    default: return in.ConsumeIntegral<long long>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  namespace rd = abide::redis_detail;
  std::size_t length = 7 + rd::kLearnedFields;
  if (in.ConsumeIntegralInRange(0, 7) == 0) length = in.ConsumeIntegralInRange<std::size_t>(0, 40);
  std::vector<long long> reply(length);
  for (std::size_t i = 0; i < reply.size(); ++i) reply[i] = i == 2 ? in.ConsumeIntegralInRange(0, 1) : some_number(in);
  const auto taught = rd::lesson_of(reply);
  if (!taught) return 0;
  check(reply.size() == 7 + rd::kLearnedFields && reply[2] == 1);
  const Learned& l = taught->learned;
  check_kept(l);
  for (const Micros d : {l.len, l.guess}) check(d == Micros::zero() || learned_length_ok(d));
  check(l.hold <= abide::pacing::kMaxLearnedHold && l.rtt <= abide::pacing::kMaxLearnedHold);
  for (const Micros d : {l.hold, l.rtt, l.found}) check(span_ok(d));
  check(rd::fields_of(rd::learned_of(rd::fields_of(l))) == rd::fields_of(l));

  Learned after = l;
  abide::pacing::learn(after, taught->lesson);
  check_kept(after);
  for (const Micros d : {after.len, after.guess}) check(d == Micros::zero() || learned_length_ok(d));
  check(after.hold <= abide::pacing::kMaxLearnedHold);

  abide::pacing::KeyState s;
  s.learned = after;
  const auto now = abide::pacing::mono_of(taught->lesson.now);
  const auto g = abide::pacing::acquire(s, now, std::chrono::hours{48}, abide::PacingRules{});
  check(g.wait >= abide::Duration::zero());
  return 0;
}
