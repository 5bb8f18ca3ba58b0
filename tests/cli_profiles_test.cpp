// `abide profiles`: the list (one line per profile, sorted), --json, one profile
// in detail, an unknown name, and profiles from --profile-file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "abide/profiles.h"
#include "support/run.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

#ifdef ABIDE_CLI_PATH

using abide::test::abide;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The list line of the profile with this name ("" when none).
std::string line_for(const std::string& text, const std::string& name) {
  for (const auto& l : lines_of(text)) {
    if (l.rfind(name + " ", 0) == 0) return l;
  }
  return {};
}

// A scratch folder with one profile file in it.
struct ProfileDir {
  std::filesystem::path dir;
  explicit ProfileDir(const std::string& name) : dir(std::filesystem::temp_directory_path() / name) {
    std::filesystem::create_directories(dir);
  }
  ~ProfileDir() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& file, const std::string& text) const {
    std::ofstream(dir / file) << text;
    return (dir / file).string();
  }
};

const char* const kAcme = R"({"name": "acme", "description": "Acme \u001b[31mred\u001b[0m API",
  "hosts": ["api.acme.test"],
  "quotas": [{"limit": "x-acme-limit", "remaining": "x-acme-left",
              "reset": {"header": "x-acme-reset", "format": "go_duration"}}]})";

TEST(CliProfiles, OneLinePerBuiltInProfileSortedByName) {
  const auto r = abide({"profiles"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  EXPECT_EQ(lines.size(), abide::ProfileRegistry::builtin().size());
  EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end())) << r.out;
  for (const abide::Profile* p : abide::ProfileRegistry::builtin().all()) {
    EXPECT_FALSE(line_for(r.out, p->name).empty()) << p->name;
  }
}

TEST(CliProfiles, GithubsLineNamesItsHostsAndHeaders) {
  const auto r = abide({"profiles"});
  const std::string gh = line_for(r.out, "github");
  // github.json lists the suffix entry, which covers api.github.com.
  EXPECT_THAT(gh, HasSubstr(".github.com"));
  EXPECT_THAT(gh, HasSubstr("x-ratelimit-reset"));
  const std::string x = line_for(r.out, "x");
  EXPECT_THAT(x, HasSubstr("api.x.com, api.twitter.com"));
  // A profile without hosts says how it is selected.
  EXPECT_THAT(line_for(r.out, "envoy"), HasSubstr("(no hosts: --profile envoy)"));
  // A profile that reads no vendor header says so.
  EXPECT_THAT(line_for(r.out, "slack"), HasSubstr(".slack.com  (no vendor headers)"));
}

TEST(CliProfiles, LongHeaderListsAreCutToOneLine) {
  const auto r = abide({"profiles"});
  for (const auto& l : lines_of(r.out)) {
    // A line may overrun only by one header name that alone does not fit.
    EXPECT_LE(l.size(), 200u) << l;
  }
  bool cut = false;
  for (const abide::Profile* p : abide::ProfileRegistry::builtin().all()) {
    const std::string l = line_for(r.out, p->name);
    if (l.find(" more") != std::string::npos) cut = true;
  }
  // Some vendor reads many headers (OpenAI, Anthropic): the rest is counted.
  EXPECT_TRUE(cut) << r.out;
}

TEST(CliProfiles, JsonListsEveryProfileWithHostsAndHeaders) {
  const auto r = abide({"profiles", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.size(), abide::ProfileRegistry::builtin().size());
  bool github = false;
  std::vector<std::string> names;
  for (const auto& p : j) {
    ASSERT_TRUE(p["name"].is_string());
    ASSERT_TRUE(p["hosts"].is_array());
    ASSERT_TRUE(p["headers"].is_array());
    names.push_back(p["name"]);
    if (p["name"] == "github") {
      github = true;
      EXPECT_EQ(p["hosts"], json::array({".github.com"}));
      EXPECT_NE(std::find(p["headers"].begin(), p["headers"].end(), "x-ratelimit-remaining"), p["headers"].end());
    }
  }
  EXPECT_TRUE(github);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(CliProfiles, OneProfileInDetail) {
  const auto r = abide({"profiles", "github"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(".github.com (github.com and its subdomains)"));
  EXPECT_THAT(r.out, HasSubstr("limited statuses: 429; with a Retry-After or an exhausted quota: 403"));
  EXPECT_THAT(r.out, HasSubstr("x-ratelimit-reset: Unix seconds (unix_seconds)"));
  EXPECT_THAT(r.out, HasSubstr("x-ratelimit-remaining: a whole number (integer)"));
  EXPECT_THAT(r.out, HasSubstr("policy      x-ratelimit-resource"));

  // Names are found in any case, as --profile finds them.
  EXPECT_EQ(abide({"profiles", "GitHub"}).out, r.out);

  const auto j = json::parse(abide({"profiles", "--json", "github"}).out);
  EXPECT_EQ(j["name"], "github");
  ASSERT_EQ(j["quotas"].size(), 1u);
  bool reset = false;
  for (const auto& f : j["quotas"][0]["fields"]) {
    if (f["role"] == "reset") {
      reset = true;
      EXPECT_EQ(f["header"], "x-ratelimit-reset");
      EXPECT_EQ(f["format"], "unix_seconds");
    }
  }
  EXPECT_TRUE(reset) << j.dump();
  EXPECT_EQ(j["limited_statuses_with_signal"], json::array({403}));
}

TEST(CliProfiles, RetryDelaysAndVerdictsInDetail) {
  const auto r = abide({"profiles", "stripe"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("retry verdict (true or false): stripe-should-retry"));
}

TEST(CliProfiles, CostsAndBodyHintsInDetail) {
  const auto r = abide({"profiles", "openai"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  costs: openai (tokens = the larger of the maximum output and the text bytes / 4"));
  EXPECT_THAT(r.out, HasSubstr("waits in a limited answer's body (the first found counts):\n"
                               "    try_again_sentence: \"try again in 1.5s\" in the error message\n"));
  const auto j = json::parse(abide({"profiles", "--json", "openai"}).out);
  EXPECT_EQ(j["costs"], "openai");
  EXPECT_EQ(j["body_hints"], json::array({"try_again_sentence"}));

  const auto g = abide({"profiles", "gemini"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_THAT(g.out, HasSubstr("google_retry_info: error.details[] google.rpc.RetryInfo retryDelay"));
  EXPECT_THAT(g.out, Not(HasSubstr("costs:")));
  const auto gj = json::parse(abide({"profiles", "--json", "gemini"}).out);
  EXPECT_TRUE(gj["costs"].is_null());
  EXPECT_EQ(gj["body_hints"], json::array({"google_retry_info"}));

  const auto a = json::parse(abide({"profiles", "--json", "anthropic"}).out);
  EXPECT_EQ(a["costs"], "anthropic");
  const auto gh = json::parse(abide({"profiles", "--json", "github"}).out);
  EXPECT_TRUE(gh["costs"].is_null());
  EXPECT_EQ(gh["body_hints"], json::array());
  // Azure OpenAI is its own profile now.
  EXPECT_THAT(line_for(abide({"profiles"}).out, "azure-openai"), HasSubstr(".openai.azure.com"));
  EXPECT_THAT(line_for(abide({"profiles"}).out, "openai"), Not(HasSubstr("azure")));
}

TEST(CliProfiles, UnknownProfileExitsOne) {
  const auto r = abide({"profiles", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("unknown profile nope (abide profiles lists them)"));
  EXPECT_TRUE(r.out.empty());
  // A name with control bytes is shown escaped.
  const auto esc = abide({"profiles", "a\x1b[2Jb"});
  EXPECT_EQ(esc.exit_code, 1);
  EXPECT_THAT(esc.err, Not(HasSubstr("\x1b")));
}

TEST(CliProfiles, ProfileFileAddsAndIsShownSafely) {
  const ProfileDir d("abide_cli_profiles_add");
  const std::string acme = d.write("acme.json", kAcme);
  const auto r = abide({"profiles", "--profile-file", acme});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), abide::ProfileRegistry::builtin().size() + 1);
  EXPECT_THAT(line_for(r.out, "acme"), HasSubstr("api.acme.test"));
  EXPECT_THAT(line_for(r.out, "acme"), HasSubstr("x-acme-left"));

  const auto detail = abide({"profiles", "--profile-file", acme, "acme"});
  ASSERT_EQ(detail.exit_code, 0) << detail.err;
  EXPECT_THAT(detail.out, HasSubstr("x-acme-reset: a duration such as 1m30s, from receipt (go_duration)"));
  // The description came from the file: its escape bytes never reach a terminal.
  EXPECT_THAT(detail.out, Not(HasSubstr("\x1b")));
  EXPECT_THAT(detail.out, HasSubstr("red"));
  const auto j = json::parse(abide({"profiles", "--json", "--profile-file", acme, "acme"}).out);
  EXPECT_THAT(j["description"].get<std::string>(), Not(HasSubstr("\x1b")));
}

TEST(CliProfiles, ProfileFileOverridesABuiltInAndIsRepeatable) {
  const ProfileDir d("abide_cli_profiles_override");
  const std::string gh = d.write("gh.json", R"({"name": "github", "hosts": ["github.example"],
    "quotas": [{"remaining": "x-left"}]})");
  const std::string acme = d.write("acme.json", kAcme);
  const auto r = abide({"profiles", "--profile-file", gh, "--profile-file", acme});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), abide::ProfileRegistry::builtin().size() + 1);
  EXPECT_THAT(line_for(r.out, "github"), HasSubstr("github.example"));
  EXPECT_THAT(line_for(r.out, "github"), Not(HasSubstr(".github.com")));
  EXPECT_FALSE(line_for(r.out, "acme").empty());
  // One value per flag: the NAME after the file is the profile to show.
  const auto one = abide({"profiles", "--profile-file", acme, "acme"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("api.acme.test"));
}

TEST(CliProfiles, RejectedProfileFileExitsOneNamingTheField) {
  const ProfileDir d("abide_cli_profiles_bad");
  const std::string bad = d.write("bad.json", R"({"name": "acme", "quotas": [{"limit": 5}]})");
  const auto r = abide({"profiles", "--profile-file", bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("bad.json: quotas[0].limit: expected a header name"));
  const auto missing = abide({"profiles", "--profile-file", (d.dir / "none.json").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_FALSE(missing.err.empty());
}

#else
TEST(CliProfiles, Skipped) { GTEST_SKIP() << "the CLI is not built"; }
#endif

}  // namespace
