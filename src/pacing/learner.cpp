// The learner (learner.h). Times are the kernel's whole microseconds
// (units.h); "none" is the zero instant.
//
// The learner (learner.h), of issue 17. A key whose server announces no quota
// still learns from every limited answer: the window is full, and, with a
// Retry-After, where it ends. The store turns that into "about n per len" and
// enforces it as a counted window of its own, so later windows are spent
// without a limited answer. In the order they matter:
// - It only ever restrains: one more bound on a slot, after the cooldown, the
//   queue and every announced policy, never shortening any. A key with an
//   announced policy (any PolicyUpdate kept) does not learn, and drops what
//   it learned: the server's word wins.
// - Nothing is known before the first limited answer, and nothing restrains
//   then: every request in flight when it comes back is limited too. (A rule
//   that held back an unknown key would slow every server that never limits.)
//   A first limited answer with nothing accepted before it teaches nothing:
//   others spent that window, and "one per window" would throttle a client
//   that joins a busy quota. The next one counts from it.
// - Evidence with a Retry-After: n is the answers accepted since the current
//   window began, and the cooldown's end starts the next window. An answer
//   counts in the window its request was sent in as far as the round trip of
//   the last probe tells (`rtt`); a limited answer received before the window
//   began was in flight when the last one came back and says nothing new; a
//   window where nothing was accepted was placed early, which is no evidence
//   that fewer fit (n stays). The first window's requests went out together
//   and come back in any order: an accepted answer received after the first
//   limited one, before its boundary, adds one to n (not when the boundary
//   is a step away or nearer: a request in flight may have crossed it).
//   A limited answer from a window that has rolled on since (a later slot
//   was granted; its count is gone) lowers n by one: each send over the
//   limit earns one. A boundary within a second after one of the measured
//   windows' grid (before a length is measured: after the guessed window's
//   end) is taken at the grid's (it was stated up to a second late); a
//   limited probe with nothing accepted moves the grid instead.
// - The length: from two boundaries (`anchor` is the last, `since` the
//   windows rolled after it), len = span / windows, so each refines it. Until
//   then a window lasts `guess`: the first cooldown, at least a second (the
//   rest of a window is a poor guess of one), confirmed as len when a probe at
//   its end is accepted.
// - A cooldown that voids reservations before a learned window begins
//   zeroes its count: the slots were never sent, and asked again they would
//   count twice.
// - Enforcing: n sends per window, burst, or smooth up to the window's end
//   less a second (at most half of it): boundaries are stated in whole seconds
//   and may be up to one late. The first send of each window is a probe, as
//   after any window: a window placed early costs that one limited answer,
//   never a burst of them.
// - Bare 429s (no Retry-After): the window is full and its end unknown. n
//   drops to what it held and the key is held; one probe at a time looks for
//   the end, each limited probe lengthening the hold by half (from kFirstHold,
//   or len/8 once a length is known, up to kMaxHold): finer than doubling,
//   which overshoots by up to the time searched. As with a Retry-After, the
//   first window's answers come back in any order: one accepted in the first
//   search, before its first probe is answered, went out with that window
//   (nothing else was granted since) and adds one to n. The probe that is accepted
//   begins the next window (the first search's length, like the first
//   cooldown, is the rest of a window, so at least a second is guessed).
//   Two found ends give the length, each known to its search's last hold
//   (fit_length). Found ends are late, never early, so each quiet
//   window spent in full shortens len by 1/kBareShrink until a window-start probe is
//   limited and a short search places it again: the AIMD of bare 429s, a cut
//   on a limited answer and a slow raise while answers succeed.
// - Following the server: a limited answer inside a learned window sets n to
//   what it held at once (a lowered limit); every kRaiseAfter windows spent
//   in full without one (idle windows say nothing), n
//   grows by n/16, at least 1 (a raised limit is found again, slowly, for one
//   limited probe each time it goes past).
// - Bounded: a fixed handful of numbers per key; counts in [1, kMaxLearned],
//   lengths and holds in [kMinLearnedWindow, kMaxLearnedWindow].
// The kernel enforces what is learned (kernel.cpp: the learned bound in
// acquire, commit_learned) and counts the accepted answers; a server that
// never limits never reaches this file.
#include "pacing/learner.h"

#include <algorithm>
#include <cmath>

namespace abide::pacing {
namespace {

constexpr Instant kNone{};
constexpr Micros kFirstHold = std::chrono::duration_cast<Micros>(LearnedPolicyBounds::kFirstHold);
constexpr Micros kMaxHold = kMaxLearnedHold;
constexpr std::int64_t kHoldGrowth = LearnedPolicyBounds::kHoldGrowth;

// The windows a boundary `span` after the anchor closes, at the measured
// length; one until a length is measured: the first guess may be far too
// short (the first limit came late in its window), so it counts only once a
// probe at its end was accepted.
std::int64_t windows_in(const Learned& l, Micros span) {
  if (l.len <= Micros::zero()) return 1;
  return std::max<std::int64_t>(1,
                                std::llround(static_cast<double>(span.count()) / static_cast<double>(l.len.count())));
}

// A boundary `span` after the anchor: the window's length, averaged over the
// windows in between (so each one refines it).
void learn_length(Learned& l, Micros span) {
  if (span <= Micros::zero()) return;
  l.len = clamp_learned(span / windows_in(l, span));
}

// Bare 429s: a span between two ends found by searches, each late by up to
// its search's last hold and round trip (`found` the anchor's, `late` this
// one's). The windows' length lies in the span's range of error divided by
// the windows between. A length in that range stays, and one above it is cut
// to its top, no further: a span with a coarse end would replace a fair
// length with a poor one (after a first search late by most of a second,
// windows too short, each one a burst of limited answers). One below it
// takes the span's: a window-start probe was limited, the windows were short.
void fit_length(Learned& l, Micros span, Micros late) {
  const std::int64_t windows = windows_in(l, span);
  const Micros lo = (span - std::min(late, span)) / windows;
  const Micros hi = add(span, l.found) / windows;
  const Micros len = l.length();
  l.len = clamp_learned(len > hi ? hi : len >= lo ? len : span / windows);
}

// A window of the learned policy begins at `at` (a boundary the server stated
// or a probe found), `used` sends already in it.
void begin_window(Learned& l, Instant at, std::int64_t used) {
  l.anchor = at;
  l.start = at;
  l.next = at;
  l.since = 0;
  l.used = used;
  l.accepted = used;
  l.quiet = 0;
  l.hold = Micros::zero();
  l.open = true;
  l.windows = std::min(l.windows + 1, kMaxLearned);
}

}  // namespace

Micros clamp_learned(Micros d) { return std::clamp(d, kMinLearnedWindow, kMaxLearnedWindow); }

bool teaches(const Learned& l, const Lesson& a) {
  // A first limited answer with nothing accepted before it teaches nothing
  // (see learn()); every later one does.
  if (a.limited) return l.mode != Learned::kNothing || l.accepted > 0;
  if (l.mode == Learned::kNothing) return false;
  // Accepted answers that place the first window's count, end a bare 429's
  // search, or confirm a guessed length; the rest only count.
  const bool searching = l.mode == Learned::kBare && l.hold > Micros::zero();
  if (l.first && searching && a.received < l.hold_end) return true;
  if (l.first && l.mode == Learned::kRetryAfter && a.received < l.start) return true;
  if (searching && a.received >= l.hold_end) return true;
  return l.len == Micros::zero() && l.since > 0 && a.received >= l.start;
}

void count_accepted(Learned& l, Instant received) {
  // One received after the window's start (and a round trip) was sent in it.
  if (received >= add(l.start, l.rtt)) l.accepted = std::min(l.accepted + 1, kMaxLearned);
}

namespace {

// An accepted answer that teaches (teaches()): one of the first window's,
// the end of a bare 429's search, or a guessed length confirmed.
void learn_accepted(Learned& l, const Lesson& r) {
  const Instant received = r.received;
  if (l.first && l.mode == Learned::kBare && l.hold > Micros::zero() && received < l.hold_end) {
    // The first search: nothing was granted since the first limited answer
    // but its probe, so this request went out before, with the first
    // window's others, and was accepted in it.
    l.n = std::min(l.n + 1, kMaxLearned);
    return;
  }
  if (l.first && l.mode == Learned::kRetryAfter && received < l.start) {
    // The first window: the workers' requests went out together, and the
    // answers come back in any order. One accepted after the first limited
    // answer was in that window too, which held one more.
    l.n = std::min(l.n + 1, kMaxLearned);
    return;
  }
  count_accepted(l, received);
  if (l.mode == Learned::kBare && l.hold > Micros::zero() && received >= l.hold_end) {
    // The probe after the hold was accepted: a window began by the time its
    // answer came back. The search's length is the guess until two are known.
    const Micros late = add(l.hold, l.rtt);
    if (l.anchor != kNone && received > l.anchor) {
      fit_length(l, received - l.anchor, late);
    } else if (l.len == Micros::zero()) {
      l.guess = clamp_learned(std::max(received - l.search_began, kStatedStep));
    }
    l.first = false;
    begin_window(l, received, 1);
    l.found = late;
  } else if (l.len == Micros::zero() && l.since > 0 && received >= l.start) {
    // A window's first send at the guessed length was accepted: the guess holds.
    l.len = l.guess;
  }
}

// The first Retry-After the key learns from: a policy of `held` per window,
// the cooldown the guess of its length.
void begin_retry_after(Learned& l, Micros cooldown, std::int64_t held) {
  l = Learned{};
  l.mode = Learned::kRetryAfter;
  // A short cooldown (the first answer came late in its window) is a poor
  // guess of a window; windows are rarely shorter than the step they are told in.
  l.guess = clamp_learned(std::max(cooldown, kStatedStep));
  l.n = held;
  // Only with a boundary more than a step away: no request in flight
  // then can have crossed into the next window.
  l.first = cooldown > kStatedStep;
}

// The boundary was stated in whole seconds, up to one late. A boundary of
// the measured windows' grid within that second before it is the same one,
// pinned closer: a window placed at the stated one would straddle two of
// the server's, and earn a limited answer in each. (A probe at the grid's
// boundary that is limited, nothing accepted in its window, moves the grid
// instead.) Before a length is measured, the guessed one's next boundary
// counts the same way: learned from the late one, the length would be long
// by up to a second, and no later answer shortens it.
Instant on_grid(const Learned& l, Instant boundary) {
  const Micros unit = l.length();
  const double k =
      std::round(static_cast<double>((boundary - l.anchor).count()) / static_cast<double>(unit.count()));
  if (k >= 1.0 && k < 1e9 && (l.len > Micros::zero() || k == 1.0)) {
    const Instant grid = add(l.anchor, unit * static_cast<std::int64_t>(k));
    if (grid <= boundary && boundary - grid < kStatedStep) return grid;
  }
  return boundary;
}

// A later boundary of a learned Retry-After policy: where the next window
// begins, the length measured to it, and n when the window was placed right.
Instant next_boundary(Learned& l, Instant boundary, std::int64_t held, bool rolled) {
  l.first = false;
  // Nothing accepted in the window yet, or a boundary well before its
  // expected end: the window was placed wrong (the server's had not
  // ended, or ended early), not that fewer sends fit: n stays.
  const bool misplaced = l.accepted == 0 ||
                         add(boundary, kStatedStep) < add(l.start, l.length());
  const Instant at = l.accepted > 0 || rolled ? on_grid(l, boundary) : boundary;
  learn_length(l, at - l.anchor);
  if (!misplaced) l.n = held;
  return at;
}

// A limited answer with a Retry-After: the window is full, and ends at the
// cooldown's end, where the next one begins.
void learn_retry_after(Learned& l, const Lesson& r) {
  // Received before the current window began: it was in flight when the
  // answer that began it came back, and says nothing new.
  bool rolled = false;
  if (l.mode == Learned::kRetryAfter && r.received < l.start) {
    if (r.received < l.anchor) return;
    rolled = true;
    // Limited in a window that has rolled on since (a later slot was
    // granted): that window held one fewer than n, and its count is gone.
    // Each send over the limit earns one such answer, so n follows a
    // lowered limit (or a raise that went past it) one by one.
    l.n = std::max<std::int64_t>(l.n - 1, 1);
    l.quiet = 0;
  }
  const Instant boundary = add(r.now, r.cooldown);
  Instant at = boundary;
  const std::int64_t held = std::clamp<std::int64_t>(l.accepted, 1, kMaxLearned);
  if (l.mode != Learned::kRetryAfter) {
    begin_retry_after(l, r.cooldown, held);
  } else if (boundary > l.anchor) {
    at = next_boundary(l, boundary, held, rolled);
  }
  begin_window(l, at, 0);
}

// A bare 429: the window is full and its end unknown.
void learn_bare(Learned& l, const Lesson& r) {
  const Instant received = r.received;
  const Instant now = r.now;
  if (l.hold > Micros::zero()) {
    // A probe after the hold was limited too: look again later.
    if (received >= l.hold_end) {
      l.first = false;  // answers that come back later may be the next window's
      l.hold = std::min(l.hold + l.hold / kHoldGrowth, kMaxHold);
      l.hold_end = add(now, l.hold);
    }
    return;
  }
  if (l.mode != Learned::kNothing && received < l.start) return;  // in flight before the window began
  // A window that held less than half its n was placed late: the server's
  // began before it, and the rest of that one went in the window before
  // (a found end is late, never early). Its place is searched for again and
  // n stays; dropping n to the few it held would throttle the key for many
  // windows, with nothing to raise it but the slow probe upward.
  const bool misplaced = l.mode != Learned::kNothing && 2 * l.accepted < l.n;
  if (!misplaced) l.n = std::clamp<std::int64_t>(l.accepted, 1, kMaxLearned);
  if (l.mode != Learned::kBare) {
    const std::int64_t n = l.n;
    // The first window's answers come back in any order: those accepted
    // after this one, until the first probe is answered, add to n.
    const bool first = l.mode == Learned::kNothing;
    l = Learned{};
    l.mode = Learned::kBare;
    l.n = n;
    l.first = first;
  }
  // A search near a known length starts fine; the first one starts at kFirstHold.
  const Micros known = l.len > Micros::zero() ? l.len : l.guess;
  l.hold = known > Micros::zero() ? std::clamp(known / 8, kMinLearnedWindow, kMaxHold) : kFirstHold;
  l.hold_end = add(now, l.hold);
  l.search_began = now;
  l.accepted = 0;
  l.used = 0;
  l.quiet = 0;
}

}  // namespace

void learn(Learned& l, const Lesson& r) {
  if (!r.limited) {
    learn_accepted(l, r);
    return;
  }
  // A first limited answer with nothing accepted before it tells no count:
  // the window was spent by others (another process, an earlier run), not
  // that one fits. Learning "one per window" from it would throttle a client
  // that joins a busy quota; the next limited answer counts from here.
  if (l.mode == Learned::kNothing && l.accepted == 0) return;
  // (A cooldown an exhausted quota set comes with its policy, so the key is not learning.)
  if (r.cooldown > Micros::zero()) {
    learn_retry_after(l, r);
  } else {
    learn_bare(l, r);
  }
}


}  // namespace abide::pacing
