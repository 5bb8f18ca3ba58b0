// What `abide fetch` says on stderr while it runs, -v aside:
// - the announcement of every wait longer than a few seconds (how long, until
//   when, why, and that Ctrl-C keeps the rest for --resume), once per cause:
//   the requests of one origin held by the same cooldown share one line;
// - the report of vendor-style quota headers that no profile reads, once per
//   origin, with the flag that would read them;
// - on a terminal, the progress line: done/total, in flight, waiting, the
//   longest current wait and its reason, and an ETA that never ends before a
//   known wait does. It is redrawn a few times a second by its own thread,
//   erased when it stops and around every other line printed on stderr.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "abide/client.h"
#include "mutex.h"

namespace abide {
class ProfileRegistry;
}

namespace abide::cli {

// Where fetch's stderr goes, and what the command line asked of it.
struct ProgressOptions {
  bool terminal = false;              // stderr is a terminal
  bool stdout_same_terminal = false;  // stdout is that same terminal (bodies are written there)
  bool silent = false;                // -s
  bool verbose = false;               // -v
  // Waits at least this long are announced. Five seconds: a pause a person
  // notices and starts to wonder about, while the short waits of ordinary
  // pacing and backoff stay quiet.
  Duration announce_after = std::chrono::seconds{5};
  // The run's longest acceptable wait (--max-wait): a cooldown longer than it
  // defers the requests it holds instead of making them wait, so it is not
  // announced as a wait.
  Duration max_wait = kMaxDuration;
  // --pacing burst: the pacer spaces nothing, it only waits out exhausted
  // quotas (announced as cooldowns).
  bool burst = false;
  std::string resume_file;                    // named in the Ctrl-C hint, when given
  const ProfileRegistry* registry = nullptr;  // the profiles to suggest (nullptr: the built-in ones)
  // Injected time (nullptr: the system clocks) and the stream lines go to.
  const MonotonicClock* mono = nullptr;
  const WallClock* wall = nullptr;
  std::FILE* out = nullptr;  // nullptr: stderr
};

// Why a request waits.
struct WaitReason {
  enum class Kind : std::uint8_t { kRetryAfter, kQuota, kBackoff, kPacer, kNotBefore };
  Kind kind = Kind::kPacer;
  std::string origin;  // printable already
  std::string detail;  // kQuota: whose fields ("RateLimit", "github"); kBackoff: after what ("HTTP 503")
};

// "the Retry-After of http://api.example.com", "backoff after HTTP 503 from ...".
std::string reason_text(const WaitReason& cause);

// A duration for people, never shorter than it is: "6 s", "2 min 5 s",
// "3 h 20 min", "2 d 4 h".
std::string human_duration(Duration d);

// `until` as local time: "17:45:12", with the date ("2026-12-02 17:45:12")
// when it is not on the local date of `now`.
std::string local_time_text(WallTime until, WallTime now);

class Progress {
 public:
  // Draws the line only on a terminal, and not with -s or -v, nor when bodies
  // go to the same terminal (the line would run into them, and no write of a
  // body can erase it first: curl turns its meter off then too).
  // kUnknownTotal: a list read as it goes (standard input) is not counted.
  static constexpr std::size_t kUnknownTotal = static_cast<std::size_t>(-1);
  Progress(std::size_t total, const ProgressOptions& options);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts the drawing thread (no-op when the line is off).
  void start();
  // Stops it and erases the line.
  void stop();

  // Counts what the client reports, and announces what needs saying.
  // Thread-safe.
  void on_event(const ClientEvent& e);
  void on_done();

  // Prints a whole line on stderr without tearing the progress line. Thread-safe.
  void print_line(const std::string& line);

  // For -v, so that an outcome does not repeat its decision: the reason
  // printed with request `index`'s last decision, and, at its outcome,
  // whether the outcome's reason is that one (the request is then forgotten).
  void decision_said(std::size_t index, std::string_view reason);
  [[nodiscard]] bool outcome_said(std::size_t index, std::string_view reason);

  // The line as it would be drawn now, or at `now` (for tests).
  std::string line() const;
  std::string line(MonoTime now) const;

 private:
  // One request between its first event and its outcome.
  struct Active {
    std::string key;     // its pacer key (the origin when it has none)
    std::string origin;  // printable
    WaitReason decided;  // why the last decision, if a retry, waits
    std::string quota_source;
    bool waiting = false;
    std::optional<MonoTime> until;  // the current wait's end, when known
    WaitReason cause;               // the current wait's reason
  };
  // One pacer key: its latest known cooldown, and the last wait announced.
  struct KeyState {
    MonoTime cooldown_until{};
    WaitReason cooldown_cause;
    bool announced = false;
    WaitReason::Kind announced_kind = WaitReason::Kind::kPacer;
    MonoTime announced_until{};
    // The smooth pacer's spacing of sends, from the latest quota seen: its
    // length, the quota in words, until when it holds, and whether it was said.
    Duration spacing{};
    std::string spacing_quota;
    MonoTime spacing_until{};
    bool spacing_announced = false;
  };

  Active& active_locked(const ClientEvent& e) ABIDE_REQUIRES(mu_);
  KeyState* key_locked(const std::string& key, MonoTime now) ABIDE_REQUIRES(mu_);
  void observe_locked(Active& a, const ClientEvent& e) ABIDE_REQUIRES(mu_);
  void decision_locked(Active& a, const ClientEvent& e) ABIDE_REQUIRES(mu_);
  void wait_started_locked(Active& a, const ClientEvent& e) ABIDE_REQUIRES(mu_);
  void announce_locked(const Active& a, MonoTime now, MonoTime until, const WaitReason& cause) ABIDE_REQUIRES(mu_);
  void spacing_locked(KeyState& k, const Signals& s, MonoTime now) ABIDE_REQUIRES(mu_);
  void announce_spacing_locked(const Active& a, KeyState& k, MonoTime now) ABIDE_REQUIRES(mu_);
  std::string resume_hint() const;
  void report_vendor_locked(const Active& a, const Signals& s) ABIDE_REQUIRES(mu_);
  void emit_locked(const std::string& line) ABIDE_REQUIRES(mu_);
  std::string line_locked(MonoTime now) const ABIDE_REQUIRES(mu_);
  void draw_locked() ABIDE_REQUIRES(mu_);
  void erase_locked() ABIDE_REQUIRES(mu_);

  const std::size_t total_;
  const ProgressOptions options_;
  const bool enabled_;
  const MonotonicClock& mono_;
  const WallClock& wall_;
  std::FILE* const out_;
  const MonoTime start_;
  std::atomic<std::size_t> done_{0};
  std::atomic<long> in_flight_{0};
  std::atomic<long> waiting_{0};
  mutable detail::Mutex mu_;  // stderr, the drawn state and the bookkeeping below
  std::condition_variable cv_;
  bool stopping_ ABIDE_GUARDED_BY(mu_) = false;
  bool drawn_ ABIDE_GUARDED_BY(mu_) = false;
  std::thread thread_;
  // Bounded: a request leaves at its outcome; keys and origins stop growing at
  // their caps (a batch of a million origins must not grow this without end).
  static constexpr std::size_t kMaxActive = 65536;
  static constexpr std::size_t kMaxKeys = 4096;
  static constexpr std::size_t kMaxReportedOrigins = 1024;
  std::unordered_map<std::size_t, Active> active_ ABIDE_GUARDED_BY(mu_);
  Active overflow_ ABIDE_GUARDED_BY(mu_);  // a request beyond kMaxActive, for the event at hand
  std::map<std::string, KeyState, std::less<>> keys_ ABIDE_GUARDED_BY(mu_);
  std::set<std::string, std::less<>> vendor_reported_ ABIDE_GUARDED_BY(mu_);
  // -v, until the request's outcome.
  std::unordered_map<std::size_t, std::string> decision_said_ ABIDE_GUARDED_BY(mu_);
};

}  // namespace abide::cli
