// `abide fetch` end to end, what fetch says on stderr: wait announcements, the progress line, --verbose decisions and warnings, unread vendor headers.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <regex>
#include <string>
#include <vector>

#include "abide/planner.h"
#include "abide/signals.h"
#include "abide/testing/manual_clock.h"
#include "fetch/fetch_progress.h"
#include "fetch/fetch_verbose.h"
#include "support/fetch_cli.h"
#include "support/run.h"

namespace abide::test {
namespace {

using abide::cli::Progress;
using abide::cli::ProgressOptions;
using Kind = ClientEvent::Kind;
using WaitKind = ClientEvent::WaitKind;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// --- the Progress object, fed by hand ---------------------------------------

// Local time is what announcements show: the tests pin it to UTC.
const bool kUtc = [] {
  setenv("TZ", "UTC", 1);
  tzset();
  return true;
}();

// A Progress over a manual clock, its lines captured in a temporary file.
struct Talk {
  explicit Talk(std::size_t total, ProgressOptions o = {}) {
    out = std::tmpfile();
    o.mono = &clock.monotonic();
    o.wall = &clock.wall();
    o.out = out;
    progress = std::make_unique<Progress>(total, o);
  }
  ~Talk() {
    progress.reset();
    if (out != nullptr) std::fclose(out);
  }
  std::string said() const {
    std::fflush(out);
    std::string s;
    std::rewind(out);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, out)) > 0;) s.append(buf, n);
    return s;
  }

  ClientEvent event(Kind k, std::size_t index, const Request& r) const {
    ClientEvent e;
    e.kind = k;
    e.index = index;
    e.request = &r;
    e.at = clock.mono_now();
    return e;
  }
  // The events of one request's answer: observed, decided, and (on a retry) its wait.
  void answer(std::size_t index, const Request& r, int status, const HeaderList& headers, Basis basis,
              Decision decision, Duration wait) {
    const Signals s = observe(status, headers, clock.wall_now(), clock.mono_now());
    ClientEvent e = event(Kind::kResponseObserved, index, r);
    e.signals = &s;
    progress->on_event(e);
    Plan plan;
    plan.decision = decision;
    plan.basis = basis;
    plan.status = status;
    plan.wait = wait;
    e = event(Kind::kDecision, index, r);
    e.plan = &plan;
    e.reason = "a reason";
    progress->on_event(e);
    if (decision == Decision::kRetry) wait_starts(index, r, WaitKind::kRetry, wait);
  }
  void wait_starts(std::size_t index, const Request& r, WaitKind kind, Duration wait = {}) {
    ClientEvent e = event(Kind::kWaitStarted, index, r);
    e.wait_kind = kind;
    e.wait = wait;
    progress->on_event(e);
  }
  void wait_ends(std::size_t index, const Request& r, WaitKind kind) {
    ClientEvent e = event(Kind::kWaitEnded, index, r);
    e.wait_kind = kind;
    progress->on_event(e);
  }
  void finished(std::size_t index, const Request& r) {
    engine::RequestOutcome outcome;
    ClientEvent e = event(Kind::kFinished, index, r);
    e.outcome = &outcome;
    progress->on_event(e);
    progress->on_done();
  }

  ManualClock clock{WallTime{std::chrono::seconds{1767225600}}};  // 2026-01-01T00:00:00Z
  std::FILE* out = nullptr;
  std::unique_ptr<Progress> progress;
};

Request get(const std::string& url) {
  Request r;
  r.url = url;
  return r;
}

TEST(ProgressWords, DurationsNeverShorterThanTheyAre) {
  using namespace std::chrono;
  EXPECT_EQ(cli::human_duration(Duration::zero()), "0 s");
  EXPECT_EQ(cli::human_duration(milliseconds(5001)), "6 s");
  EXPECT_EQ(cli::human_duration(seconds(119)), "119 s");
  EXPECT_EQ(cli::human_duration(seconds(125)), "2 min 5 s");
  EXPECT_EQ(cli::human_duration(seconds(3600)), "1 h");
  EXPECT_EQ(cli::human_duration(seconds(3601)), "1 h 1 min");
  EXPECT_EQ(cli::human_duration(seconds(86400)), "1 d");
  EXPECT_EQ(cli::human_duration(seconds(86401)), "1 d 1 h");
  EXPECT_EQ(cli::human_duration(kMaxDuration), "106752 d");  // no overflow
}

TEST(LearnedWords, SayTheCountTheWindowAndHowItWasFound) {
  LearnedPolicy p;
  p.count = 20;
  p.window = std::chrono::seconds{2};
  p.window_measured = true;
  p.windows = 3;
  EXPECT_EQ(cli::learned_text(p), "about 20 per 2 s, from 3 windows");
  p.window = std::chrono::milliseconds{1500};
  p.window_measured = false;
  p.windows = 1;
  EXPECT_EQ(cli::learned_text(p),
            "about 20 per 1.5 s, from 1 window (the window's length guessed from one Retry-After)");
  p.window = std::chrono::milliseconds{250};
  p.from_retry_after = false;
  EXPECT_EQ(cli::learned_text(p), "about 20 per 250 ms, from 1 window (limited answers without Retry-After)");
  // Bare 429s' first search has found no window's end yet: no length is made up.
  p.window = Duration::zero();
  p.windows = 0;
  EXPECT_EQ(cli::learned_text(p),
            "about 20 per window (its length not found yet), from 0 windows (limited answers without Retry-After)");
}

TEST(ProgressWords, LocalTimeHasTheDateOnlyWhenNotToday) {
  const WallTime now{std::chrono::seconds{1767225600}};  // 2026-01-01T00:00:00Z
  EXPECT_EQ(cli::local_time_text(now + std::chrono::seconds{3725}, now), "01:02:05");
  EXPECT_EQ(cli::local_time_text(now + std::chrono::hours{24}, now), "2026-01-02 00:00:00");
}

TEST(ProgressAnnounce, LongRetryAfterWaitIsAnnouncedWithLengthEndReasonAndResumeHint) {
  ProgressOptions o;
  o.resume_file = "left.json";
  Talk t(1, o);
  const Request r = get("http://user:secret@api.example.com:8080/items/1");
  t.answer(0, r, 429, {{"Retry-After", "30"}}, Basis::kRetryAfter, Decision::kRetry, std::chrono::seconds{30});
  const std::string s = t.said();
  EXPECT_EQ(count(s, "\n"), 1u) << s;
  EXPECT_NE(s.find("abide fetch: waiting 30 s (until 00:00:30) for the Retry-After of http://api.example.com:8080"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("Ctrl-C stops and saves what is left to left.json for --resume"), std::string::npos) << s;
  EXPECT_EQ(s.find("secret"), std::string::npos) << s;  // no credential of the URL
}

TEST(ProgressAnnounce, WaitsOfOneCooldownAreAnnouncedOnce) {
  Talk t(4);
  const Request a = get("http://api.example.com/1"), b = get("http://api.example.com/2"),
                c = get("http://api.example.com/3"), other = get("http://other.example.com/1");
  t.answer(0, a, 429, {{"Retry-After", "60"}}, Basis::kRetryAfter, Decision::kRetry, std::chrono::seconds{60});
  t.clock.advance(std::chrono::milliseconds{300});
  // Another answer of the same cooldown, and a request held by the pacer for it.
  t.answer(1, b, 429, {{"Retry-After", "60"}}, Basis::kRetryAfter, Decision::kRetry, std::chrono::seconds{60});
  t.wait_starts(2, c, WaitKind::kPacer);
  EXPECT_EQ(count(t.said(), "abide fetch: waiting"), 1u) << t.said();
  // Another origin's wait is its own cause.
  t.answer(3, other, 429, {{"Retry-After", "60"}}, Basis::kRetryAfter, Decision::kRetry, std::chrono::seconds{60});
  EXPECT_EQ(count(t.said(), "abide fetch: waiting"), 2u) << t.said();
  EXPECT_EQ(count(t.said(), "other.example.com"), 1u) << t.said();
}

TEST(ProgressAnnounce, PacerHeldByAKnownCooldownIsAnnouncedWithItsEnd) {
  Talk t(2);
  const Request a = get("http://api.example.com/1"), b = get("http://api.example.com/2");
  // A 200 whose quota is exhausted for 40 s: nothing to retry, the next request waits.
  t.answer(0, a, 200, {{"RateLimit-Policy", "\"d\";q=10;w=60"}, {"RateLimit", "\"d\";r=0;t=40"}}, Basis::kNone,
           Decision::kDone, {});
  t.finished(0, a);
  EXPECT_EQ(t.said(), "");
  t.wait_starts(1, b, WaitKind::kPacer);
  EXPECT_NE(t.said().find("waiting 40 s (until 00:00:40) for the quota reset of http://api.example.com"),
            std::string::npos)
      << t.said();
}

TEST(ProgressAnnounce, NothingForShortWaitsSilenceOrWaitsThatDoNotHappen) {
  {
    Talk t(1);
    const Request r = get("http://api.example.com/1");
    t.answer(0, r, 503, {}, Basis::kBackoff, Decision::kRetry, std::chrono::milliseconds{4900});
    EXPECT_EQ(t.said(), "");
  }
  {
    ProgressOptions o;
    o.silent = true;
    Talk t(1, o);
    const Request r = get("http://api.example.com/1");
    t.answer(0, r, 429, {{"Retry-After", "600"}}, Basis::kRetryAfter, Decision::kRetry, std::chrono::seconds{600});
    EXPECT_EQ(t.said(), "");
  }
  {
    // A cooldown beyond --max-wait defers the requests it holds: no wait.
    ProgressOptions o;
    o.max_wait = std::chrono::seconds{60};
    Talk t(2, o);
    const Request a = get("http://api.example.com/1"), b = get("http://api.example.com/2");
    t.answer(0, a, 429, {{"Retry-After", "86400"}}, Basis::kRetryAfter, Decision::kDeferred, {});
    t.finished(0, a);
    t.wait_starts(1, b, WaitKind::kPacer);
    EXPECT_EQ(t.said(), "");
  }
}

TEST(ProgressAnnounce, BackoffAndTheDateOfALaterDay) {
  Talk t(1);
  t.clock.advance(std::chrono::hours{23} + std::chrono::minutes{59});
  const Request r = get("https://api.example.com/1");
  t.answer(0, r, 503, {}, Basis::kBackoff, Decision::kRetry, std::chrono::minutes{2});
  EXPECT_NE(t.said().find("waiting 2 min (until 2026-01-02 00:01:00) for backoff after HTTP 503 from "
                          "https://api.example.com;"),
            std::string::npos)
      << t.said();
}

TEST(ProgressAnnounce, PacerSpacingIsSaidOncePerQuotaWindow) {
  const HeaderList quota{{"RateLimit-Policy", "\"d\";q=100;w=120"}, {"RateLimit", "\"d\";r=12;t=120"}};
  {
    Talk t(4);
    const Request a = get("http://api.example.com/1"), b = get("http://api.example.com/2"),
                  c = get("http://api.example.com/3"), d = get("http://api.example.com/4");
    t.answer(0, a, 200, quota, Basis::kNone, Decision::kDone, {});
    t.finished(0, a);
    t.wait_starts(1, b, WaitKind::kPacer);
    t.wait_starts(2, c, WaitKind::kPacer);
    const std::string s = t.said();
    EXPECT_EQ(count(s, "\n"), 1u) << s;
    EXPECT_NE(s.find("abide fetch: spacing requests to http://api.example.com about 10 s apart, so that its quota "
                     "(12 left, resets in 2 min) lasts; Ctrl-C stops and saves what is left for --resume"),
              std::string::npos)
        << s;
    // The quota's next window is said again.
    t.clock.advance(std::chrono::seconds{121});
    t.answer(1, b, 200, quota, Basis::kNone, Decision::kDone, {});
    t.wait_starts(3, d, WaitKind::kPacer);
    EXPECT_EQ(count(t.said(), "spacing requests"), 2u) << t.said();
  }
  {
    ProgressOptions o;
    o.burst = true;  // nothing is spaced
    Talk t(2, o);
    const Request a = get("http://api.example.com/1"), b = get("http://api.example.com/2");
    t.answer(0, a, 200, quota, Basis::kNone, Decision::kDone, {});
    t.wait_starts(1, b, WaitKind::kPacer);
    EXPECT_EQ(t.said(), "");
  }
  {
    Talk t(2);  // 1 s apart: not worth a line
    const Request a = get("http://api.example.com/1"), b = get("http://api.example.com/2");
    t.answer(0, a, 200, {{"RateLimit", "\"d\";r=100;t=100"}}, Basis::kNone, Decision::kDone, {});
    t.wait_starts(1, b, WaitKind::kPacer);
    EXPECT_EQ(t.said(), "");
  }
}

TEST(ProgressLine, ShowsTheLongestWaitAndItsReason) {
  Talk t(3);
  const Request a = get("http://api.example.com/1"), b = get("http://b.example.com/1"), c = get("http://c.example/1");
  t.answer(0, a, 429, {{"Retry-After", "30"}}, Basis::kRetryAfter, Decision::kRetry, std::chrono::seconds{30});
  t.answer(1, b, 503, {}, Basis::kBackoff, Decision::kRetry, std::chrono::seconds{8});
  t.wait_starts(2, c, WaitKind::kPacer);  // no known end
  t.clock.advance(std::chrono::seconds{10});
  const std::string line = t.progress->line(t.clock.mono_now());
  EXPECT_NE(line.find("[0/3]"), std::string::npos) << line;
  EXPECT_NE(line.find("3 waiting"), std::string::npos) << line;
  EXPECT_NE(line.find("longest wait 20 s: the Retry-After of http://api.example.com"), std::string::npos) << line;
  // Once it ends, the next longest.
  t.wait_ends(0, a, WaitKind::kRetry);
  t.finished(0, a);
  const std::string after = t.progress->line(t.clock.mono_now());
  EXPECT_EQ(after.find("longest wait"), std::string::npos) << after;  // b's 8 s are over too
  EXPECT_NE(after.find("held by the pacer's spacing of requests to http://c.example"), std::string::npos) << after;
}

TEST(ProgressLine, EtaIsNeverBeforeAKnownWaitEnds) {
  Talk t(4);
  const Request a = get("http://api.example.com/1"), b = get("http://api.example.com/2");
  // Two requests done in 4 s: at that rate the other two take 4 s more.
  t.clock.advance(std::chrono::seconds{2});
  t.finished(0, a);
  t.clock.advance(std::chrono::seconds{2});
  t.finished(1, b);
  EXPECT_NE(t.progress->line(t.clock.mono_now()).find("ETA 4 s"), std::string::npos)
      << t.progress->line(t.clock.mono_now());
  // One of them must wait 100 s: the ETA is at least that.
  const Request c = get("http://api.example.com/3");
  t.answer(2, c, 429, {{"Retry-After", "100"}}, Basis::kRetryAfter, Decision::kRetry, std::chrono::seconds{100});
  EXPECT_NE(t.progress->line(t.clock.mono_now()).find("ETA 100 s"), std::string::npos)
      << t.progress->line(t.clock.mono_now());
  // The origin's cooldown holds what remains even while nobody waits on it yet.
  t.wait_ends(2, c, WaitKind::kRetry);
  t.clock.advance(std::chrono::seconds{10});
  EXPECT_NE(t.progress->line(t.clock.mono_now()).find("ETA 90 s"), std::string::npos)
      << t.progress->line(t.clock.mono_now());
}

TEST(ProgressVendor, UnreadVendorHeadersReportedOncePerOriginWithTheFlag) {
  Talk t(3);
  const HeaderList h{{"x-ratelimit-limit", "60"},
                     {"x-ratelimit-remaining", "59"},
                     {"x-ratelimit-used", "1"},
                     {"x-ratelimit-reset", "1767229200"},
                     {"x-ratelimit-resource", "core"}};
  const Request a = get("http://api.example.com/1"), b = get("http://api.example.com/2"),
                c = get("http://other.example/1");
  t.answer(0, a, 200, h, Basis::kNone, Decision::kDone, {});
  t.answer(1, b, 200, h, Basis::kNone, Decision::kDone, {});
  const std::string s = t.said();
  EXPECT_EQ(count(s, "\n"), 1u) << s;
  EXPECT_NE(s.find("abide fetch: http://api.example.com sends x-ratelimit-* headers that no profile reads; "
                   "--profile github (or a --profile-file) would use them"),
            std::string::npos)
      << s;
  t.answer(2, c, 200, h, Basis::kNone, Decision::kDone, {});
  EXPECT_EQ(count(t.said(), "headers that no profile reads"), 2u) << t.said();
}

TEST(ProgressVendor, HeaderNamesAreMadePrintable) {
  Talk t(1);
  const Request a = get("http://api.example.com/1");
  t.answer(0, a, 200, {{"X-RateLimit-\x1b[2J", "1"}}, Basis::kNone, Decision::kDone, {});
  const std::string s = t.said();
  EXPECT_EQ(s.find('\x1b'), std::string::npos) << s;
}

TEST(ProgressLine, OffWhenBodiesShareTheTerminal) {
  ProgressOptions o;
  o.terminal = true;
  o.stdout_same_terminal = true;
  Talk t(1, o);
  t.progress->start();
  t.progress->print_line("a line");
  t.progress->stop();
  EXPECT_EQ(t.said(), "a line\n");  // no \r, no escape sequence
}

// --- the CLI against the mock server ----------------------------------------

TEST(FetchTalk, HelpRuns) {
  const RunResult r = run(fetch_argv({"--help"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Reads the child's output until `what` is on its stderr (at most `timeout`).
bool wait_for_stderr(BackgroundProcess& p, const std::string& what, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (p.err_so_far().find(what) != std::string::npos) return true;
    (void)p.read_line(std::chrono::milliseconds(50));
  }
  return p.err_so_far().find(what) != std::string::npos;
}

TEST(FetchTalk, RetryAfterWaitAnnouncedOnceForABatchWithTheResumeHint) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "60"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  const std::string urls = mock.url_file(dir / "urls.txt", 4);
  // Four workers: one answer is 200, three are 429 with the same Retry-After,
  // and all wait for the same end of the window. stderr is a pipe here.
  BackgroundProcess p(fetch_argv({"--urls", urls, "--jobs", "4", "--max-wait", "3600", "--output-dir", dir / "out",
                                  "--resume-file", dir / "left.json"}));
  ASSERT_TRUE(wait_for_stderr(p, "abide fetch: waiting", 20s)) << p.err_so_far();
  (void)wait_for_stderr(p, "never said", 500ms);  // the other workers' waits start meanwhile
  const RunResult r = p.stop(SIGINT);
  EXPECT_EQ(count(r.err, "abide fetch: waiting"), 1u) << r.err;
  // (The end's date is shown when it falls on another day: a run just before midnight.)
  const std::regex line("abide fetch: waiting [0-9]+ s \\(until ([0-9]{4}-[0-9]{2}-[0-9]{2} )?[0-9]{2}:[0-9]{2}:[0-9]{2}\\) "
                        "for the Retry-After of " +
                        mock.url("") + "; Ctrl-C stops and saves what is left to ");
  EXPECT_TRUE(std::regex_search(r.err, line)) << r.err;
  EXPECT_NE(r.err.find("saves what is left to " + dir / "left.json" + " for --resume\n"), std::string::npos) << r.err;
  // And it does: Ctrl-C kept the unfinished requests.
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_EQ(read_json(dir / "left.json")["requests"].size(), 3u) << r.err;
}

TEST(FetchTalk, NoAnnouncementWithSilent) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "6"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  const RunResult r = run(fetch_argv({"-s", "--jobs", "2", "--max-wait", "60", "--output-dir", dir / "out",
                                      mock.url("/items/1"), mock.url("/items/2")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(mock.stats()["totals"]["limited"], 1) << mock.stats().dump();  // the wait happened
  EXPECT_EQ(r.err, "");
}

TEST(FetchTalk, NoAnnouncementUnderTheThreshold) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "2"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  const RunResult r = run(fetch_argv(
      {"--jobs", "2", "--max-wait", "60", "--output-dir", dir / "out", mock.url("/items/1"), mock.url("/items/2")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(mock.stats()["totals"]["limited"], 1) << mock.stats().dump();
  EXPECT_EQ(r.err.find("waiting"), std::string::npos) << r.err;
}

TEST(FetchTalk, VerbosePrintsEachDecisionOnceAndTheWarnings) {
  Mock mock({"--style", "malformed", "--limit", "1", "--window", "2"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  // A first run takes the window's quota: the second run's request meets a
  // 429 with a garbage Retry-After ("soon") and a valid RateLimit field.
  ASSERT_EQ(run(fetch_argv({"-s", "-o", dir / "first", mock.url("/items/1")})).exit_code, 0);
  const RunResult r = run(fetch_argv({"-v", "-o", dir / "second", mock.url("/items/2")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "warning: Retry-After \"soon\" rejected"), 1u) << r.err;
  EXPECT_EQ(count(r.err, "* [1] retry: "), 1u) << r.err;
  EXPECT_EQ(count(r.err, "* [1] done: "), 1u) << r.err;
  // Each decision's sentence once: the outcome line does not repeat it.
  for (const std::string tag : {"* [1] retry: ", "* [1] done: "}) {
    const auto at = r.err.find(tag);
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string sentence = r.err.substr(at + tag.size(), r.err.find('\n', at) - at - tag.size());
    EXPECT_EQ(count(r.err, sentence), 1u) << sentence << "\n" << r.err;
  }
  EXPECT_NE(r.err.find("* [1] outcome done\n"), std::string::npos) << r.err;
}

TEST(FetchTalk, VendorHeadersWithoutAProfileReportedOncePerOrigin) {
  Mock mock({"--style", "github", "--limit", "100", "--window", "60"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  const std::string urls = mock.url_file(dir / "urls.txt", 3);
  const std::string report = "abide fetch: " + mock.url("") +
                             " sends x-ratelimit-* headers that no profile reads; --profile github (or a "
                             "--profile-file) would use them\n";
  {
    const RunResult r = run(fetch_argv({"--urls", urls, "--jobs", "1", "--output-dir", dir / "a"}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(count(r.err, report), 1u) << r.err;
    EXPECT_EQ(count(r.err, "no profile reads"), 1u) << r.err;
  }
  {
    // -v: the report, and each response's warning about the headers.
    const RunResult r = run(fetch_argv({"-v", "--urls", urls, "--jobs", "1", "--output-dir", dir / "b"}));
    EXPECT_EQ(count(r.err, report), 1u) << r.err;
    EXPECT_EQ(count(r.err, "not interpreted (no vendor profile)"), 3u) << r.err;
  }
  {
    const RunResult r = run(fetch_argv({"-s", "--urls", urls, "--output-dir", dir / "c"}));
    EXPECT_EQ(r.err.find("no profile reads"), std::string::npos) << r.err;
  }
  {
    const RunResult r = run(fetch_argv({"--profile", "github", "--urls", urls, "--output-dir", dir / "d"}));
    EXPECT_EQ(r.err.find("no profile reads"), std::string::npos) << r.err;
  }
}

// What a key learned from its limited answers, where the server announces
// no quota: said with -v when it changes, listed in --stats; nothing where
// the server announces its quota.
TEST(FetchTalk, WhatWasLearnedIsSaidWithVerboseAndListedInStats) {
  TempDir dir;
  // Two-second windows: a Retry-After in whole seconds may state a boundary
  // up to a second late, which a one-second window cannot tell from the next
  // window's (a learned window straddling two counts less than it holds).
  Mock mock({"--style", "retry-after-seconds", "--limit", "4", "--window", "2"});
  ASSERT_GT(mock.port(), 0);
  const std::string origin = mock.url("");
  const RunResult r = run(fetch_argv({"-v", "-j", "4", "-o", "/dev/null", "--stats", dir / "stats.json", "--urls",
                                      mock.url_file(dir / "urls.txt", 10)}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Said when it changes: once learned, and again when late answers or a
  // limited one refine it; the last count said is the one --stats lists.
  const std::string said = "* learned for " + origin + ": ";
  EXPECT_GE(count(r.err, said), 1u) << r.err;
  const json stats = read_json(dir / "stats.json");
  ASSERT_EQ(stats["learned"].size(), 1u) << stats.dump();
  const json& l = stats["learned"][0];
  const std::size_t last = r.err.rfind(said);
  ASSERT_NE(last, std::string::npos) << r.err;
  const std::string last_said = r.err.substr(last + said.size(), r.err.find('\n', last) - last - said.size());
  EXPECT_TRUE(last_said.starts_with("about " + std::to_string(l["count"].get<int>()) + " per ")) << r.err;
  EXPECT_EQ(l["key"], origin);
  EXPECT_EQ(l["from"], "retry-after");
  EXPECT_GE(l["count"].get<int>(), 2) << l.dump();
  EXPECT_LE(l["count"].get<int>(), 4) << l.dump();
  EXPECT_GE(l["window_s"].get<double>(), 1.0) << l.dump();
  EXPECT_LE(l["window_s"].get<double>(), 3.5) << l.dump();
  EXPECT_TRUE(l["text"].get<std::string>().starts_with("about ")) << l.dump();

  Mock announced({"--style", "draft11", "--limit", "4", "--window", "1"});
  ASSERT_GT(announced.port(), 0);
  const RunResult a = run(fetch_argv({"-v", "-j", "4", "-o", "/dev/null", "--stats", dir / "announced.json", "--urls",
                                      announced.url_file(dir / "announced.txt", 8)}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(count(a.err, "* learned"), 0u) << a.err;
  EXPECT_TRUE(read_json(dir / "announced.json")["learned"].empty());

  // Without -v, --stats still lists it (each key asked once, at the end).
  Mock quiet({"--style", "retry-after-seconds", "--limit", "4", "--window", "1"});
  ASSERT_GT(quiet.port(), 0);
  const RunResult q = run(fetch_argv({"-s", "-j", "4", "-o", "/dev/null", "--stats", dir / "quiet.json", "--urls",
                                      quiet.url_file(dir / "quiet.txt", 12)}));
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.err, "");
  const json quiet_stats = read_json(dir / "quiet.json");
  ASSERT_EQ(quiet_stats["learned"].size(), 1u) << quiet_stats.dump();
  EXPECT_EQ(quiet_stats["learned"][0]["key"], quiet.url(""));
}

}  // namespace
}  // namespace abide::test
