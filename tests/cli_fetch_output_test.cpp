// `abide fetch` end to end, where answers go: -i, -I, -D, -O, -f, -w, --stats -, and outputs checked before anything is sent.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/fetch_cli.h"
#include "support/run.h"

namespace abide::test {
namespace {

TEST(FetchOutput, HelpRuns) {
  const RunResult r = run(fetch_argv({"--help"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace abide::test
