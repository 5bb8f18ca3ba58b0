// The public structured-field conformance suite, every case of every file:
// parsing tests (top folder) are parsed, compared with `expected`, then
// serialized and compared with the canonical form; `expected` is also
// serialized from its JSON form. Serialisation tests (serialisation-tests/)
// serialize `expected` and compare with `canonical`, or expect a failure.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "abide/sf_value.h"
#include "sf_json.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace abide;
using namespace abide::cli::sfjson;

const fs::path kSuite{ABIDE_SF_SUITE_DIR};

std::vector<fs::path> json_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

json load(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// The canonical form a case expects: `canonical` when present, else `raw`;
// an empty array means "no field", which serializes to "".
std::string expected_canonical(const json& c) {
  const json& forms = c.contains("canonical") ? c["canonical"] : c["raw"];
  std::string out;
  for (std::size_t i = 0; i < forms.size(); ++i) {
    if (i != 0) out += ", ";
    out += forms[i].get<std::string>();
  }
  return out;
}

TEST(SfConformance, Parsing) {
  if (!fs::is_directory(kSuite)) GTEST_SKIP() << "structured-field suite not found at " << kSuite;
  int cases = 0, optional_failed = 0;
  for (const auto& file : json_files(kSuite)) {
    for (const json& c : load(file)) {
      const std::string name = file.filename().string() + ": " + c["name"].get<std::string>();
      SCOPED_TRACE(name);
      ++cases;
      const std::string type = c["header_type"].get<std::string>();
      std::vector<std::string> raw_lines = c["raw"].get<std::vector<std::string>>();
      std::vector<std::string_view> lines(raw_lines.begin(), raw_lines.end());
      const bool must_fail = c.value("must_fail", false);
      const bool can_fail = c.value("can_fail", false);
      auto parsed = parse_to_json(type, lines);
      if (must_fail) {
        EXPECT_FALSE(parsed.has_value()) << "parsed as " << (parsed ? parsed->dump() : "");
        continue;
      }
      if (!parsed) {
        if (can_fail) {
          ++optional_failed;
        } else {
          ADD_FAILURE() << "rejected: " << sf::describe(parsed.error());
        }
        continue;
      }
      EXPECT_EQ(*parsed, c["expected"]) << "got " << parsed->dump() << "\nwant " << c["expected"].dump();
      auto canonical = parse_to_canonical(type, lines);
      ASSERT_TRUE(canonical.has_value()) << sf::describe(canonical.error());
      EXPECT_EQ(*canonical, expected_canonical(c));
      std::string why;
      auto formatted = format_json(type, c["expected"], why);
      ASSERT_TRUE(formatted.has_value()) << why;
      EXPECT_EQ(*formatted, expected_canonical(c));
    }
  }
  std::cout << "structured-field parsing cases run: " << cases << " (optional cases rejected: " << optional_failed
            << ")\n";
  EXPECT_GT(cases, 0);
}

TEST(SfConformance, Serialisation) {
  const fs::path dir = kSuite / "serialisation-tests";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "structured-field suite not found at " << dir;
  int cases = 0;
  for (const auto& file : json_files(dir)) {
    for (const json& c : load(file)) {
      SCOPED_TRACE(file.filename().string() + ": " + c["name"].get<std::string>());
      ++cases;
      std::string why;
      auto formatted = format_json(c["header_type"].get<std::string>(), c["expected"], why);
      if (c.value("must_fail", false)) {
        EXPECT_FALSE(formatted.has_value()) << "serialized as " << (formatted ? *formatted : "");
        continue;
      }
      ASSERT_TRUE(formatted.has_value()) << why;
      EXPECT_EQ(*formatted, expected_canonical(c));
    }
  }
  std::cout << "structured-field serialisation cases run: " << cases << "\n";
  EXPECT_GT(cases, 0);
}

}  // namespace
