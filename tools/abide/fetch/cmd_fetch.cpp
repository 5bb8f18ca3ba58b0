// abide fetch: a curl-like client that obeys the server (abide::Client), for
// one URL or a batch: the run itself. Its flags are in fetch_flags.cpp, its
// requests are made by fetch_request.h, its answers written by body_output.h
// (-w by fetch_write_out.h), and -L follows redirects by fetch_redirect.h.
// Built only with abide::curl (see tools/abide/CMakeLists.txt).

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "abide/client.h"
#include "abide/headers.h"
#include "abide/http_date.h"
#include "abide/loop_client.h"
#include "abide/profiles.h"
#include "command.h"
#include "common.h"
#include "fetch/body_output.h"
#include "fetch/fetch_batch.h"
#include "fetch/fetch_jobs.h"
#include "fetch/fetch_options.h"
#include "fetch/fetch_progress.h"
#include "fetch/fetch_redirect.h"
#include "fetch/fetch_request.h"
#include "fetch/fetch_verbose.h"
#include "fetch/fetch_write_out.h"
#include "fetch/shown_url.h"
#include "fetch_store.h"
#include "key_secret.h"
#include "mutex.h"
#include "proxy/proxy_rules.h"

namespace abide::cli {
namespace cmd_fetch {  // private to this file (the CLI is compiled in unity batches)

using namespace std::chrono_literals;

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

// The HTTP version -http1.1/--http2 ask for.
HttpVersion http_version(const std::string& v) {
  if (v == "1.1") return HttpVersion::kHttp1_1;
  if (v == "2") return HttpVersion::kHttp2;
  return HttpVersion::kDefault;
}

// Where the unfinished requests are recorded: with --resume FILE and no
// --resume-file, FILE itself, so that a finished request is not sent again.
std::string resume_target(const FetchOptions& o) {
  if (!o.resume.empty() && o.resume != "-" && !o.has_resume_file) return o.resume;
  return o.resume_file;
}

// The first two requests of a --urls file, for BodyOutput::open: it checks
// the -O name of the first, and tells one request from many. Standard input
// cannot be read twice: nothing (a list of many).
std::vector<FetchJob> first_lines(const RequestPlan& plan) {
  std::vector<FetchJob> jobs;
  if (plan.urls_file == "-") return jobs;
  auto reader = UrlListReader::open(plan.urls_file);
  while (reader && jobs.size() < 2) {
    auto line = reader->next();
    if (!line || !*line) break;
    jobs.push_back(job_for_line(plan, std::move(**line), jobs.size()));
    jobs.back().shown_url = shown_url(jobs.back().url);
  }
  return jobs;
}

// --jobs within the descriptors: each request out holds a connection, may
// keep another pooled and may spill its answer to a temporary file, beside
// 64 for the rest. Said on stderr (unless -s) when it lowers --jobs.
// `wanted`: what the batch can use of `asked` (--jobs, as given).
std::size_t fit_jobs(std::size_t wanted, std::size_t asked, bool silent) {
  const std::optional<std::size_t> limit = raise_descriptor_limit();
  if (!limit) return wanted;
  const std::size_t room = *limit > 64 + 3 ? (*limit - 64) / 3 : 1;
  if (wanted <= room) return wanted;
  if (!silent) {
    std::cerr << "abide fetch: --jobs " << asked << " lowered to " << room << ": the process may open " << *limit
              << " descriptors (ulimit -n)\n";
  }
  return room;
}

// Writes all of text to stdout; false when it could not.
bool to_stdout(std::string_view text) {
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
}

// One run of `abide fetch`, step by step. prepare() checks everything the
// run needs before a request is sent, in the order the errors are said (an
// unusable store leaves no empty -o file); send() makes the requests and
// then records what is left. A step that refuses the run returns its exit
// status. Members are declared in the order they are made: they are undone
// the other way round (the client before the progress it reports to).
class FetchRun {
 public:
  explicit FetchRun(const FetchOptions& o) : o_(o) {}
  FetchRun(const FetchRun&) = delete;
  FetchRun& operator=(const FetchRun&) = delete;

  // nullopt when the run may start, else its exit status.
  std::optional<int> prepare();
  // Sends every request and records the outcome; the exit status.
  int send();

 private:
  // --- the requests, and the outputs checked before anything is sent
  std::optional<int> check_flags();    // outputs that exclude each other; --store
  std::optional<int> load_registry();  // --profile-file, --profile
  std::optional<int> plan();
  std::optional<int> check_write_out_and_stats();
  std::optional<int> open_store_and_secret();  // the store, and the secret of its credential keys
  std::optional<int> open_outputs();           // -o, -O, --output-dir, -D; the --urls file

  // --- the client
  ProgressOptions progress_options() const;
  std::size_t concurrent_jobs() const;
  ClientConfig client_config(std::size_t jobs);
  void block_resumed_cooldowns(WallTime now);
  std::string pacer_key(std::string_view url, const HeaderList& headers) const;
  Request make_request(const FetchJob& job) const;
  void on_event(const ClientEvent& e);
  void watch_learned(const std::string& name);
  void run_requests(std::size_t jobs);

  // --- records
  int record(Duration elapsed, int signo);
  bool outputs_whole() const;
  nlohmann::ordered_json learned_json();
  bool write_stats(Duration elapsed, bool interrupted);
  bool record_resumable(bool interrupted);
  void say_unfinished() const;

  const FetchOptions& o_;
  std::optional<StoreSpec> spec_;
  std::optional<ProfileRegistry> registry_;
  std::optional<RequestPlan> plan_;
  std::optional<WriteOutFormat> write_out_;
  std::optional<OpenedStore> store_;
  std::optional<ResolvedSecret> key_secret_;
  BodyOutput sink_;
  std::optional<JobFeed> feed_;
  std::optional<SignalWatcher> signals_;
  std::optional<Progress> progress_;
  // -v: the requests being made, by their position in the run (Client::fetch's
  // index, which every event carries).
  detail::Mutex flight_mu_;
  std::unordered_map<std::size_t, const FetchJob*> in_flight_ ABIDE_GUARDED_BY(flight_mu_);
  std::optional<LoopClient> client_;
  MonoTime start_{};
  std::atomic<bool> write_failed_{false};
  std::atomic<bool> unsaid_failure_{false};  // a write failure no request's message says
  std::atomic<bool> said_failure_{false};    // one that a request's message says
  // Each outcome is folded in as its request finishes, then dropped.
  RunSummary summary_;
  // What each pacer key learned from limited answers, where its server
  // announces no quota: said with -v as it changes, listed in --stats (at
  // most kLearnedKeys keys are watched).
  static constexpr std::size_t kLearnedKeys = 1000;
  detail::Mutex learned_mu_;
  std::map<std::string, std::optional<LearnedPolicy>> learned_keys_ ABIDE_GUARDED_BY(learned_mu_);
};

std::optional<int> FetchRun::prepare() {
  for (const auto step :
       {&FetchRun::check_flags, &FetchRun::load_registry, &FetchRun::plan, &FetchRun::check_write_out_and_stats,
        &FetchRun::open_store_and_secret, &FetchRun::open_outputs}) {
    if (const std::optional<int> refused = (this->*step)()) return refused;
  }
  return std::nullopt;
}

std::optional<int> FetchRun::check_flags() {
  if (!o_.output.empty() && !o_.output_dir.empty()) {
    std::cerr << "abide fetch: -o and --output-dir cannot be combined\n";
    return kExitUsage;
  }
  if (o_.remote_name && !o_.output.empty()) {
    std::cerr << "abide fetch: -o and -O cannot be combined\n";
    return kExitUsage;
  }
  auto spec = parse_store_spec(o_.store);
  if (!spec) {
    std::cerr << "abide fetch: " << spec.error() << "\n";
    return kExitUsage;
  }
  spec_ = std::move(*spec);
  spec_->fallback = o_.store_fallback;
  spec_->fail_closed = o_.fail_closed;
  return std::nullopt;
}

std::optional<int> FetchRun::load_registry() {
  auto profiles = load_profiles(o_.profile_files);
  if (!profiles) {
    const RejectedProfileFile& r = profiles.error();
    return reject("--profile-file " + r.file + ": profile rejected: " + r.error.what());
  }
  registry_.emplace(std::move(*profiles));
  if (const auto unknown = unknown_profile(*registry_, o_.profile)) {
    std::cerr << "abide fetch: --profile: " << *unknown << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

std::optional<int> FetchRun::plan() {
  auto plan = plan_requests(o_);
  if (!plan) {
    std::cerr << "abide fetch: " << plan.error().message << "\n";
    return plan.error().exit_code;
  }
  plan_.emplace(std::move(*plan));
  for (FetchJob& job : plan_->jobs) job.shown_url = shown_url(job.url);
  return std::nullopt;
}

std::optional<int> FetchRun::check_write_out_and_stats() {
  if (!o_.write_out.empty()) {
    auto text = write_out_argument(o_.write_out);
    if (!text) {
      std::cerr << "abide fetch: -w: " << text.error().text << "\n";
      return kExitRejected;
    }
    write_out_ = parse_write_out(*text);
    // As curl: said (even with -s), and written as nothing.
    for (const std::string& name : write_out_->unknown)
      std::cerr << "abide fetch: unknown --write-out variable: '" << printable(name, 100) << "'\n";
  }
  if (!o_.stats.empty() && o_.stats != "-") {
    if (auto err = unwritable(o_.stats, "--stats file")) {
      std::cerr << "abide fetch: " << *err << "\n";
      return kExitRejected;
    }
  }
  return std::nullopt;
}

std::optional<int> FetchRun::open_store_and_secret() {
  // The store first: a store that cannot be used leaves no empty -o file.
  auto store = open_store(*spec_);
  if (!store) return reject(store.error());
  store_.emplace(std::move(*store));
  // Credentials in pacer keys are hashed under a secret (key_secret.h); only
  // keys that hold one and leave the process need a secret that outlives it.
  const bool credential_keys = o_.pacer_key.empty() && proxy::carries_credential(plan_->headers);
  const KeyScope scope = !credential_keys ? KeyScope::kProcess
                         : spec_->redis   ? KeyScope::kFleet
                         : spec_->file    ? KeyScope::kMachine
                                          : KeyScope::kProcess;
  auto key_secret = resolve_key_secret(scope, SecretEnvironment::of_process());
  if (!key_secret) return reject(key_secret.error().text);
  key_secret_.emplace(std::move(*key_secret));
  if (!key_secret_->warning.empty()) std::cerr << "abide fetch: warning: " << key_secret_->warning << "\n";
  return std::nullopt;
}

std::optional<int> FetchRun::open_outputs() {
  if (auto err = sink_.open(o_, plan_->urls_file.empty() ? plan_->jobs : first_lines(*plan_))) {
    std::cerr << "abide fetch: " << *err << "\n";
    return kExitRejected;
  }
  feed_.emplace(*plan_);
  if (auto err = feed_->open()) {
    std::cerr << "abide fetch: " << *err << "\n";
    return kExitRejected;
  }
  return std::nullopt;
}

ProgressOptions FetchRun::progress_options() const {
  ProgressOptions p;
  p.terminal = isatty(STDERR_FILENO) == 1;
  p.stdout_same_terminal = p.terminal && isatty(STDOUT_FILENO) == 1 && o_.output.empty() && o_.output_dir.empty() &&
                           !o_.remote_name;
  p.silent = o_.silent;
  p.verbose = o_.verbose;
  // A cooldown past --max-wait defers at once: it is not announced as a wait.
  if (o_.has_max_wait) p.max_wait = seconds_option(o_.max_wait_s);
  p.burst = o_.pacing == "burst";
  p.resume_file = resume_target(o_);
  p.registry = &*registry_;
  return p;
}

// URL arguments run one after the other, as curl's (sequential) default
// does, so that their outputs come in argument order; a --urls or --resume
// batch runs --jobs requests at once, as many as the descriptors allow.
// (A batch shorter than --jobs needs no more; only then are the descriptors asked.)
std::size_t FetchRun::concurrent_jobs() const {
  if (!plan_->batch) return 1;
  const std::size_t wanted = std::min(o_.jobs, std::max<std::size_t>(1, plan_->total.value_or(o_.jobs)));
  return std::max<std::size_t>(fit_jobs(wanted, o_.jobs, o_.silent), 1);
}

ClientConfig FetchRun::client_config(std::size_t jobs) {
  ClientConfig config;
  config.max_transfers = jobs;  // also bounds the connections kept
  config.max_attempts = o_.max_attempts;
  config.profile = o_.profile;
  config.registry = &*registry_;
  config.connect_timeout = seconds_option(o_.connect_timeout_s);
  config.attempt_timeout = seconds_option(o_.max_time_s);
  config.proxy = o_.proxy;
  config.verify_tls = !o_.insecure;
  config.decompress = o_.compressed;
  config.http_version = http_version(o_.http_version);
  PacerConfig pacer_config;
  pacer_config.rules.pacing = o_.pacing == "burst" ? Pacing::kBurst : Pacing::kSmooth;
  if (o_.has_max_wait) {
    config.planner.max_wait = seconds_option(o_.max_wait_s);
    pacer_config.max_wait = config.planner.max_wait;
  }
  if (o_.has_seed) {
    config.random = std::make_shared<SeededRandom>(o_.seed);
    pacer_config.seed = o_.seed;
  }
  // The store's `remembered` stays with store_: it is asked again at the end.
  config.pacer = std::make_shared<Pacer>(pacer_config, std::move(store_->store));
  config.on_event = [this](const ClientEvent& e) { on_event(e); };
  return config;
}

// A resumed run: what the server permitted holds for the whole origin, so the
// pacer starts with that cooldown (a fresh process knows nothing else).
// (Only a resume file's requests carry a permitted time: they are a list.)
void FetchRun::block_resumed_cooldowns(WallTime now) {
  std::map<std::string, WallTime> cooldowns;
  for (const FetchJob& job : plan_->jobs) {
    if (!job.not_before) continue;
    const std::string key = pacer_key(job.url, plan_->headers);
    if (key.empty()) continue;
    auto [it, fresh] = cooldowns.emplace(key, *job.not_before);
    if (!fresh && *job.not_before > it->second) it->second = *job.not_before;
  }
  for (const auto& [key, until] : cooldowns) {
    if (until > now) client_->pacer().block_until(key, until);
  }
}

std::string FetchRun::pacer_key(std::string_view url, const HeaderList& headers) const {
  return request_pacer_key(url, headers, o_.pacer_key, key_secret_->secret);
}

// A request is made when a worker takes its job, and dropped when it is
// done: a batch holds as many as it has workers.
Request FetchRun::make_request(const FetchJob& job) const {
  Request r;
  r.method = job.method;
  r.url = job.url;
  r.headers = plan_->headers;
  r.pacer_key = pacer_key(r.url, plan_->headers);
  r.body = job.body;
  r.idempotency_key = job.idempotency_key;
  r.not_before = job.not_before;
  if (o_.has_deadline) r.deadline = saturating_add(start_, seconds_option(o_.deadline_s));
  return r;
}

void FetchRun::on_event(const ClientEvent& e) {
  progress_->on_event(e);
  if (!o_.verbose) return;
  detail::MutexLock lock(flight_mu_);
  if (const auto it = in_flight_.find(e.index); it != in_flight_.end()) verbose_event(*progress_, *it->second, e);
}

void FetchRun::watch_learned(const std::string& name) {
  if (name.empty() || (!o_.verbose && o_.stats.empty())) return;
  if (!o_.verbose) {
    // --stats asks each key once, at the end (a shared store's answer costs a round trip).
    detail::MutexLock lock(learned_mu_);
    if (learned_keys_.size() < kLearnedKeys) learned_keys_.try_emplace(name);
    return;
  }
  const std::optional<LearnedPolicy> now = client_->pacer().learned(client_->pacer().key(name));
  detail::MutexLock lock(learned_mu_);
  auto it = learned_keys_.find(name);
  if (it == learned_keys_.end()) {
    if (learned_keys_.size() >= kLearnedKeys) return;
    it = learned_keys_.emplace(name, std::nullopt).first;
  }
  const std::optional<LearnedPolicy>& was = it->second;
  const bool changed = now.has_value() != was.has_value() ||
                       (now && (now->count != was->count || now->window != was->window ||
                                now->from_retry_after != was->from_retry_after));
  it->second = now;
  if (changed && now) progress_->print_line("* learned for " + printable(name, 200) + ": " + learned_text(*now));
}

void FetchRun::run_requests(std::size_t jobs) {
  BatchContext context{o_,
                       *feed_,
                       sink_,
                       *progress_,
                       summary_,
                       write_out_,
                       *client_,
                       jobs,
                       [this](const FetchJob& job) { return make_request(job); },
                       [this](const Request& r) { return pacer_key(r.url, r.headers); },
                       [this](const std::string& name) { watch_learned(name); },
                       flight_mu_,
                       in_flight_,
                       write_failed_,
                       said_failure_,
                       unsaid_failure_};
  run_batch(context, signals_->token());
}

int FetchRun::send() {
  // Signals first: every thread started from here on inherits the mask.
  signals_.emplace();
  progress_.emplace(plan_->total.value_or(Progress::kUnknownTotal), progress_options());
  const std::size_t jobs = concurrent_jobs();
  client_.emplace(client_config(jobs));
  const WallTime start_wall = system_wall_clock().now();
  start_ = system_monotonic_clock().now();
  block_resumed_cooldowns(start_wall);

  progress_->start();
  run_requests(jobs);
  progress_->stop();
  const Duration elapsed = system_monotonic_clock().now() - start_;
  if (!sink_.close()) {
    write_failed_.store(true);
    // Closing an output that failed before fails again: that is said already.
    if (!said_failure_.load()) unsaid_failure_.store(true);
  }
  return record(elapsed, signals_->signal_number());
}

int FetchRun::record(Duration elapsed, int signo) {
  const std::uint64_t requests = summary_.requests(), done = summary_.done();
  int status = done == requests ? kExitOk : kExitRejected;
  if (!outputs_whole()) status = kExitRejected;
  if (!o_.stats.empty() && !write_stats(elapsed, signo != 0)) status = kExitRejected;
  if (!record_resumable(signo != 0)) status = kExitRejected;
  // Errors are said unless -s (and -S says them even then); the summary is -s's alone.
  if (!o_.silent || o_.show_error) say_unfinished();
  if (!o_.silent && (plan_->batch || o_.verbose)) {
    std::cerr << "abide fetch: " << requests << " requests, " << done << " done, " << requests - done
              << " not done; elapsed " << fmt_seconds(elapsed) << "\n";
  }
  if (signo != 0) return signo == SIGTERM ? 143 : 130;
  return status;
}

// False when the list or an output failed the run (each said here unless a
// request's message said it).
bool FetchRun::outputs_whole() const {
  bool whole = true;
  if (const std::string bad = feed_->error(); !bad.empty()) {
    // A bad line of standard input: the lines after it were not taken.
    std::cerr << "abide fetch: " << bad << "\n";
    whole = false;
  }
  if (write_failed_.load()) whole = false;
  if (unsaid_failure_.load()) {
    const std::string why = sink_.first_error();
    std::cerr << "abide fetch: " << (why.empty() ? std::string("could not write every output") : why) << "\n";
    whole = false;
  }
  return whole;
}

// --stats' "learned": each watched key's quota as the pacer holds it now.
nlohmann::ordered_json FetchRun::learned_json() {
  nlohmann::ordered_json learned = nlohmann::ordered_json::array();
  detail::MutexLock lock(learned_mu_);  // the requests have ended: for the checks
  for (const auto& entry : learned_keys_) {
    const std::string& name = entry.first;
    const std::optional<LearnedPolicy> l = client_->pacer().learned(client_->pacer().key(name));
    if (!l) continue;
    nlohmann::ordered_json k;
    k["key"] = name;
    put_learned_json(k, *l);
    learned.push_back(std::move(k));
  }
  return learned;
}

bool FetchRun::write_stats(Duration elapsed, bool interrupted) {
  auto j = summary_.stats(elapsed, interrupted);
  j["learned"] = learned_json();
  const std::string text = j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  if (o_.stats == "-") {
    if (!to_stdout(text)) {
      std::cerr << "abide fetch: cannot write --stats to standard output: " << std::strerror(errno) << "\n";
      return false;
    }
  } else if (auto err = write_file_atomically(o_.stats, text)) {
    std::cerr << "abide fetch: " << unwritable(o_.stats, "--stats file").value_or(*err) << "\n";
    return false;
  }
  return true;
}

// The requests worth running again go to the resume file; a resumed run
// with none left removes the file it ran. False when either fails.
bool FetchRun::record_resumable(bool interrupted) {
  const std::uint64_t left = summary_.resumable_left();
  const std::string resume_file = resume_target(o_);
  if (left > 0) {
    const auto j = summary_.resume(system_wall_clock().now());
    // Owner only: the resume file keeps URLs and bodies as given (to send them again).
    if (auto err = write_file_atomically(resume_file,
                                         j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n",
                                         FileAccess::kOwnerOnly)) {
      // The reason, found again: the writer's message does not say it.
      std::cerr << "abide fetch: " << unwritable(resume_file, "the resume file").value_or(*err) << "\n";
      return false;
    }
    if (!o_.silent || interrupted) {
      std::cerr << "abide fetch: " << left << " unfinished request" << (left == 1 ? "" : "s") << " written to "
                << resume_file << " (run again with: abide fetch --resume " << resume_file << ")\n";
    }
  } else if (!o_.resume.empty() && o_.resume == resume_file) {
    // Nothing left to resume.
    std::error_code ec;
    std::filesystem::remove(resume_file, ec);
    if (ec) {
      std::cerr << "abide fetch: cannot remove " << resume_file << ": " << ec.message() << "\n";
      return false;
    }
  }
  return true;
}

// The first 20 requests not done, each with why, and when it may be sent.
void FetchRun::say_unfinished() const {
  std::size_t shown = 0;
  for (const UnfinishedRequest& out : summary_.unfinished()) {
    // Cancelled requests are summed up by the resume message, unless they need reconciling.
    if (out.kind == OutcomeKind::kCancelled && !out.ambiguous) continue;
    if (++shown > 20) continue;
    std::cerr << "abide fetch: " << out.job.method << " " << out.job.shown_url << ": ";
    if (!out.http_failed)
      std::cerr << to_string(out.kind) << (out.ambiguous ? " (ambiguous: may have been applied)" : "") << ": ";
    std::cerr << safe_text(out.reason);
    // When it may be sent, and whether an earlier run's answer says so.
    if (out.not_before && (out.kind == OutcomeKind::kDeferred || out.kind == OutcomeKind::kDeadlineExceeded)) {
      std::cerr << "; permitted at " << format_rfc3339(std::chrono::ceil<std::chrono::milliseconds>(*out.not_before));
      const std::string key = pacer_key(out.job.url, plan_->headers);
      const auto& remembered = store_->remembered;
      if (auto where = remembered ? remembered(key, system_monotonic_clock().now()) : std::nullopt) {
        std::cerr << ", " << *where;
      }
    }
    std::cerr << "\n";
  }
  if (shown > 20) std::cerr << "abide fetch: ... and " << shown - 20 << " more\n";
}

}  // namespace cmd_fetch

int run_fetch(const FetchOptions& o) {
  cmd_fetch::FetchRun run(o);
  if (const std::optional<int> refused = run.prepare()) return *refused;
  return run.send();
}

}  // namespace abide::cli
