#include "learned_fields.h"

#include <algorithm>

namespace abide::redis_detail {
namespace {

using pacing::Instant;
using pacing::Learned;
using pacing::Micros;

constexpr std::size_t kLessonHead = 7;  // blocked, released, 1, now, received, limited, cooldown

long long count(long long v) { return std::clamp<long long>(v, 0, pacing::kMaxLearned); }
Micros span(long long v) { return Micros{std::clamp<long long>(v, 0, pacing::kMaxMicros.count())}; }
Instant instant(long long v) { return Instant{span(v)}; }
// A length or hold: zero ("not yet"), else within the learned bounds.
Micros bounded(long long v, Micros most) {
  return v <= 0 ? Micros::zero() : std::clamp(span(v), pacing::kMinLearnedWindow, most);
}

}  // namespace

LearnedFields fields_of(const Learned& l) {
  const auto at = [](Instant t) { return static_cast<long long>(t.time_since_epoch().count()); };
  const auto us = [](Micros d) { return static_cast<long long>(d.count()); };
  return {static_cast<long long>(l.mode),
          l.n,
          us(l.len),
          us(l.guess),
          at(l.start),
          at(l.anchor),
          l.since,
          l.accepted,
          l.used,
          l.quiet,
          at(l.next),
          us(l.hold),
          at(l.hold_end),
          at(l.search_began),
          l.windows,
          l.open ? 1 : 0,
          us(l.rtt),
          l.first ? 1 : 0,
          us(l.found)};
}

Learned learned_of(std::span<const long long> f) {
  Learned l;
  if (f.size() != kLearnedFields) return l;
  const long long mode = f[0];
  l.mode = mode == Learned::kRetryAfter ? Learned::kRetryAfter : mode == Learned::kBare ? Learned::kBare
                                                                                         : Learned::kNothing;
  l.n = count(f[1]);
  l.len = bounded(f[2], pacing::kMaxLearnedWindow);
  l.guess = bounded(f[3], pacing::kMaxLearnedWindow);
  l.start = instant(f[4]);
  l.anchor = instant(f[5]);
  l.since = count(f[6]);
  l.accepted = count(f[7]);
  l.used = count(f[8]);
  l.quiet = count(f[9]);
  l.next = instant(f[10]);
  l.hold = bounded(f[11], pacing::kMaxLearnedHold);
  l.hold_end = instant(f[12]);
  l.search_began = instant(f[13]);
  l.windows = count(f[14]);
  l.open = f[15] != 0;
  l.rtt = std::min(span(f[16]), pacing::kMaxLearnedHold);
  l.first = f[17] != 0;
  l.found = std::min(span(f[18]), 2 * pacing::kMaxLearnedHold);
  return l;
}

std::optional<ScriptLesson> lesson_of(std::span<const long long> reply) {
  if (reply.size() != kLessonHead + kLearnedFields || reply[2] != 1) return std::nullopt;
  ScriptLesson s;
  s.lesson.now = instant(reply[3]);
  s.lesson.received = instant(reply[4]);
  s.lesson.limited = reply[5] != 0;
  s.lesson.cooldown = span(reply[6]);
  s.learned = learned_of(reply.subspan(kLessonHead));
  return s;
}

}  // namespace abide::redis_detail
