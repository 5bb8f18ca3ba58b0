// `abide fetch` end to end, what fetch says on stderr: wait announcements, the progress line, --verbose decisions and warnings, unread vendor headers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/fetch_cli.h"
#include "support/run.h"

namespace abide::test {
namespace {

TEST(FetchTalk, HelpRuns) {
  const RunResult r = run(fetch_argv({"--help"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace abide::test
