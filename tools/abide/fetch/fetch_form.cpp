#include "fetch/fetch_form.h"

#include <array>
#include <cstdint>
#include <utility>

#include "base64.h"
#include "command.h"
#include "common.h"

namespace abide::cli {
namespace fetch_form {  // private to this file (the CLI is compiled in unity batches)

constexpr char kHex[] = "0123456789ABCDEF";

bool ascii_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (lower(s[i]) != prefix[i]) return false;
  return true;
}

bool ends_with_nocase(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && starts_with_nocase(s.substr(s.size() - suffix.size()), suffix);
}

// The types curl guesses for a file part from its name; anything else is sent
// as application/octet-stream, as curl does.
std::string guess_type(std::string_view filename) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kTypes{{
      {".gif", "image/gif"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".png", "image/png"},
      {".svg", "image/svg+xml"},
      {".txt", "text/plain"},
      {".htm", "text/html"},
      {".html", "text/html"},
      {".pdf", "application/pdf"},
      {".xml", "application/xml"},
  }};
  for (const auto& [ext, type] : kTypes)
    if (ends_with_nocase(filename, ext)) return std::string(type);
  return "application/octet-stream";
}

// A name or filename inside a quoted Content-Disposition parameter, escaped
// as browsers (and curl) do, so that no byte can end the quote or the line.
std::string disposition_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '"') out += "%22";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else out += c;
  }
  return out;
}

std::string_view base_name(std::string_view path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::uint64_t fnv1a(std::uint64_t h, std::string_view s) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

bool occurs_in(const std::vector<FormPart>& parts, std::string_view boundary) {
  for (const FormPart& p : parts) {
    if (p.value.find(boundary) != std::string::npos || p.name.find(boundary) != std::string::npos ||
        p.type.find(boundary) != std::string::npos || (p.filename && p.filename->find(boundary) != std::string::npos))
      return true;
  }
  return false;
}

}  // namespace fetch_form

Result<std::string, FetchError> InputFiles::read(const std::string& path, std::string_view flag) {
  if (path == "-") {
    if (!stdin_reader_.empty())
      return fail(
          FetchError{kExitUsage, std::string(flag) + " @-: standard input is already read by " + stdin_reader_});
    stdin_reader_ = std::string(flag);
  }
  auto text = read_text(path);
  if (!text) return fail(FetchError{kExitRejected, std::string(flag) + ": " + text.error().text});
  return std::move(*text);
}

std::string url_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (fetch_form::ascii_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else if (c == ' ') {
      out += '+';
    } else {
      const auto u = static_cast<unsigned char>(c);
      out += '%';
      out += fetch_form::kHex[u >> 4];
      out += fetch_form::kHex[u & 0xf];
    }
  }
  return out;
}

Result<std::string, FetchError> urlencoded_part(const std::string& arg, InputFiles& files) {
  const auto at = arg.find_first_of("=@");
  if (at == std::string::npos) return url_escape(arg);
  const std::string name = arg.substr(0, at);
  std::string content;
  if (arg[at] == '=') {
    content = url_escape(std::string_view(arg).substr(at + 1));
  } else {
    auto text = files.read(arg.substr(at + 1), "--data-urlencode");
    if (!text) return fail(text.error());
    content = url_escape(*text);
  }
  return name.empty() ? content : name + "=" + content;
}

Result<std::string, FetchError> data_body(const DataArgs& args, InputFiles& files) {
  std::string body;
  bool first = true;
  const auto add = [&](std::string part) {
    if (!first) body += '&';
    first = false;
    body += part;
  };
  for (const std::string& d : args.data) {
    if (d.starts_with('@')) {
      auto text = files.read(d.substr(1), "-d");
      if (!text) return fail(text.error());
      std::string kept;
      kept.reserve(text->size());
      for (char c : *text)
        if (c != '\r' && c != '\n') kept += c;
      add(std::move(kept));
    } else {
      add(d);
    }
  }
  for (const std::string& d : args.binary) {
    if (d.starts_with('@')) {
      auto text = files.read(d.substr(1), "--data-binary");
      if (!text) return fail(text.error());
      add(std::move(*text));
    } else {
      add(d);
    }
  }
  for (const std::string& d : args.raw) add(d);
  for (const std::string& d : args.urlencode) {
    auto part = urlencoded_part(d, files);
    if (!part) return fail(part.error());
    add(std::move(*part));
  }
  return body;
}

Result<std::string, FetchError> json_body(const std::vector<std::string>& args, InputFiles& files) {
  std::string body;
  for (const std::string& j : args) {
    if (j.starts_with('@')) {
      auto text = files.read(j.substr(1), "--json");
      if (!text) return fail(text.error());
      body += *text;
    } else {
      body += j;
    }
  }
  return body;
}

Result<FormPart, FetchError> parse_form_part(const std::string& arg, InputFiles& files) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    return fail(FetchError{kExitUsage, "-F: expected name=value, name=@FILE or name=<FILE"});
  FormPart part;
  part.name = arg.substr(0, eq);
  std::string_view rest = std::string_view(arg).substr(eq + 1);
  // Parameters follow the value after ';' (only those curl knows: a ';' in a
  // value that is not followed by one of them stays part of the value).
  std::string_view value = rest;
  std::optional<std::string> filename;
  for (std::size_t semi = rest.find(';'); semi != std::string_view::npos; semi = rest.find(';', semi + 1)) {
    const std::string_view tail = rest.substr(semi + 1);
    if (!fetch_form::starts_with_nocase(tail, "type=") && !fetch_form::starts_with_nocase(tail, "filename=")) continue;
    value = rest.substr(0, semi);
    std::string_view params = tail;
    while (!params.empty()) {
      const auto next = params.find(';');
      const std::string_view p = params.substr(0, next);
      if (fetch_form::starts_with_nocase(p, "type=")) part.type = std::string(p.substr(5));
      else if (fetch_form::starts_with_nocase(p, "filename=")) filename = std::string(p.substr(9));
      else return fail(FetchError{kExitUsage, "-F " + part.name + ": unknown parameter (give ;type= or ;filename=)"});
      params.remove_prefix(next == std::string_view::npos ? params.size() : next + 1);
    }
    break;
  }
  if (value.starts_with('@') || value.starts_with('<')) {
    const std::string path(value.substr(1));
    auto text = files.read(path, "-F");
    if (!text) return fail(text.error());
    part.value = std::move(*text);
    if (value.front() == '@') {
      part.filename = filename ? *filename : std::string(fetch_form::base_name(path));
      if (part.type.empty()) part.type = fetch_form::guess_type(*part.filename);
    }
  } else {
    part.value = std::string(value);
    if (filename) part.filename = filename;
  }
  for (char c : part.type)
    if (c == '\r' || c == '\n' || c == '\0') return fail(FetchError{kExitUsage, "-F " + part.name + ": bad type"});
  return part;
}

Result<Multipart, FetchError> multipart_body(const std::vector<FormPart>& parts) {
  const std::uint64_t seed = 0xcbf29ce484222325ULL;
  Multipart m;
  for (std::uint64_t k = 0;; ++k) {
    if (k == 64) return fail(FetchError{kExitRejected, "-F: no multipart boundary fits these parts"});
    std::uint64_t h = fetch_form::fnv1a(seed, std::string_view(reinterpret_cast<const char*>(&k), sizeof k));
    // curl's shape (24 dashes, 16 hex digits): a body as long as curl's.
    std::string b = "------------------------";
    for (int i = 0; i < 16; ++i, h >>= 4) b += fetch_form::kHex[h & 0xf];
    if (!fetch_form::occurs_in(parts, b)) {
      m.boundary = std::move(b);
      break;
    }
  }
  std::size_t size = 0;
  for (const FormPart& p : parts) size += p.value.size() + p.name.size() + 160;
  m.body.reserve(size);
  for (const FormPart& p : parts) {
    m.body += "--" + m.boundary + "\r\n";
    m.body += "Content-Disposition: form-data; name=\"" + fetch_form::disposition_escape(p.name) + "\"";
    if (p.filename) m.body += "; filename=\"" + fetch_form::disposition_escape(*p.filename) + "\"";
    m.body += "\r\n";
    if (!p.type.empty()) m.body += "Content-Type: " + p.type + "\r\n";
    m.body += "\r\n";
    m.body += p.value;
    m.body += "\r\n";
  }
  m.body += "--" + m.boundary + "--\r\n";
  return m;
}

std::string base64(std::string_view bytes) {
  std::string out;
  detail::append_base64(out, bytes);
  return out;
}

}  // namespace abide::cli
