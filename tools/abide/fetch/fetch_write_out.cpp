#include "fetch/fetch_write_out.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>

#include "abide/http_date.h"
#include "common.h"

namespace abide::cli {
namespace fetch_write_out {  // private to this file (the CLI is compiled in unity batches)

// Header values shown by %header{} and %{content_type} are server bytes.
constexpr std::size_t kMaxShownValue = 4096;

constexpr std::array<std::string_view, 18> kVariables = {
    "http_code",      "response_code",    "http_version", "url",           "url_effective",
    "method",         "time_total",       "num_retries",  "num_redirects", "size_download",
    "exitcode",       "errormsg",         "content_type", "abide_outcome", "abide_waited",
    "abide_attempts", "abide_not_before", "abide_retries"};

bool known(std::string_view name) { return std::find(kVariables.begin(), kVariables.end(), name) != kVariables.end(); }

void add_text(std::vector<WriteOutPiece>& pieces, std::string_view text) {
  if (!pieces.empty() && pieces.back().kind == WriteOutPiece::Kind::kText) {
    pieces.back().text += text;
  } else {
    pieces.push_back({WriteOutPiece::Kind::kText, std::string(text)});
  }
}

// Seconds as curl writes its times: six decimals.
std::string seconds_text(Duration d) {
  char buf[64];
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%06" PRId64, static_cast<std::int64_t>(us / 1'000'000),
                static_cast<std::int64_t>(us % 1'000'000));
  return buf;
}

std::string header_text(const HeaderList* headers, std::string_view name) {
  if (headers == nullptr) return {};
  const auto v = headers->first(name);
  return v ? printable(*v, kMaxShownValue) : std::string();
}

std::string value_of(std::string_view name, const WriteOutValues& v) {
  if (name == "http_code" || name == "response_code") {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%03d", std::clamp(v.http_code, 0, 999));
    return buf;
  }
  if (name == "http_version") {
    // As curl writes it: "1.0", "1.1", "2", "3"; "0" without an answer.
    switch (v.http_version) {
      case 10: return "1.0";
      case 11: return "1.1";
      case 20: return "2";
      case 30: return "3";
      default: return "0";
    }
  }
  if (name == "url") return v.url;
  if (name == "url_effective") return v.url_effective;
  if (name == "method") return v.method;
  if (name == "time_total") return seconds_text(v.time_total);
  if (name == "num_retries" || name == "abide_retries") return std::to_string(v.num_retries);
  if (name == "num_redirects") return std::to_string(v.num_redirects);
  if (name == "size_download") return std::to_string(v.size_download);
  if (name == "exitcode") return std::to_string(v.exitcode);
  if (name == "errormsg") return v.errormsg;
  if (name == "content_type") return header_text(v.headers, "Content-Type");
  if (name == "abide_outcome") return v.outcome;
  if (name == "abide_waited") return seconds_text(v.waited);
  if (name == "abide_attempts") return std::to_string(v.attempts);
  if (name == "abide_not_before") return v.not_before ? format_rfc3339(*v.not_before) : std::string();
  return {};
}

}  // namespace fetch_write_out

WriteOutFormat parse_write_out(std::string_view f) {
  using fetch_write_out::add_text;
  WriteOutFormat format;
  auto& pieces = format.pieces;
  std::size_t i = 0;
  while (i < f.size()) {
    const char c = f[i];
    if (c == '%' && i + 1 < f.size()) {
      const char n = f[i + 1];
      if (n == '%') {
        add_text(pieces, "%");
        i += 2;
        continue;
      }
      const bool header = f.substr(i + 1).starts_with("header{");
      if (n == '{' || header) {
        const std::size_t open = i + (header ? 7 : 1);
        const std::size_t close = f.find('}', open + 1);
        if (close == std::string_view::npos) {
          // No closing brace: written as it stands, as curl does.
          add_text(pieces, f.substr(i, open + 1 - i));
          i = open + 1;
          continue;
        }
        const std::string_view name = f.substr(open + 1, close - open - 1);
        i = close + 1;
        if (header) {
          pieces.push_back({WriteOutPiece::Kind::kHeader, std::string(name)});
        } else if (name == "stdout") {
          pieces.push_back({WriteOutPiece::Kind::kToStdout, {}});
        } else if (name == "stderr") {
          pieces.push_back({WriteOutPiece::Kind::kToStderr, {}});
        } else if (fetch_write_out::known(name)) {
          pieces.push_back({WriteOutPiece::Kind::kVariable, std::string(name)});
        } else if (std::find(format.unknown.begin(), format.unknown.end(), name) == format.unknown.end()) {
          format.unknown.emplace_back(name);
        }
        continue;
      }
      // '%' and any other character stay as they are.
      add_text(pieces, f.substr(i, 2));
      i += 2;
      continue;
    }
    if (c == '\\' && i + 1 < f.size()) {
      const char n = f[i + 1];
      if (n == 'n') add_text(pieces, "\n");
      else if (n == 'r') add_text(pieces, "\r");
      else if (n == 't') add_text(pieces, "\t");
      else add_text(pieces, f.substr(i, 2));  // not an escape curl knows: both kept
      i += 2;
      continue;
    }
    add_text(pieces, f.substr(i, 1));
    ++i;
  }
  return format;
}

Result<std::string, ErrorMessage> write_out_argument(const std::string& argument) {
  if (!argument.starts_with("@")) return argument;
  auto text = read_text(argument.substr(1));
  if (!text) return fail(text.error());
  return std::move(*text);
}

WriteOutText expand_write_out(const WriteOutFormat& format, const WriteOutValues& values) {
  WriteOutText t;
  std::string* to = &t.out;
  for (const WriteOutPiece& p : format.pieces) {
    switch (p.kind) {
      case WriteOutPiece::Kind::kText: *to += p.text; break;
      case WriteOutPiece::Kind::kVariable: *to += fetch_write_out::value_of(p.text, values); break;
      case WriteOutPiece::Kind::kHeader: *to += fetch_write_out::header_text(values.headers, p.text); break;
      case WriteOutPiece::Kind::kToStdout: to = &t.out; break;
      case WriteOutPiece::Kind::kToStderr: to = &t.err; break;
    }
  }
  return t;
}

}  // namespace abide::cli
