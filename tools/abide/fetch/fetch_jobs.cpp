#include "fetch/fetch_jobs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iostream>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "abide/engine.h"
#include "abide/http_date.h"
#include "common.h"
#include "fetch/shown_url.h"
#include "proxy/proxy_rules.h"

namespace abide::cli {
namespace {

constexpr std::size_t kMaxListBytes = std::size_t{256} << 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The next space-separated field of a line, taken off its front.
std::string_view url_line_field(std::string_view& line) {
  const auto end = line.find_first_of(" \t");
  const std::string_view field = line.substr(0, end);
  line = trim(end == std::string_view::npos ? std::string_view() : line.substr(end));
  return field;
}

// A method of a --urls line: letters, digits, '-' and '_', a letter first
// (no URL or host name is one: they hold ':', '/' or '.').
bool is_line_method(std::string_view s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

nlohmann::ordered_json time_or_null(const std::optional<WallTime>& t) {
  return t ? nlohmann::ordered_json(format_rfc3339(*t)) : nlohmann::ordered_json();
}

}  // namespace

namespace fetch_jobs {  // private to this file (the CLI is compiled in unity batches)

// One line of a --urls file (without its newline): nullopt for a blank line
// or a comment.
Result<std::optional<UrlLine>, std::string> parse_url_line(std::string_view line, std::size_t line_no,
                                                           const std::string& path,
                                                           const std::filesystem::path& folder) {
  line = trim(line);
  if (line.empty() || line.front() == '#') return std::optional<UrlLine>();
  const auto where = [&] { return path + ":" + std::to_string(line_no) + ": "; };
  UrlLine entry;
  entry.line = line_no;
  const std::string_view first = url_line_field(line);
  if (line.empty()) {
    entry.url = std::string(first);
    return std::optional<UrlLine>(std::move(entry));
  }
  if (!is_line_method(first)) return fail(where() + "expected URL, METHOD URL or METHOD URL BODY");
  entry.method = std::string(first);
  entry.url = std::string(url_line_field(line));
  if (!line.empty()) {
    if (line.front() == '@') {
      const std::filesystem::path file(std::string(line.substr(1)));
      const std::string full = (file.is_absolute() ? file : folder / file).string();
      auto body = read_text(full);
      if (!body) return fail(where() + body.error().text);
      entry.body = std::move(*body);
    } else {
      entry.body = std::string(line);
    }
  }
  return std::optional<UrlLine>(std::move(entry));
}

// A body file is found beside the list, so that a list and its bodies can
// move together and be run from anywhere.
std::filesystem::path list_folder(const std::string& path) {
  return path == "-" ? std::filesystem::path() : std::filesystem::path(path).parent_path();
}

bool resumable_kind(OutcomeKind kind, bool ambiguous) noexcept {
  switch (kind) {
    case OutcomeKind::kCancelled:
    case OutcomeKind::kDeferred:
    case OutcomeKind::kDeadlineExceeded:
    case OutcomeKind::kExhausted: return !ambiguous;
    case OutcomeKind::kDone:
    case OutcomeKind::kNotRetryable: return false;
  }
  return false;
}

}  // namespace fetch_jobs

Result<std::vector<UrlLine>, std::string> read_url_list(const std::string& path, std::size_t max_body_bytes) {
  auto text = read_text(path);
  if (!text) return fail(std::move(text.error().text));
  if (text->size() > kMaxListBytes) return fail(path + ": larger than 256 MiB");
  const std::filesystem::path folder = fetch_jobs::list_folder(path);
  std::vector<UrlLine> lines;
  std::size_t line_no = 0, body_bytes = 0;
  std::string_view rest = *text;
  while (!rest.empty()) {
    ++line_no;
    const std::size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    auto entry = fetch_jobs::parse_url_line(line, line_no, path, folder);
    if (!entry) return fail(std::move(entry.error()));
    if (!*entry) continue;
    if ((*entry)->body) {
      body_bytes += (*entry)->body->size();
      if (body_bytes > max_body_bytes)
        return fail(path + ":" + std::to_string(line_no) + ": the bodies of the list add up to more than " +
                    std::to_string(max_body_bytes) + " bytes");
    }
    lines.push_back(std::move(**entry));
  }
  return lines;
}

Result<UrlListReader, std::string> UrlListReader::open(const std::string& path) {
  UrlListReader r;
  r.path_ = path;
  r.folder_ = fetch_jobs::list_folder(path);
  if (path == "-") {
    r.in_ = &std::cin;
    return r;
  }
  r.file_ = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*r.file_) return fail("cannot read " + path + ": " + std::strerror(errno));
  r.in_ = r.file_.get();
  return r;
}

Result<std::optional<UrlLine>, std::string> UrlListReader::next() {
  std::string line;
  std::streambuf* buf = in_->rdbuf();
  for (;;) {
    line.clear();
    bool any = false;
    for (int c = buf->sbumpc(); c != std::char_traits<char>::eof(); c = buf->sbumpc()) {
      any = true;
      if (c == '\n') break;
      if (line.size() >= kMaxUrlLineBytes)
        return fail(path_ + ":" + std::to_string(line_no_ + 1) + ": longer than " +
                    std::to_string(kMaxUrlLineBytes) + " bytes");
      line.push_back(static_cast<char>(c));
    }
    if (!any) return std::optional<UrlLine>();
    ++line_no_;
    auto entry = fetch_jobs::parse_url_line(line, line_no_, path_, folder_);
    if (!entry || *entry) return entry;
  }
}

std::string request_pacer_key(std::string_view url, const HeaderList& headers, const std::string& override_key,
                              const KeySecret& secret) {
  if (!override_key.empty()) return override_key;
  const auto origin = parse_origin(url);
  if (!origin) return {};
  return proxy::quota_key(*origin, headers, secret);
}

bool resumable(const RequestOutcome& o) noexcept { return fetch_jobs::resumable_kind(o.kind, o.ambiguous); }

nlohmann::ordered_json resume_json(const std::vector<FetchJob>& jobs, const std::vector<RequestOutcome>& outcomes,
                                   WallTime now) {
  RunSummary summary;
  for (std::size_t i = 0; i < jobs.size() && i < outcomes.size(); ++i) summary.add(i, jobs[i], outcomes[i]);
  return summary.resume(now);
}

Result<std::vector<FetchJob>, std::string> read_resume(const std::string& path) {
  auto text = read_text(path);
  if (!text) return fail(std::move(text.error().text));
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(path + ": not a JSON object");
  if (!j.contains("version") || j["version"] != 1) return fail(path + ": not an abide resume file (version 1)");
  if (!j.contains("requests") || !j["requests"].is_array()) return fail(path + ": \"requests\" must be a list");
  std::vector<FetchJob> jobs;
  std::size_t n = 0;
  for (const auto& e : j["requests"]) {
    const std::string where = path + ": requests[" + std::to_string(n++) + "]";
    if (!e.is_object()) return fail(where + ": not an object");
    FetchJob job;
    if (!e.contains("url") || !e["url"].is_string()) return fail(where + ": \"url\" must be a string");
    job.url = e["url"].get<std::string>();
    if (e.contains("method")) {
      if (!e["method"].is_string()) return fail(where + ": \"method\" must be a string");
      job.method = e["method"].get<std::string>();
    }
    if (e.contains("index")) {
      if (!e["index"].is_number_unsigned()) return fail(where + ": \"index\" must be a non-negative integer");
      job.index = e["index"].get<std::size_t>();
    } else {
      job.index = n - 1;
    }
    if (e.contains("body")) {
      if (!e["body"].is_string()) return fail(where + ": \"body\" must be a string");
      job.body = e["body"].get<std::string>();
    }
    if (e.contains("idempotency_key") && !e["idempotency_key"].is_null()) {
      if (!e["idempotency_key"].is_string()) return fail(where + ": \"idempotency_key\" must be a string");
      job.idempotency_key = e["idempotency_key"].get<std::string>();
    }
    if (e.contains("not_before") && !e["not_before"].is_null()) {
      if (!e["not_before"].is_string()) return fail(where + ": \"not_before\" must be an RFC 3339 string");
      auto t = parse_rfc3339(e["not_before"].get<std::string>());
      if (!t) return fail(where + ": \"not_before\" is not an RFC 3339 date-time");
      job.not_before = *t;
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

nlohmann::ordered_json stats_json(const std::vector<FetchJob>& jobs, const std::vector<RequestOutcome>& outcomes,
                                  Duration elapsed, bool interrupted) {
  RunSummary summary;
  for (std::size_t i = 0; i < jobs.size() && i < outcomes.size(); ++i) summary.add(i, jobs[i], outcomes[i]);
  return summary.stats(elapsed, interrupted);
}

void RunSummary::add(std::size_t seq, const FetchJob& job, const RequestOutcome& o, bool http_failed) {
  ++requests_;
  if (o.done()) ++done_;
  if (resumable(o)) ++resumable_;
  ++kinds_[std::string(to_string(o.kind))];
  attempts_ += o.attempts.size();
  waited_ += o.waited;
  if (o.ambiguous) ++ambiguous_;
  for (const Attempt& a : o.attempts) {
    // With -L each hop starts at attempt 1 again: a hop is not a retry.
    if (a.number > 1) ++retries_;
    if (a.status != 0) ++statuses_[a.status];
    else ++transport_errors_;
    if (a.held) {
      Held& h = held_by(*a.held);
      ++h.sends;
      h.paced += a.paced;
    }
  }
  if (o.held && !o.done()) ++held_by(*o.held).deferred;
  if (o.done()) return;  // nothing of a finished request is kept
  UnfinishedRequest u;
  u.seq = seq;
  u.job = job;
  if (u.job.shown_url.empty()) u.job.shown_url = shown_url(job.url);
  u.kind = o.kind;
  u.reason = o.reason;
  u.not_before = o.not_before_wall;
  u.ambiguous = o.ambiguous;
  u.http_failed = http_failed;
  unfinished_.push_back(std::move(u));
}

RunSummary::Held& RunSummary::held_by(const QuotaHeld& held) {
  Held& h = held_[held.unit.empty() ? "requests" : held.unit];
  h.last = describe(held);
  return h;
}

std::vector<UnfinishedRequest> RunSummary::unfinished() const {
  std::vector<UnfinishedRequest> list = unfinished_;
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
  return list;
}

nlohmann::ordered_json RunSummary::stats(Duration elapsed, bool interrupted) const {
  nlohmann::ordered_json unfinished = nlohmann::ordered_json::array();
  for (const UnfinishedRequest& r : this->unfinished()) {
    nlohmann::ordered_json u;
    u["url"] = r.job.shown_url;  // shared: no credentials
    u["outcome"] = to_string(r.kind);
    u["not_before"] = time_or_null(r.not_before);
    u["method"] = r.job.method;
    u["index"] = r.job.index;
    u["reason"] = safe_text(r.reason);
    u["ambiguous"] = r.ambiguous;
    u["resumable"] = fetch_jobs::resumable_kind(r.kind, r.ambiguous);
    unfinished.push_back(std::move(u));
  }
  nlohmann::ordered_json status_counts = nlohmann::ordered_json::object();
  for (const auto& [status, count] : statuses_) status_counts[std::to_string(status)] = count;
  nlohmann::ordered_json outcome_counts = nlohmann::ordered_json::object();
  for (const auto& [kind, count] : kinds_) outcome_counts[kind] = count;
  nlohmann::ordered_json j;
  j["requests"] = requests_;
  j["done"] = done_;
  j["attempts"] = attempts_;
  j["retries"] = retries_;
  j["status_counts"] = std::move(status_counts);
  j["transport_errors"] = transport_errors_;
  j["outcomes"] = std::move(outcome_counts);
  j["ambiguous"] = ambiguous_;
  j["waited_s"] = to_seconds(waited_);
  nlohmann::ordered_json held = nlohmann::ordered_json::object();
  for (const auto& [unit, h] : held_) {
    held[safe_text(unit)] = {{"sends", h.sends}, {"paced_s", to_seconds(h.paced)}, {"deferred", h.deferred}, {"last", safe_text(h.last)}};
  }
  j["held_by"] = std::move(held);
  j["elapsed_s"] = to_seconds(elapsed);
  j["interrupted"] = interrupted;
  j["unfinished"] = std::move(unfinished);
  return j;
}

nlohmann::ordered_json RunSummary::resume(WallTime now) const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const UnfinishedRequest& r : this->unfinished()) {
    if (!fetch_jobs::resumable_kind(r.kind, r.ambiguous)) continue;
    const FetchJob& job = r.job;
    nlohmann::ordered_json e;
    e["index"] = job.index;
    e["method"] = job.method;
    e["url"] = job.url;
    if (!job.body.empty()) e["body"] = job.body;
    if (job.idempotency_key) e["idempotency_key"] = *job.idempotency_key;
    e["outcome"] = to_string(r.kind);
    e["reason"] = safe_text(r.reason);
    // The later of what this run learnt and what the earlier run knew.
    std::optional<WallTime> nb = r.not_before;
    if (job.not_before && (!nb || *job.not_before > *nb)) nb = job.not_before;
    e["not_before"] = time_or_null(nb);
    list.push_back(std::move(e));
  }
  nlohmann::ordered_json j;
  j["version"] = 1;
  j["written"] = format_rfc3339(now);
  j["requests"] = std::move(list);
  return j;
}

std::optional<std::string> write_file_atomically(const std::string& path, const std::string& text, FileAccess access) {
  const std::string tmp = path + ".tmp";
  // A leftover temporary (or a link planted in its place) is removed, not
  // reused: O_EXCL then guarantees a new file with exactly the mode below.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return "cannot write " + tmp;
  const mode_t mode = access == FileAccess::kOwnerOnly ? 0600 : 0666;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return "cannot write " + tmp;
  bool ok = true;
  std::size_t done = 0;
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    return "cannot write " + tmp;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return "cannot write " + path;
  }
  return std::nullopt;
}

}  // namespace abide::cli
