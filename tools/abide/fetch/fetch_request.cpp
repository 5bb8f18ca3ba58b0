#include "fetch/fetch_request.h"

#include <cctype>
#include <optional>
#include <string_view>
#include <utility>

#include "command.h"
#include "common.h"
#include "fetch/body_output.h"
#include "fetch/shown_url.h"

namespace abide::cli {
namespace fetch_request {  // private to this file (the CLI is compiled in unity batches)

Result<Header, std::string> parse_header_option(const std::string& text) {
  const auto colon = text.find(':');
  // Errors name the header only: the value may be a credential.
  if (colon == std::string::npos || colon == 0) return fail(std::string("-H: expected 'Name: value'"));
  Header h;
  h.name = text.substr(0, colon);
  std::string_view v = std::string_view(text).substr(colon + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  h.value = std::string(v);
  for (char c : h.name) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u >= 0x7f || std::string_view("\"(),/:;<=>?@[\\]{}").find(c) != std::string_view::npos)
      return fail(std::string("-H: invalid header name"));
  }
  for (char c : h.value)
    if (c == '\r' || c == '\n' || c == '\0') return fail("-H \"" + h.name + "\": the value contains CR, LF or NUL");
  return h;
}

bool has_header(const std::vector<Header>& headers, std::string_view name) {
  for (const Header& h : headers)
    if (iequals(h.name, name)) return true;
  return false;
}

// -u USER:PASSWORD as a Basic credential. Without ':' curl prompts for the
// password; a batch tool cannot, and an empty password would be a guess.
Result<std::string, FetchError> basic_credential(const std::string& user) {
  if (user.find(':') == std::string::npos)
    return fail(FetchError{kExitUsage, "-u: give USER:PASSWORD (abide fetch does not prompt for a password)"});
  return "Basic " + base64(user);
}

// The body that -d, --data-*, --json or -F make, and the headers it implies
// (added only where -H gives none of that name, as curl does).
Result<std::string, FetchError> command_line_body(const FetchOptions& o, std::vector<Header>& headers,
                                                  InputFiles& files) {
  if (!o.form.empty()) {
    std::vector<FormPart> parts;
    parts.reserve(o.form.size());
    for (const std::string& f : o.form) {
      auto part = parse_form_part(f, files);
      if (!part) return fail(part.error());
      parts.push_back(std::move(*part));
    }
    auto m = multipart_body(parts);
    if (!m) return fail(m.error());
    bool typed = false;
    for (Header& h : headers) {
      if (!iequals(h.name, "Content-Type")) continue;
      // A type of the caller's own still needs the boundary that splits the parts.
      if (h.value.find("boundary=") == std::string::npos) h.value += "; boundary=" + m->boundary;
      typed = true;
    }
    if (!typed) headers.push_back({"Content-Type", "multipart/form-data; boundary=" + m->boundary});
    return std::move(m->body);
  }
  if (!o.json.empty()) {
    auto body = json_body(o.json, files);
    if (!body) return fail(body.error());
    if (!has_header(headers, "Content-Type")) headers.push_back({"Content-Type", "application/json"});
    if (!has_header(headers, "Accept")) headers.push_back({"Accept", "application/json"});
    return std::move(*body);
  }
  auto body = data_body({o.data, o.data_binary, o.data_raw, o.data_urlencode}, files);
  if (!body) return fail(body.error());
  const bool any = !o.data.empty() || !o.data_binary.empty() || !o.data_raw.empty() || !o.data_urlencode.empty();
  if (any && !o.get && !has_header(headers, "Content-Type"))
    headers.push_back({"Content-Type", "application/x-www-form-urlencoded"});
  return std::move(*body);
}

// Flags that contradict each other, refused as curl refuses them.
std::optional<std::string> conflict(const FetchOptions& o) {
  const bool data = !o.data.empty() || !o.data_binary.empty() || !o.data_raw.empty() || !o.data_urlencode.empty();
  const bool json = !o.json.empty();
  const bool form = !o.form.empty();
  if (form && (data || json)) return "-F cannot be combined with -d, --data-* or --json (a body is a form or data)";
  // curl joins a --json after -d without a separator and a -d after --json with
  // one: a body that depends on the flags' order is refused, not guessed.
  if (json && data) return "--json cannot be combined with -d or --data-* (give the whole JSON body with --json)";
  if (form && o.get) return "-G cannot be combined with -F (-G puts -d data into the URL's query)";
  if (o.head && !o.get && (data || json || form))
    return "-I cannot be combined with -d, --data-*, --json or -F (HEAD sends no body; with -G the data goes into "
           "the query)";
  if (o.referer.ends_with(";auto"))
    return "-e ';auto' is not supported (abide sets no Referer on redirects): give the Referer URL alone";
  return std::nullopt;
}

}  // namespace fetch_request

std::string with_default_scheme(std::string_view url) {
  const auto sep = url.find("://");
  bool scheme = sep != std::string_view::npos && sep > 0 && std::isalpha(static_cast<unsigned char>(url[0]));
  for (std::size_t i = 0; scheme && i < sep; ++i) {
    const char c = url[i];
    scheme = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  }
  return scheme ? std::string(url) : "http://" + std::string(url);
}

std::string with_query(std::string_view url, std::string_view data) {
  const auto hash = url.find('#');
  const std::string_view base = url.substr(0, hash);
  const std::string_view fragment = hash == std::string_view::npos ? std::string_view() : url.substr(hash);
  std::string out(base);
  const auto q = base.find('?');
  if (q == std::string_view::npos) out += '?';
  else if (q + 1 < base.size() && base.back() != '&') out += '&';
  out += data;
  out += fragment;
  return out;
}

Result<RequestPlan, FetchError> plan_requests(const FetchOptions& o) {
  RequestPlan plan;
  const int sources = (o.urls.empty() ? 0 : 1) + (o.urls_file.empty() ? 0 : 1) + (o.resume.empty() ? 0 : 1);
  if (sources != 1) return fail(FetchError{kExitUsage, "give exactly one of URL, --urls FILE, --resume FILE"});
  if (auto why = fetch_request::conflict(o)) return fail(FetchError{kExitUsage, std::move(*why)});
  std::vector<Header> headers;
  for (const std::string& h : o.headers) {
    auto parsed = fetch_request::parse_header_option(h);
    if (!parsed) return fail(FetchError{kExitUsage, parsed.error()});
    headers.push_back(std::move(*parsed));
  }
  if (!o.user.empty()) {
    auto credential = fetch_request::basic_credential(o.user);
    if (!credential) return fail(credential.error());
    if (!fetch_request::has_header(headers, "Authorization"))
      headers.push_back({"Authorization", std::move(*credential)});
  }
  for (const auto& [name, value] : {std::pair<const char*, const std::string&>{"User-Agent", o.user_agent},
                                    std::pair<const char*, const std::string&>{"Referer", o.referer}}) {
    if (value.empty() || fetch_request::has_header(headers, name)) continue;
    for (char c : value)
      if (c == '\r' || c == '\n' || c == '\0')
        return fail(FetchError{kExitUsage, std::string(name) + ": the value contains CR, LF or NUL"});
    headers.push_back({name, value});
  }
  InputFiles files;
  auto command_body = fetch_request::command_line_body(o, headers, files);
  if (!command_body) return fail(command_body.error());
  std::string body = std::move(*command_body);
  // -G: the data goes into every URL's query; the request has no body.
  std::string query;
  if (o.get) query = std::exchange(body, std::string());
  const bool has_body = o.has_data && !o.get;
  const std::string method = !o.method.empty() ? o.method : o.head ? "HEAD" : has_body ? "POST" : "GET";
  for (Header& h : headers) plan.headers.add(h.name, h.value);

  plan.method = method;
  plan.body = body;
  plan.query = query;
  plan.idempotency_key = o.idempotency_key;
  if (!o.resume.empty()) {
    auto read = read_resume(o.resume);
    if (!read) return fail(FetchError{kExitRejected, read.error()});
    plan.jobs = std::move(*read);
    plan.batch = true;
    plan.total = plan.jobs.size();
    return plan;
  }
  if (!o.urls_file.empty()) {
    if (o.urls_file == "-" && files.stdin_read())
      return fail(FetchError{kExitUsage, "--urls -: standard input is already read by " + files.stdin_reader()});
    plan.batch = true;
    plan.urls_file = o.urls_file;
    if (o.urls_file == "-") return plan;
    // A first pass that keeps nothing: a bad line stops the run before
    // anything is sent (as when the list was read whole), and the count is
    // the progress line's total.
    auto reader = UrlListReader::open(o.urls_file);
    if (!reader) return fail(FetchError{kExitRejected, reader.error()});
    std::size_t n = 0;
    for (;;) {
      auto line = reader->next();
      if (!line) return fail(FetchError{kExitRejected, line.error()});
      if (!*line) break;
      if (o.remote_name) {
        if (auto err = remote_name_error(job_for_line(plan, std::move(**line), n)))
          return fail(FetchError{kExitRejected, std::move(*err)});
      }
      ++n;
    }
    plan.total = n;
    return plan;
  }
  plan.jobs.reserve(o.urls.size());
  for (const std::string& url : o.urls) {
    FetchJob job;
    job.index = plan.jobs.size();
    job.method = method;
    job.url = with_default_scheme(url);
    if (!query.empty()) job.url = with_query(job.url, query);
    job.body = body;
    if (!o.idempotency_key.empty()) job.idempotency_key = o.idempotency_key;
    plan.jobs.push_back(std::move(job));
  }
  plan.total = plan.jobs.size();
  return plan;
}

FetchJob job_for_line(const RequestPlan& plan, UrlLine line, std::size_t seq) {
  FetchJob job;
  job.index = seq;
  // A line with its own method is its own request: -X, -d and -G do not apply to it.
  if (line.method) {
    job.method = std::move(*line.method);
    job.url = with_default_scheme(line.url);
    job.body = line.body.value_or(std::string());
  } else {
    job.method = plan.method;
    job.url = with_default_scheme(line.url);
    if (!plan.query.empty()) job.url = with_query(job.url, plan.query);
    job.body = plan.body;
  }
  // Each request of a batch has a key of its own.
  if (!plan.idempotency_key.empty()) job.idempotency_key = plan.idempotency_key + "-" + std::to_string(seq + 1);
  return job;
}

std::optional<std::string> JobFeed::open() {
  if (plan_.urls_file.empty()) return std::nullopt;
  auto reader = UrlListReader::open(plan_.urls_file);
  if (!reader) return std::move(reader.error());
  detail::MutexLock lock(mu_);  // taken before any worker asks: for the checks
  reader_.emplace(std::move(*reader));
  return std::nullopt;
}

std::optional<std::pair<std::size_t, FetchJob>> JobFeed::next() {
  detail::MutexLock lock(mu_);
  if (!reader_) {
    if (next_ >= plan_.jobs.size()) return std::nullopt;
    const std::size_t seq = next_++;
    // Taken once: the list need not keep it.
    return std::pair<std::size_t, FetchJob>(seq, std::move(plan_.jobs[seq]));
  }
  if (!error_.empty()) return std::nullopt;
  auto line = reader_->next();
  if (!line) {
    // Only standard input gets here (a file was checked whole): the lines
    // after a bad one are not taken.
    error_ = std::move(line.error());
    return std::nullopt;
  }
  if (!*line) return std::nullopt;
  const std::size_t seq = next_++;
  return std::pair<std::size_t, FetchJob>(seq, job_for_line(plan_, std::move(**line), seq));
}

std::string JobFeed::error() const {
  detail::MutexLock lock(mu_);
  return error_;
}

}  // namespace abide::cli
