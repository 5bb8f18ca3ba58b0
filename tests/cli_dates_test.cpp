// `abide parse http-date` and `abide parse retry-after`: output, exit status
// (0 ok, 1 rejected with a message saying why and where, 2 usage) and --now;
// and `abide --help`, which lists the commands this build has.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "support/run.h"

namespace {

// Runs the CLI through support/run.h. (Not abide::test::abide: with GCC 12 at
// -O2 its vector insert at begin() trips a false -Warray-bounds in this file.)
abide::test::RunResult abide(std::initializer_list<std::string> args) {
  std::vector<std::string> argv;
  argv.reserve(args.size() + 1);
  argv.emplace_back(ABIDE_CLI_PATH);
  for (const auto& a : args) argv.push_back(a);
  return abide::test::run(argv);
}

constexpr const char* kNow = "2026-11-29T22:30:00Z";

TEST(CliHelp, ListsOnlyTheCommandsThisBuildHas) {
  const auto r = abide({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* cmd : {"\n  explain ", "\n  format ", "\n  mock-server ", "\n  parse "})
    EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd << "\n" << r.out;
#ifdef ABIDE_TEST_WITH_CURL
  EXPECT_NE(r.out.find("\n  fetch "), std::string::npos) << r.out;
#else
  // Without abide::curl there is no `fetch`: not listed, and a usage error.
  EXPECT_EQ(r.out.find("fetch"), std::string::npos) << r.out;
  EXPECT_EQ(abide({"fetch", "http://127.0.0.1:1/"}).exit_code, 2);
#endif
}

TEST(CliHttpDate, PrintsUnixSecondsForEveryForm) {
  for (const char* v :
       {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"}) {
    const auto r = abide({"parse", "http-date", "--now", kNow, v});
    EXPECT_EQ(r.exit_code, 0) << v << ": " << r.err;
    EXPECT_EQ(r.out, "784111777\n") << v;
    EXPECT_EQ(r.err, "") << v;
  }
}

TEST(CliHttpDate, NowDrivesTheTwoDigitYear) {
  // From 2026-11-29T22:30:00Z, exactly 50 years ahead is 2076 ...
  auto r = abide({"parse", "http-date", "--now", kNow, "Sunday, 29-Nov-76 22:30:00 GMT"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "3373914600\n");
  // ... one second more is 1976 (a Monday).
  r = abide({"parse", "http-date", "--now", kNow, "Monday, 29-Nov-76 22:30:01 GMT"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "218154601\n");
  // From 2100, "76" is 2076 whatever the time of day: the Monday (1976's
  // weekday) is wrong for it, and is read past with a warning, not used to
  // pick the century.
  r = abide({"parse", "http-date", "--now", "2100-01-01T00:00:00Z", "Monday, 29-Nov-76 22:30:01 GMT"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "3373914601\n");
  EXPECT_NE(r.err.find("warning: day name does not match the date"), std::string::npos) << r.err;
}

TEST(CliHttpDate, MismatchedDayNameIsReadWithAWarningInBothModes) {
  // 29 Nov 2026 is a Sunday.
  for (const char* v :
       {"Mon, 29 Nov 2026 13:00:00 GMT", "Monday, 29-Nov-26 13:00:00 GMT", "Mon Nov 29 13:00:00 2026"}) {
    for (const bool lenient : {false, true}) {
      const auto r = lenient ? abide({"parse", "http-date", "--lenient", "--now", kNow, v})
                             : abide({"parse", "http-date", "--now", kNow, v});
      EXPECT_EQ(r.exit_code, 0) << v << ": " << r.err;
      EXPECT_EQ(r.out, "1795957200\n") << v;
      EXPECT_NE(r.err.find("warning: day name does not match the date"), std::string::npos) << v << ": " << r.err;
    }
  }
}

TEST(CliRetryAfter, MismatchedDayNameIsReadWithAWarningInBothModes) {
  for (const char* v :
       {"Mon, 29 Nov 2026 23:30:00 GMT", "Monday, 29-Nov-26 23:30:00 GMT", "Mon Nov 29 23:30:00 2026"}) {
    for (const bool lenient : {false, true}) {
      const auto r = lenient ? abide({"parse", "retry-after", "--lenient", "--now", kNow, v})
                             : abide({"parse", "retry-after", "--now", kNow, v});
      EXPECT_EQ(r.exit_code, 0) << v << ": " << r.err;
      EXPECT_EQ(r.out, "{\"kind\":\"date\",\"unix\":1795995000,\"delay_s\":3600.0}\n") << v;
      EXPECT_NE(r.err.find("warning: day name does not match the date"), std::string::npos) << v << ": " << r.err;
    }
  }
}

TEST(CliHttpDate, RejectedSaysWhyAndWhere) {
  const auto r = abide({"parse", "http-date", "Sun, 06 Nov 1994 08:49:37 UTC"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("expected GMT at byte 26"), std::string::npos) << r.err;
  const auto f = abide({"parse", "http-date", "Wed, 30 Feb 1994 08:49:37 GMT"});
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_NE(f.err.find("at byte 5"), std::string::npos) << f.err;
}

TEST(CliHttpDate, LenientAcceptsAndReportsDeviations) {
  const auto r = abide({"parse", "http-date", "--lenient", "sun, 6 Nov 1994 08:49:37 UTC"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "784111777\n");
  EXPECT_NE(r.err.find("UTC instead of GMT"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("one-digit day"), std::string::npos) << r.err;
  // Lenient still rejects impossible dates.
  EXPECT_EQ(abide({"parse", "http-date", "--lenient", "Sun, 06 Nov 1994 24:00:00 GMT"}).exit_code, 1);
}

TEST(CliHttpDate, UsageErrors) {
  EXPECT_EQ(abide({"parse", "http-date"}).exit_code, 2);
  EXPECT_EQ(abide({"parse", "http-date", "--now", "yesterday", "Sun, 06 Nov 1994 08:49:37 GMT"}).exit_code, 2);
  EXPECT_EQ(abide({"parse", "http-date", "--bogus", "Sun, 06 Nov 1994 08:49:37 GMT"}).exit_code, 2);
  const auto r = abide({"parse", "http-date", "--now", "2026-11-29T22:30:00", "Sun, 06 Nov 1994 08:49:37 GMT"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--now"), std::string::npos) << r.err;
}

TEST(CliRetryAfter, Delay) {
  const auto r = abide({"parse", "retry-after", "120"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"kind\":\"delay\",\"seconds\":120}\n");
  EXPECT_EQ(r.err, "");
}

TEST(CliRetryAfter, DateWithDelayFromNow) {
  auto r = abide({"parse", "retry-after", "--now", kNow, "Sun, 29 Nov 2026 22:32:00 GMT"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"kind\":\"date\",\"unix\":1795991520,\"delay_s\":120.0}\n");
  r = abide({"parse", "retry-after", "--now", "2026-11-29T22:31:59.5Z", "Sun, 29 Nov 2026 22:32:00 GMT"});
  EXPECT_EQ(r.out, "{\"kind\":\"date\",\"unix\":1795991520,\"delay_s\":0.5}\n");
  // A date in the past: zero.
  r = abide({"parse", "retry-after", "--now", kNow, "Sun, 06 Nov 1994 08:49:37 GMT"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"kind\":\"date\",\"unix\":784111777,\"delay_s\":0.0}\n");
}

TEST(CliRetryAfter, SaturatesHugeDelays) {
  const auto r = abide({"parse", "retry-after", "99999999999999999999999999"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"kind\":\"delay\",\"seconds\":9223372036}\n");
  EXPECT_NE(r.err.find("saturated"), std::string::npos) << r.err;
}

TEST(CliRetryAfter, RejectedSaysWhyAndWhere) {
  struct Case {
    const char* value;
    const char* says;
  };
  for (const Case c : {Case{"2.5", "fractional delay at byte 1"}, Case{"12s", "at byte 2"}, Case{"", "empty value"},
                       Case{"soon", "at byte 0"}, Case{"+5", "signed delay at byte 0"}}) {
    const auto r = abide({"parse", "retry-after", c.value});
    EXPECT_EQ(r.exit_code, 1) << c.value;
    EXPECT_EQ(r.out, "") << c.value;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.value << ": " << r.err;
  }
}

TEST(CliRetryAfter, ValuesBeginningWithDashComeAfterDoubleDash) {
  const auto r = abide({"parse", "retry-after", "--", "-5"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("negative delay at byte 0"), std::string::npos) << r.err;
  const auto h = abide({"parse", "http-date", "--", "-Sun, 06 Nov 1994 08:49:37 GMT"});
  EXPECT_EQ(h.exit_code, 1);
  EXPECT_NE(h.err.find("at byte 0"), std::string::npos) << h.err;
}

TEST(CliRetryAfter, LenientRoundsUpAndSaysSo) {
  const auto r = abide({"parse", "retry-after", "--lenient", "2.5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"kind\":\"delay\",\"seconds\":3}\n");
  EXPECT_NE(r.err.find("rounded up"), std::string::npos) << r.err;
  EXPECT_EQ(abide({"parse", "retry-after", "--lenient", "--", "-2.5"}).exit_code, 1);
}

TEST(CliRetryAfter, SeveralFieldLines) {
  auto r = abide({"parse", "retry-after", "60", "120", "junk"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"kind\":\"delay\",\"seconds\":120}\n");
  EXPECT_NE(r.err.find("conflicting"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ignored"), std::string::npos) << r.err;
  r = abide({"parse", "retry-after", "120", "120"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  r = abide({"parse", "retry-after", "junk", "soon"});
  EXPECT_EQ(r.exit_code, 1);
}

TEST(CliRetryAfter, UsageErrors) {
  EXPECT_EQ(abide({"parse", "retry-after"}).exit_code, 2);
  EXPECT_EQ(abide({"parse", "retry-after", "--now", "tomorrow", "5"}).exit_code, 2);
  EXPECT_EQ(abide({"parse", "retry-after", "--nope", "5"}).exit_code, 2);
}

}  // namespace
