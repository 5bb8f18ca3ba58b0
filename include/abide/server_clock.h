// abide/server_clock.h: one origin's server clock, learned from the Date of
// many responses, so that a wait for a server's time (docs/RULES.md rule 3) costs
// less than the whole second a single Date leaves open.
//
// It sits below signals.h: it includes nothing of abide but clock.h.
#pragma once

#include <memory>
#include <optional>

#include "abide/clock.h"

namespace abide {

// What one origin's server clock reads, learned from the Date of many responses.
//
// A Date names a whole second, rounded down, so one response alone says only
// that the server's clock was at most a second ahead of it; taken alone (rule 3)
// that costs up to a second on every wait for a server's time. Against the
// monotonic clock, the server's time at any response is at least
// `Date_i + (mono - mono_i)` and below `Date_i + 1 s + (mono - mono_i)` (plus
// the time answer i took) for every earlier response i, so the best of many is
// close to the truth. Both bounds allow for 100 ppm of drift between the two
// clocks.
//
// An origin may be several servers behind a load balancer, whose clocks differ
// by a fraction of a second: a floor learned from the fastest would make a
// slower one's dates early. A Date outside the bounds (its second ends at or
// before the floor, or begins at or after the ceiling) shows that. The first
// such Date off by a second or more is taken as the server's clock having been
// set (it starts afresh from that Date); any other contradiction means several
// clocks, and the origin's floor is no longer used (floor_at() is nullopt from
// then on): each answer is then read by its own Date alone, never early.
// Until a contradiction shows, clocks that differ by less than a second cannot
// be told from one, so the floor is trusted only once 16 Dates agreed with it
// (trusted_floor_at(), what observe() is given in
// ObserveOptions::server_time_floor): a second clock shows in each
// of its answers with a probability of about its difference. Thread-safe.
class ServerClock {
 public:
  ServerClock();
  ~ServerClock();
  ServerClock(const ServerClock&) = delete;
  ServerClock& operator=(const ServerClock&) = delete;

  // Learns from one response: its Date and its monotonic receive time; a
  // response without Date teaches nothing. `sent`: when its request was sent,
  // if known; the Date was written between the two, so without it a slow
  // answer can look like a second clock (the floor is then given up, never
  // made early).
  void learn(std::optional<WallTime> server_date, MonoTime received,
             std::optional<MonoTime> sent = std::nullopt) noexcept;
  // The same for a response's Signals (abide/signals.h): its server_date and
  // received_mono. A template so that this header needs nothing above it.
  template <class Response>
  requires requires(const Response& r) {
    r.server_date;
    r.received_mono;
  }
  void learn(const Response& response, std::optional<MonoTime> sent = std::nullopt) noexcept {
    learn(response.server_date, response.received_mono, sent);
  }
  // A lower bound of the server's clock at monotonic time `at`; nullopt before
  // any Date, and once the origin has shown several clocks.
  std::optional<WallTime> floor_at(MonoTime at) const noexcept;
  // floor_at() once enough Dates agreed with it, else nullopt: the floor to
  // pass to observe() (ObserveOptions::server_time_floor).
  std::optional<WallTime> trusted_floor_at(MonoTime at) const noexcept;
  // True once Dates showed more than one clock (or a clock set twice).
  bool several_clocks() const noexcept;

 private:
  struct State;  // the bounds learned, and the mutex that guards them (src/server_clock.cpp)
  std::unique_ptr<State> state_;
};

}  // namespace abide
