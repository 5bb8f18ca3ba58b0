// A learned policy as pacer.lua passes it: LEARNED_FIELDS whole numbers in the
// order of the script's L_ fields. A record whose answer teaches the learner
// returns a lesson (the answer's part and the policy it learns from); the
// learner's result goes back with OP_PUBLISH.
#pragma once

#include <array>
#include <optional>
#include <span>

#include "pacer_script.h"
#include "pacing/learner.h"

namespace abide::redis_detail {

using LearnedFields = std::array<long long, kLearnedFields>;

// The policy's numbers, in the script's order.
LearnedFields fields_of(const pacing::Learned& l);

// The policy from the script's numbers; each one clamped to what the kernel
// keeps (a damaged or foreign reply teaches nothing wild).
pacing::Learned learned_of(std::span<const long long> fields);

// A record's reply with its lesson: {blocked, released, 1, now, received,
// limited, cooldown, LEARNED_FIELDS...}.
struct ScriptLesson {
  pacing::Lesson lesson;
  pacing::Learned learned;
};
std::optional<ScriptLesson> lesson_of(std::span<const long long> reply);

}  // namespace abide::redis_detail
