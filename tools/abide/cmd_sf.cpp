// abide parse sf / abide format sf: Structured Field Values (RFC 9651) to and
// from the JSON form of the structured-field test suite (sf_json.h).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "abide/sf_value.h"
#include "abide/structured_fields.h"
#include "command.h"
#include "common.h"
#include "sf_json.h"

namespace abide::cli {
namespace cmd_sf {  // private to this file (the CLI is compiled as one unit)

struct ParseSfOptions {
  std::string type;
  bool serialize = false;
  std::vector<std::string> values;
};

struct FormatSfOptions {
  std::string type;
  std::string json;
};

const auto kTypes = CLI::IsMember({"item", "list", "dictionary"});

// Where an offset into the combined field value lies: which line, which byte of it.
std::string locate(const std::vector<std::string>& lines, std::size_t offset) {
  std::string where = "at byte " + std::to_string(offset);
  if (lines.size() < 2) return where;
  std::size_t start = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t end = start + lines[i].size();
    if (offset < end || (offset == end && i + 1 == lines.size())) {
      return where + " (line " + std::to_string(i + 1) + ", byte " + std::to_string(offset - start) + ")";
    }
    if (offset < end + 2)
      return where + " (between lines " + std::to_string(i + 1) + " and " + std::to_string(i + 2) + ")";
    start = end + 2;
  }
  return where;
}

// The value with a caret under the offending byte, when that is readable.
std::string excerpt(const std::vector<std::string>& lines, std::size_t offset) {
  std::string joined;
  for (std::size_t i = 0; i < lines.size(); ++i) joined += (i == 0 ? "" : ", ") + lines[i];
  if (joined.size() > 160) return {};
  for (char c : joined) {
    if (c < 0x20 || c > 0x7E) return {};
  }
  return "\n  " + joined + "\n  " + std::string(offset, ' ') + "^";
}

const Registration parse_sf_cmd{
    {"parse", "sf"},
    "Parse a Structured Field value (RFC 9651) and print it as JSON in the test suite's format",
    [](CLI::App& app) -> Run {
      auto opts = std::make_shared<ParseSfOptions>();
      app.add_option("--type", opts->type, "The field's top-level type: item, list or dictionary")
          ->required()
          ->check(kTypes);
      app.add_flag("--serialize", opts->serialize, "Print the canonical serialization instead of JSON");
      app.add_option("value", opts->values,
                     "The field value; several values are several field lines of one field, combined "
                     "with \", \" (put them after -- if one begins with '-')")
          ->required();
      return [opts] {
        const std::vector<std::string_view> lines(opts->values.begin(), opts->values.end());
        auto rejected = [&opts](const sf::Error& e) {
          return reject("rejected structured field (" + opts->type + "): " + std::string(sf::to_string(e.code)) + " " +
                        locate(opts->values, e.offset) + excerpt(opts->values, e.offset));
        };
        if (opts->serialize) {
          // A value that parsed always serializes, so any error here is a parse error.
          auto text = sfjson::parse_to_canonical(opts->type, lines);
          if (!text) return rejected(text.error());
          std::cout << *text << "\n";
          return kExitOk;
        }
        auto parsed = sfjson::parse_to_json(opts->type, lines);
        if (!parsed) return rejected(parsed.error());
        std::cout << parsed->dump() << "\n";
        return kExitOk;
      };
    }};

const Registration format_sf_cmd{
    {"format", "sf"},
    "Serialize a Structured Field value given as JSON (the test suite's format) to its canonical form",
    [](CLI::App& app) -> Run {
      auto opts = std::make_shared<FormatSfOptions>();
      app.add_option("--type", opts->type, "The field's top-level type: item, list or dictionary")
          ->required()
          ->check(kTypes);
      app.add_option("json", opts->json, "The value as JSON; - or nothing reads standard input");
      return [opts] {
        std::string text = opts->json;
        if (text.empty() || text == "-") {
          auto in = read_input("-");
          if (!in) return kExitRejected;
          text = std::move(*in);
        }
        const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) return reject("rejected JSON: not valid JSON");
        std::string why;
        auto out = sfjson::format_json(opts->type, j, why);
        if (!out) return reject("cannot format structured field (" + opts->type + "): " + why);
        std::cout << *out << "\n";
        return kExitOk;
      };
    }};

}  // namespace cmd_sf
}  // namespace abide::cli
