// pacing/learner.h: what answers teach a key whose server announces no quota.
//
// The kernel (kernel.h) enforces the learned policy and keeps the learner's
// evidence: the answers accepted in the current window, the last probe's
// round trip, whether a window's probe is answered. The learner reads the few
// answers that change what is learned (teaches(): the limited ones, and those
// that place a window) and turns them into a new policy. It runs in C++ only:
// the kernel's record calls it inside the store's atomic step (MemoryStore,
// the file store), and RedisStore, whose script keeps the kernel alone, gets
// the lesson back from the script and publishes the learned policy with a
// compare-and-set (src/redis/pacer.lua, OP_PUBLISH). The rules are at the head
// of learner.cpp.
#pragma once

#include <cstdint>

#include "abide/quota_store.h"
#include "pacing/kernel.h"

namespace abide::pacing {

// The learned policy's bounds in the kernel's units (pacer.lua takes the same,
// through pacer_script.h).
inline constexpr std::int64_t kMaxLearned = LearnedPolicyBounds::kMaxCount;
inline constexpr Micros kMinLearnedWindow = std::chrono::duration_cast<Micros>(LearnedPolicyBounds::kMinWindow);
inline constexpr Micros kMaxLearnedWindow = std::chrono::duration_cast<Micros>(LearnedPolicyBounds::kMaxWindow);
inline constexpr Micros kMaxLearnedHold = std::chrono::duration_cast<Micros>(LearnedPolicyBounds::kMaxHold);
inline constexpr Micros kStatedStep = std::chrono::duration_cast<Micros>(LearnedPolicyBounds::kStatedStep);

// What one answer says, as the learner reads it.
struct Lesson {
  Instant now{};        // when it was recorded
  Instant received{};   // when it was received (now less its age)
  bool limited = false;
  Micros cooldown{};    // the wait it stated; zero: none (a bare limited answer)
};

// A length within the learned bounds.
Micros clamp_learned(Micros d);

// True when the answer changes what is learned; the others only count
// (count_accepted). Kept the same in pacer.lua, which returns such an answer
// to its caller as a lesson.
bool teaches(const Learned& l, const Lesson& a);

// The kernel's evidence: an accepted answer counts in the window its request
// was sent in, as far as the round trip tells.
void count_accepted(Learned& l, Instant received);

// Applies one answer that teaches() says is the learner's.
void learn(Learned& l, const Lesson& a);

}  // namespace abide::pacing
