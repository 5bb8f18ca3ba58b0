// `abide fetch`: request bodies as curl makes them from its data flags
// (-d/--data, --data-binary, --data-raw, --data-urlencode, --json) and its
// multipart form (-F/--form), and the Basic credential of -u.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/result.h"

namespace abide::cli {

// Why a request cannot be made: the exit status (kExitUsage for a bad flag,
// kExitRejected for an input that cannot be read) and one line to say.
struct FetchError {
  int exit_code = 0;
  std::string message;  // without the "abide fetch: " prefix
};

// Reads the files that flags name ("-": standard input, which can be read
// only once in a run: a second reader is refused rather than given nothing).
class InputFiles {
 public:
  [[nodiscard]] Result<std::string, FetchError> read(const std::string& path, std::string_view flag);
  bool stdin_read() const noexcept { return !stdin_reader_.empty(); }
  const std::string& stdin_reader() const noexcept { return stdin_reader_; }

 private:
  std::string stdin_reader_;  // the flag that read standard input, if one did
};

// curl's --data-urlencode encoding: letters, digits and -._~ stay, a space
// becomes '+', every other byte %XX (upper-case hex).
std::string url_escape(std::string_view text);

// One --data-urlencode argument in curl's five forms: "content", "=content",
// "name=content", "@file", "name@file" (the first '=' or '@' decides; the
// name is sent as given, the content encoded).
[[nodiscard]] Result<std::string, FetchError> urlencoded_part(const std::string& arg, InputFiles& files);

// The body of -d/--data (@FILE: CR and LF dropped), --data-binary (@FILE as
// it is), --data-raw (no @ meaning) and --data-urlencode, joined with '&' as
// curl joins them. The flags are taken in that order (curl keeps the order
// of the command line; a mixed order is joined kind by kind).
struct DataArgs {
  const std::vector<std::string>& data;
  const std::vector<std::string>& binary;
  const std::vector<std::string>& raw;
  const std::vector<std::string>& urlencode;
};
[[nodiscard]] Result<std::string, FetchError> data_body(const DataArgs& args, InputFiles& files);

// The body of --json arguments (@FILE as it is), joined with no separator.
[[nodiscard]] Result<std::string, FetchError> json_body(const std::vector<std::string>& args, InputFiles& files);

// One -F part: name=value, name=@FILE (a file: its name from the path) or
// name=<FILE (the file's content as the value), each with optional
// ";type=MIME" and, for a file, ";filename=NAME".
struct FormPart {
  std::string name;
  std::string value;
  std::optional<std::string> filename;  // a file part
  std::string type;                     // empty: none sent (a file part gets one guessed)
};
[[nodiscard]] Result<FormPart, FetchError> parse_form_part(const std::string& arg, InputFiles& files);

// A multipart/form-data body and the boundary it uses.
struct Multipart {
  std::string body;
  std::string boundary;  // occurs in no part; Content-Type: multipart/form-data; boundary=...
};
// The boundary is the first of a fixed series that occurs in no part (it
// needs no randomness: it is checked), so the same parts give the same bytes
// in every attempt and every resumed run.
[[nodiscard]] Result<Multipart, FetchError> multipart_body(const std::vector<FormPart>& parts);

// Standard base64 with padding (RFC 4648), for Basic credentials.
std::string base64(std::string_view bytes);

}  // namespace abide::cli
