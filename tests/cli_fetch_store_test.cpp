// `abide fetch` end to end, --store at start: a Redis that cannot be used is a configuration error unless --store-fallback; --fail-closed; redis://unix:.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/fetch_cli.h"
#include "support/run.h"

namespace abide::test {
namespace {

TEST(FetchStore, HelpRuns) {
  const RunResult r = run(fetch_argv({"--help"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace abide::test
