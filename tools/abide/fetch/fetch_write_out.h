// `abide fetch -w FORMAT`: what is written after each request, in curl's
// --write-out syntax: %{name} variables, %header{name}, %%, \n \t \r, and
// %{stdout} / %{stderr} to switch where the rest goes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/result.h"

namespace abide::cli {

// One piece of a parsed format.
struct WriteOutPiece {
  enum class Kind : std::uint8_t { kText, kVariable, kHeader, kToStdout, kToStderr };
  Kind kind = Kind::kText;
  std::string text;  // kText: the bytes; kVariable: its name; kHeader: the field name
};

// A format, parsed once for the whole run.
struct WriteOutFormat {
  std::vector<WriteOutPiece> pieces;
  // Variables this abide does not know, in order of appearance, once each: as
  // curl, they are said on stderr and written as nothing.
  std::vector<std::string> unknown;
};

[[nodiscard]] WriteOutFormat parse_write_out(std::string_view format);

// The -w argument as curl takes it: "@FILE" reads the format from FILE ("@-":
// standard input); anything else is the format itself. The error says which
// file and why.
[[nodiscard]] Result<std::string, ErrorMessage> write_out_argument(const std::string& argument);

// What one request gives the variables.
struct WriteOutValues {
  int http_code = 0;                    // the last answer's status; 0: none ("000")
  int http_version = 0;                 // the last answer's, as curl numbers it (11: "1.1"); 0: none ("0")
  std::string url;                      // as given
  std::string url_effective;            // the last URL requested (after -L), printable
  std::string method;                   // the last request's method
  Duration time_total{};                // from the request's start to its end, waits included
  std::int64_t num_retries = 0;         // attempts beyond the first, over every hop
  std::int64_t num_redirects = 0;       // redirects followed
  std::uint64_t size_download = 0;      // body bytes of the final answer
  int exitcode = 0;                     // this request's share of the exit status: 0 or 1
  std::string errormsg;                 // why it failed (printable), empty when done
  std::string outcome;                  // abide's outcome kind
  Duration waited{};                    // abide's waits (pacer and retries), over every hop
  std::int64_t attempts = 0;            // every attempt, over every hop
  std::optional<WallTime> not_before;   // the earliest permitted next attempt, when known
  const HeaderList* headers = nullptr;  // the last answer's head, for %header{name}
};

// The expansion, split by stream.
struct WriteOutText {
  std::string out;  // for stdout
  std::string err;  // for stderr (after %{stderr})
};

[[nodiscard]] WriteOutText expand_write_out(const WriteOutFormat& format, const WriteOutValues& values);

}  // namespace abide::cli
