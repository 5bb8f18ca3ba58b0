// abide fetch: a curl-like client that obeys the server (abide::Client), for
// one URL or a batch. Built only with abide::curl (see CMakeLists.txt).

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "abide/client.h"
#include "abide/headers.h"
#include "abide/http_date.h"
#include "abide/profiles.h"
#include "abide/redact.h"
#include "command.h"
#include "common.h"
#include "fetch_jobs.h"
#include "fetch_progress.h"
#include "fetch_store.h"
#include "shown_url.h"

namespace abide::cli {
namespace cmd_fetch {  // private to this file (the CLI is compiled as one unit)

using namespace std::chrono_literals;

struct FetchOptions {
  std::string url;
  std::string method;
  std::vector<std::string> headers;
  std::string data;
  std::string output;
  std::string output_dir;
  std::string idempotency_key;
  std::string urls_file;
  std::size_t jobs = 4;
  double deadline_s = 0;
  std::int64_t max_attempts = 5;
  std::string profile;
  std::vector<std::string> profile_files;
  std::string pacer_key;
  std::uint64_t max_filesize = 0;  // 0: no limit
  std::string store = "memory";
  std::string pacing = "smooth";
  std::string stats;
  std::string resume;
  std::string resume_file = "abide-resume.json";
  double max_wait_s = 0;
  double max_time_s = 0;
  double connect_timeout_s = 10;
  std::uint64_t seed = 0;
  bool verbose = false;
  bool silent = false;
  // Which options were given.
  bool has_data = false;
  bool has_deadline = false;
  bool has_max_wait = false;
  bool has_seed = false;
};

constexpr const char* kFooterStart = R"(Sources (exactly one): URL, --urls FILE (one URL per line; '#' comments), or
--resume FILE. -X, -H, -d and --idempotency-key apply to every request; in a
batch, --idempotency-key KEY sends KEY-N for the request on line N.

Outputs: bodies of final answers go to stdout, to -o FILE (all of them, in
the order they finish; -o /dev/null discards them), or with --output-dir DIR
to one file per request, named NNNNNN-LAST_PATH_SEGMENT (N: the request's
line). Failed attempts' bodies are never written. Bodies stream to their
destination as they arrive, with no size cap; --max-filesize BYTES fails a
request whose body is longer, and keeps no partial file of it.

Requests are paced per origin and credential: different Authorization or
API-key header values (X-Api-Key, Api-Key, ...) get separate pacer keys, which
hold a hash of the value, never the value. --pacer-key NAME paces every
request under NAME instead.

--deadline S counts from the start of the run and applies to every request: a
request that cannot finish by then ends deadline_exceeded, with the time the
server permits another try.

Interrupt (Ctrl-C, SIGINT; or SIGTERM): waits are cancelled and transfers in
flight aborted at once; every request not done that is worth running again
(cancelled, deferred, deadline_exceeded, exhausted; never an ambiguous one) is
written to the resume file (--resume-file, default abide-resume.json), and the
exit status is 130 (143 for SIGTERM). The resume file is also written when a
run ends with such requests unfinished. `abide fetch --resume FILE` runs
them again, never before each one's permitted time. Request headers are not
stored in it (they may carry credentials): give -H again when resuming.
A second Ctrl-C exits at once, without writing anything.

)";

// Only in an abide built with abide::redis.
constexpr const char* kFooterRedis = R"(--store redis://[[USER]:PASSWORD@]HOST[:PORT][/PREFIX] (or unix:/PATH) shares
the quota state with other processes. Without a password in the URL, the
environment variable ABIDE_REDIS_PASSWORD gives it (so that it is not on the
command line). If Redis goes down, one line on stderr says so and the run
goes on with in-process quota state, reconnecting in the background; no
request is lost. Passwords are never printed.

)";

constexpr const char* kFooterEnd = R"(--stats FILE writes a JSON summary: requests, done, attempts, retries,
status_counts {"STATUS": count}, transport_errors, outcomes {kind: count},
ambiguous, waited_s (summed over requests), elapsed_s, interrupted, and
unfinished [{url, outcome, not_before (RFC 3339 or null), method, index,
reason, ambiguous, resumable}].

On a terminal, a progress line shows done/total, requests in flight and
waiting, and an ETA. --verbose prints every attempt, response (with what was
ignored or adjusted in it) and decision, with Authorization, Cookie,
Proxy-Authorization and API-key-style headers (and credential query
parameters) redacted; no output shows their values.
URLs on stderr and in the stats file have credentials redacted, in the query
and in the fragment; a URL that libcurl cannot parse is shown as a placeholder
(the resume file keeps each URL as given, to run it again, and is readable by
its owner alone). Bytes a server sent are shown escaped
(\xNN): no control byte reaches the terminal.

Exit status: 0 every request done, 1 some request not done (or an output
could not be written), 2 usage error, 130 interrupted.)";

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

// A file name for request `index` in --output-dir.
std::string output_name(const FetchJob& job) {
  char num[32];
  std::snprintf(num, sizeof num, "%06zu", job.index + 1);
  std::string_view path = job.url;
  if (const auto q = path.find_first_of("?#"); q != std::string_view::npos) path = path.substr(0, q);
  if (const auto s = path.find("://"); s != std::string_view::npos) path = path.substr(s + 3);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  const auto slash = path.rfind('/');
  std::string seg;
  if (slash != std::string_view::npos) {
    for (char c : path.substr(slash + 1)) {
      if (seg.size() >= 60) break;
      const auto u = static_cast<unsigned char>(c);
      seg += (std::isalnum(u) != 0 || c == '.' || c == '-' || c == '_') ? c : '_';
    }
  }
  if (seg.empty() || seg == "." || seg == "..") return num;
  return std::string(num) + "-" + seg;
}

std::string fmt_seconds(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", to_seconds(d));
  return buf;
}

// Takes SIGINT and SIGTERM on a thread of its own (they are blocked in every
// other thread): the first cancels the run, a second exits at once.
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    // An inherited "ignore" would discard the signal before sigtimedwait.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] { watch(); });
  }
  ~SignalWatcher() {
    finished_.store(true);
    thread_.join();
    pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);
  }
  std::stop_token token() const { return source_.get_token(); }
  int signal_number() const { return signo_.load(); }

 private:
  void watch() {
    while (!finished_.load()) {
      timespec ts{0, 100'000'000};
      const int s = sigtimedwait(&set_, nullptr, &ts);
      if (s <= 0) continue;
      if (signo_.load() != 0) {
        static constexpr char kMsg[] = "\nabide: interrupted again; exiting without writing the resume file\n";
        static_cast<void>(::write(2, kMsg, sizeof kMsg - 1));
        std::_Exit(s == SIGTERM ? 143 : 130);
      }
      signo_.store(s);
      source_.request_stop();
    }
  }
  sigset_t set_{};
  std::stop_source source_;
  std::atomic<bool> finished_{false};
  std::atomic<int> signo_{0};
  std::thread thread_;
};

// Where the final answers' bodies go, as they arrive (Client::fetch with a
// ResponseSink): nothing is held in memory beyond a chunk. A shared output
// (stdout, -o FILE) takes one body at a time, whole: the first final answer to
// arrive writes straight to it, and bodies arriving meanwhile go to an
// unnamed temporary file, copied over when they are complete, so that bodies
// never interleave and each appears when it has finished.
class BodyOutput {
 public:
  // One request's body on its way out.
  struct Body {
    enum class Mode : std::uint8_t { kNone, kShared, kOwn, kSpool };
    Mode mode = Mode::kNone;
    std::FILE* file = nullptr;
    std::string own_path;   // --output-dir: the request's file
    long shared_start = -1;  // where the body started in a seekable shared output
    std::uint64_t bytes = 0;
    bool too_large = false;  // over --max-filesize: refused, and nothing of it kept
    bool failed = false;     // a write failed
  };

  // Opens -o FILE (or stdout); --output-dir is written per request.
  std::optional<std::string> open(const FetchOptions& o, std::size_t requests);
  ~BodyOutput() {
    if (owned_) std::fclose(file_);
  }
  BodyOutput() = default;
  BodyOutput(const BodyOutput&) = delete;
  BodyOutput& operator=(const BodyOutput&) = delete;

  // The final answer's head: false refuses it (a Content-Length over the limit).
  bool begin(Body& b, const FetchJob& job, const FinalHead& head);
  // A chunk of it: false stops the transfer (over the limit, or a write failed).
  bool chunk(Body& b, std::string_view data);
  // After the request ended; false when the body could not be written.
  bool end(Body& b);
  // Closes the shared output; false on failure.
  bool close();

 private:
  bool over_limit(std::uint64_t bytes) const { return max_bytes_ > 0 && bytes > max_bytes_; }
  bool copy_spool(std::FILE* spool);

  std::mutex shared_;  // held by the body writing to file_
  std::string dir_;
  std::string path_;   // -o FILE ("" for stdout)
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  bool seekable_ = false;       // a regular file: a refused body can be cut off again
  bool single_ = false;         // one request: a refused body leaves no -o file at all
  bool remove_output_ = false;  // that happened
  std::uint64_t max_bytes_ = 0;
};

std::optional<std::string> BodyOutput::open(const FetchOptions& o, std::size_t requests) {
  max_bytes_ = o.max_filesize;
  single_ = requests == 1;
  dir_ = o.output_dir;
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec || !std::filesystem::is_directory(dir_)) return "cannot create --output-dir " + dir_;
    return std::nullopt;
  }
  if (o.output.empty() || o.output == "-") {
    file_ = stdout;
    return std::nullopt;
  }
  path_ = o.output;
  file_ = std::fopen(o.output.c_str(), "wb");
  owned_ = file_ != nullptr;
  if (file_ == nullptr) return "cannot write " + o.output;
  struct stat st {};
  seekable_ = ::fstat(::fileno(file_), &st) == 0 && S_ISREG(st.st_mode);
  return std::nullopt;
}

bool BodyOutput::begin(Body& b, const FetchJob& job, const FinalHead& head) {
  // Only a final answer's body is written (done, or not to be repeated), as before streaming.
  if (head.kind != OutcomeKind::kDone && head.kind != OutcomeKind::kNotRetryable) return true;
  // A declared length over the limit is refused before any byte (as curl does).
  if (max_bytes_ > 0) {
    if (auto len = head.response.headers.first("Content-Length")) {
      std::uint64_t n = 0;
      const auto* end = len->data() + len->size();
      if (std::from_chars(len->data(), end, n).ptr == end && !len->empty() && over_limit(n)) {
        b.too_large = true;
        return false;
      }
    }
  }
  if (!dir_.empty()) {
    b.own_path = (std::filesystem::path(dir_) / output_name(job)).string();
    b.file = std::fopen(b.own_path.c_str(), "wb");
    b.mode = Body::Mode::kOwn;
  } else if (shared_.try_lock()) {
    b.file = file_;
    b.mode = Body::Mode::kShared;
    if (seekable_) b.shared_start = std::ftell(file_);
  } else {
    b.file = std::tmpfile();
    b.mode = Body::Mode::kSpool;
  }
  if (b.file == nullptr) {
    b.failed = true;
    return false;
  }
  return true;
}

bool BodyOutput::chunk(Body& b, std::string_view data) {
  if (b.mode == Body::Mode::kNone) return true;
  b.bytes += data.size();
  if (over_limit(b.bytes)) {
    b.too_large = true;
    return false;
  }
  if (std::fwrite(data.data(), 1, data.size(), b.file) != data.size()) {
    b.failed = true;
    return false;
  }
  return true;
}

bool BodyOutput::copy_spool(std::FILE* spool) {
  std::rewind(spool);
  std::vector<char> buf(std::size_t{64} << 10);
  bool ok = true;
  std::lock_guard lock(shared_);
  while (ok) {
    const std::size_t n = std::fread(buf.data(), 1, buf.size(), spool);
    if (n == 0) break;
    ok = std::fwrite(buf.data(), 1, n, file_) == n;
  }
  ok = std::ferror(spool) == 0 && ok;
  return std::fflush(file_) == 0 && ok;
}

bool BodyOutput::end(Body& b) {
  bool ok = !b.failed;
  switch (b.mode) {
    case Body::Mode::kNone: break;
    case Body::Mode::kOwn:
      ok = std::fclose(b.file) == 0 && ok;
      // No partial file for a refused body, as curl --max-filesize.
      if (b.too_large) {
        std::error_code ec;
        std::filesystem::remove(b.own_path, ec);
      }
      break;
    case Body::Mode::kShared:
      if (b.too_large) {
        std::fflush(file_);
        if (single_ && !path_.empty()) remove_output_ = true;
        // Cut what was written of it off again (a pipe keeps what it got).
        if (b.shared_start >= 0 && ::ftruncate(::fileno(file_), b.shared_start) == 0)
          std::fseek(file_, b.shared_start, SEEK_SET);
      }
      ok = std::fflush(file_) == 0 && ok;
      shared_.unlock();
      break;
    case Body::Mode::kSpool:
      if (!b.too_large && ok) ok = copy_spool(b.file);
      ok = std::fclose(b.file) == 0 && ok;
      break;
  }
  b.mode = Body::Mode::kNone;
  b.file = nullptr;
  return ok;
}

bool BodyOutput::close() {
  if (!owned_) return std::fflush(stdout) == 0;
  owned_ = false;
  const bool ok = std::fclose(file_) == 0;
  if (remove_output_) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  return ok;
}

// --verbose: one line per thing that happened, credentials redacted. Server
// bytes (header names and values) go through abide::printable() here; the
// planner's reasons and transport errors, made elsewhere, through safe_text().
void verbose_event(Progress& progress, const std::vector<FetchJob>& jobs, const ClientEvent& e) {
  using K = ClientEvent::Kind;
  const std::string tag = "* [" + std::to_string(jobs[e.index].index + 1) + "] ";
  switch (e.kind) {
    case K::kAttemptStarted: {
      std::string s = "> [" + std::to_string(jobs[e.index].index + 1) + "] " + e.request->method + " " +
                      jobs[e.index].shown_url + " (attempt " + std::to_string(e.attempt) + ")";
      if (e.attempt == 1) {
        for (const Header& h : e.request->headers.lines())
          s += "\n>   " + abide::printable(h.name) + ": " + printable_header_value(h.name, h.value);
        if (e.request->idempotency_key) s += "\n>   Idempotency-Key: " + *e.request->idempotency_key;
        // The key holds a credential's hash only, never the credential.
        if (!e.request->pacer_key.empty()) s += "\n" + tag + "pacer key " + abide::printable(e.request->pacer_key, 256);
      }
      progress.print_line(s);
      break;
    }
    case K::kResponseObserved: {
      std::string s = "< [" + std::to_string(jobs[e.index].index + 1) + "] " + std::to_string(e.response->status);
      for (const Header& h : e.response->headers.lines())
        s += "\n<   " + abide::printable(h.name) + ": " + printable_header_value(h.name, h.value);
      // What observe() ignored or adjusted (a malformed hint, a wrong day name, ...).
      if (e.signals != nullptr)
        for (const std::string& w : e.signals->warnings) s += "\n" + tag + "warning: " + safe_text(w, 1024);
      progress.print_line(s);
      break;
    }
    case K::kTransportError: progress.print_line(tag + "error: " + safe_text(e.error)); break;
    case K::kDecision:
      progress.print_line(tag + std::string(to_string(e.plan->decision)) + ": " + safe_text(e.reason));
      break;
    case K::kWaitEnded:
      if (e.wait_kind == ClientEvent::WaitKind::kPacer && e.wait >= 1ms)
        progress.print_line(tag + "paced " + fmt_seconds(e.wait));
      break;
    case K::kFinished:
      progress.print_line(tag + "outcome " + std::string(to_string(e.outcome->kind)) +
                          (e.outcome->ambiguous ? " (ambiguous)" : "") + ": " + safe_text(e.outcome->reason));
      break;
    case K::kWaitStarted: break;
  }
}

int run_fetch(const FetchOptions& o) {
  // --- the requests -------------------------------------------------------
  const int sources = (o.url.empty() ? 0 : 1) + (o.urls_file.empty() ? 0 : 1) + (o.resume.empty() ? 0 : 1);
  if (sources != 1) {
    std::cerr << "abide fetch: give exactly one of URL, --urls FILE, --resume FILE\n";
    return kExitUsage;
  }
  if (!o.output.empty() && !o.output_dir.empty()) {
    std::cerr << "abide fetch: -o and --output-dir cannot be combined\n";
    return kExitUsage;
  }
  HeaderList headers;
  for (const std::string& h : o.headers) {
    auto parsed = parse_header_option(h);
    if (!parsed) {
      std::cerr << "abide fetch: " << parsed.error() << "\n";
      return kExitUsage;
    }
    headers.add(parsed->name, parsed->value);
  }
  std::string body = o.data;
  if (o.has_data && !body.empty() && body.front() == '@') {
    auto text = read_input(body.substr(1));
    if (!text) return kExitRejected;
    body = std::move(*text);
  }
  const std::string method = !o.method.empty() ? o.method : o.has_data ? "POST" : "GET";
  auto spec = parse_store_spec(o.store);
  if (!spec) {
    std::cerr << "abide fetch: " << spec.error() << "\n";
    return kExitUsage;
  }
  auto profiles = load_profiles(o.profile_files);
  if (!profiles) {
    const RejectedProfileFile& r = profiles.error();
    return reject("--profile-file " + r.file + ": profile rejected: " + r.error.what());
  }
  ProfileRegistry& registry = *profiles;
  if (!o.profile.empty() && o.profile != "none" && registry.find(o.profile) == nullptr) {
    std::cerr << "abide fetch: unknown --profile \"" << o.profile << "\"\n";
    return kExitUsage;
  }

  std::vector<FetchJob> jobs;
  bool batch = false;
  if (!o.resume.empty()) {
    auto read = read_resume(o.resume);
    if (!read) return reject(read.error());
    jobs = std::move(*read);
    batch = true;
  } else {
    std::vector<std::string> urls;
    if (!o.urls_file.empty()) {
      auto list = read_url_list(o.urls_file);
      if (!list) return reject(list.error());
      urls = std::move(*list);
      batch = true;
    } else {
      urls.push_back(o.url);
    }
    for (std::size_t i = 0; i < urls.size(); ++i) {
      FetchJob job;
      job.index = i;
      job.method = method;
      job.url = std::move(urls[i]);
      job.body = body;
      if (!o.idempotency_key.empty())
        job.idempotency_key = batch ? o.idempotency_key + "-" + std::to_string(i + 1) : o.idempotency_key;
      jobs.push_back(std::move(job));
    }
  }

  for (FetchJob& job : jobs) job.shown_url = shown_url(job.url);

  BodyOutput sink;
  if (auto err = sink.open(o, jobs.size())) return reject(*err);
  auto store = open_store(*spec);
  if (!store) return reject(store.error());

  // --- the client -----------------------------------------------------------
  // Signals first: every thread started from here on inherits the mask.
  SignalWatcher signals;
  const bool tty = isatty(STDERR_FILENO) == 1;
  Progress progress(jobs.size(), tty && !o.silent && !o.verbose);

  ClientConfig config;
  config.max_attempts = o.max_attempts;
  config.profile = o.profile;
  config.registry = &registry;
  config.connect_timeout = seconds_option(o.connect_timeout_s);
  config.attempt_timeout = seconds_option(o.max_time_s);
  PacerConfig pacer_config;
  pacer_config.rules.pacing = o.pacing == "burst" ? Pacing::kBurst : Pacing::kSmooth;
  if (o.has_max_wait) {
    config.planner.max_wait = seconds_option(o.max_wait_s);
    pacer_config.max_wait = config.planner.max_wait;
  }
  if (o.has_seed) {
    config.random = std::make_shared<SeededRandom>(o.seed);
    pacer_config.seed = o.seed;
  }
  config.pacer = std::make_shared<Pacer>(pacer_config, std::move(*store));
  std::vector<Request> requests(jobs.size());
  // Client::fetch(request, sink) reports every request as index 0: the
  // request's place in `requests` says which it is.
  config.on_event = [&](const ClientEvent& event) {
    ClientEvent e = event;
    if (e.request != nullptr && e.request >= requests.data() && e.request < requests.data() + requests.size())
      e.index = static_cast<std::size_t>(e.request - requests.data());
    if (e.index >= jobs.size()) return;
    progress.on_event(e);
    if (o.verbose) verbose_event(progress, jobs, e);
  };
  Client client(config);

  const WallTime start_wall = system_wall_clock().now();
  const MonoTime start = system_monotonic_clock().now();
  // A resumed run: what the server permitted holds for the whole origin, so the
  // pacer starts with that cooldown (a fresh process knows nothing else).
  std::map<std::string, WallTime> cooldowns;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Request& r = requests[i];
    r.method = jobs[i].method;
    r.url = jobs[i].url;
    r.headers = headers;
    r.pacer_key = request_pacer_key(r.url, headers, o.pacer_key);
    if (jobs[i].not_before && !r.pacer_key.empty()) {
      auto [it, fresh] = cooldowns.emplace(r.pacer_key, *jobs[i].not_before);
      if (!fresh && *jobs[i].not_before > it->second) it->second = *jobs[i].not_before;
    }
    r.body = jobs[i].body;
    r.idempotency_key = jobs[i].idempotency_key;
    r.not_before = jobs[i].not_before;
    if (o.has_deadline) r.deadline = saturating_add(start, seconds_option(o.deadline_s));
  }
  for (const auto& [key, until] : cooldowns) {
    if (until > start_wall) client.pacer().block_until(key, until);
  }

  std::atomic<bool> write_failed{false};
  std::vector<RequestOutcome> outcomes(requests.size());
  std::atomic<std::size_t> next{0};
  // Workers share the client (its pacer and connections); each streams the
  // final answer of its request to the output as it arrives.
  const auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < requests.size(); i = next.fetch_add(1)) {
      BodyOutput::Body written;
      ResponseSink to_output;
      to_output.head = [&](const FinalHead& head) { return sink.begin(written, jobs[i], head); };
      to_output.body = [&](std::string_view chunk) { return sink.chunk(written, chunk); };
      RequestOutcome out = client.fetch(requests[i], to_output, signals.token());
      if (!sink.end(written)) write_failed.store(true);
      if (written.too_large) {
        // Said in curl's terms, with the limit (the engine only knows the sink refused).
        out.kind = OutcomeKind::kNotRetryable;
        out.reason = "the body is larger than --max-filesize " + std::to_string(o.max_filesize) + " bytes";
      }
      outcomes[i] = std::move(out);
      progress.on_done();
    }
  };
  progress.start();
  {
    const std::size_t workers = std::clamp<std::size_t>(o.jobs, 1, std::max<std::size_t>(1, requests.size()));
    std::vector<std::thread> threads;
    threads.reserve(workers - 1);
    for (std::size_t w = 1; w < workers; ++w) threads.emplace_back(worker);
    worker();  // this thread is one of them
    for (auto& t : threads) t.join();
  }
  progress.stop();
  const Duration elapsed = system_monotonic_clock().now() - start;
  if (!sink.close()) write_failed.store(true);
  const int signo = signals.signal_number();

  // --- records ---------------------------------------------------------------
  std::size_t done = 0, resumable_left = 0, unfinished = 0;
  for (const auto& out : outcomes) {
    if (out.done()) ++done;
    else ++unfinished;
    if (resumable(out)) ++resumable_left;
  }
  int status = done == outcomes.size() ? kExitOk : kExitRejected;
  if (write_failed.load()) {
    std::cerr << "abide fetch: could not write every body\n";
    status = kExitRejected;
  }
  if (!o.stats.empty()) {
    const auto j = stats_json(jobs, outcomes, elapsed, signo != 0);
    if (auto err = write_file_atomically(o.stats,
                                         j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                                             "\n")) {
      std::cerr << "abide fetch: " << *err << "\n";
      status = kExitRejected;
    }
  }
  if (resumable_left > 0) {
    const auto j = resume_json(jobs, outcomes, system_wall_clock().now());
    // Owner only: the resume file keeps URLs and bodies as given (to send them again).
    if (auto err = write_file_atomically(o.resume_file,
                                         j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n",
                                         FileAccess::kOwnerOnly)) {
      std::cerr << "abide fetch: " << *err << "\n";
      status = kExitRejected;
    } else if (!o.silent || signo != 0) {
      std::cerr << "abide fetch: " << resumable_left << " unfinished request" << (resumable_left == 1 ? "" : "s")
                << " written to " << o.resume_file << " (run again with: abide fetch --resume " << o.resume_file
                << ")\n";
    }
  } else if (!o.resume.empty() && o.resume == o.resume_file) {
    std::filesystem::remove(o.resume_file);  // nothing left to resume
  }
  if (!o.silent) {
    std::size_t shown = 0;
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
      const auto& out = outcomes[i];
      // Cancelled requests are summed up by the resume message, unless they need reconciling.
      if (out.done() || (out.kind == OutcomeKind::kCancelled && !out.ambiguous)) continue;
      if (++shown > 20) continue;
      std::cerr << "abide fetch: " << jobs[i].method << " " << jobs[i].shown_url << ": " << to_string(out.kind)
                << (out.ambiguous ? " (ambiguous: may have been applied)" : "") << ": " << safe_text(out.reason)
                << "\n";
    }
    if (shown > 20) std::cerr << "abide fetch: ... and " << shown - 20 << " more\n";
    if (batch || o.verbose) {
      std::cerr << "abide fetch: " << outcomes.size() << " requests, " << done << " done, " << unfinished
                << " not done; elapsed " << fmt_seconds(elapsed) << "\n";
    }
  }
  if (signo != 0) return signo == SIGTERM ? 143 : 130;
  return status;
}

const Registration fetch_cmd{
    {"fetch"},
    "Fetch URLs like curl, obeying Retry-After, RateLimit and vendor quotas",
    [](CLI::App& app) -> Run {
      auto o = std::make_shared<FetchOptions>();
      app.add_option("url", o->url, "The URL (http or https)");
      app.add_option("-X,--request", o->method, "Method (default GET, or POST with -d)");
      app.add_option("-H,--header", o->headers, "A request header 'Name: value' (repeatable)")->allow_extra_args(false);
      auto* data = app.add_option("-d,--data", o->data, "Request body (@FILE reads a file, @- standard input)");
      app.add_option("-o,--output", o->output, "Write bodies to FILE (/dev/null discards them)");
      app.add_option("--output-dir", o->output_dir, "Write one file per request into DIR");
      app.add_option("--idempotency-key", o->idempotency_key,
                     "Send Idempotency-Key: KEY (KEY-N in a batch), so POST/PATCH may be retried");
      app.add_option("--urls", o->urls_file, "A batch: one URL per line (- for standard input)");
      app.add_option("-j,--jobs", o->jobs, "Concurrent requests in a batch")
          ->capture_default_str()
          ->check(CLI::Range(std::size_t{1}, std::size_t{256}));
      auto* deadline = app.add_option("--deadline", o->deadline_s,
                                      "Seconds from the start by which every request must be done")
                           ->check(CLI::Range(0.0, 1e9));
      app.add_option("--max-attempts", o->max_attempts, "Attempts per request, the first included")
          ->capture_default_str()
          ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000}));
      auto* max_wait =
          app.add_option("--max-wait", o->max_wait_s,
                         "Longest acceptable wait in seconds; a longer server hint ends the request deferred")
              ->check(CLI::Range(0.0, 1e9));
      app.add_option("--max-time", o->max_time_s, "Longest time for one attempt's transfer, in seconds (0: none)")
          ->check(CLI::Range(0.0, 1e9));
      app.add_option("--connect-timeout", o->connect_timeout_s, "Connect timeout in seconds")
          ->capture_default_str()
          ->check(CLI::Range(0.001, 1e6));
      app.add_option("--profile", o->profile, "Vendor profile for quota headers (default: by host; none: off)");
      app.add_option("--profile-file", o->profile_files, "Load a profile from this JSON file first (repeatable)")
          ->allow_extra_args(false);
      app.add_option("--pacer-key", o->pacer_key,
                     "Pace every request under this one key (default: per origin and credential)");
      app.add_option("--max-filesize", o->max_filesize,
                     "Refuse a body larger than BYTES (the request fails, and no partial file is kept)")
          ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()));
      app.add_option("--store", o->store,
                     redis_built_in() ? "Quota state: memory, or redis://[:PASSWORD@]HOST:PORT[/PREFIX] to share it "
                                        "(password also from $ABIDE_REDIS_PASSWORD)"
                                      : "Quota state: memory (this abide was built without Redis support)")
          ->capture_default_str();
      app.add_option("--pacing", o->pacing, "Spend known quota smoothly, or in a burst")
          ->capture_default_str()
          ->check(CLI::IsMember({"smooth", "burst"}));
      app.add_option("--stats", o->stats, "Write a JSON summary to FILE");
      app.add_option("--resume", o->resume, "Run the unfinished requests recorded in FILE");
      app.add_option("--resume-file", o->resume_file, "Where unfinished requests are recorded")->capture_default_str();
      auto* seed = app.add_option("--seed", o->seed, "Seed for the jitter (reproducible runs)");
      app.add_flag("-v,--verbose", o->verbose, "Print every attempt and decision (credentials redacted)");
      app.add_flag("-s,--silent", o->silent, "No progress line, no summary");
      app.footer(std::string(kFooterStart) + (redis_built_in() ? kFooterRedis : "") + kFooterEnd);
      return [o, data, deadline, max_wait, seed] {
        o->has_data = data->count() > 0;
        o->has_deadline = deadline->count() > 0;
        o->has_max_wait = max_wait->count() > 0;
        o->has_seed = seed->count() > 0;
        return run_fetch(*o);
      };
    }};

}  // namespace cmd_fetch
}  // namespace abide::cli
