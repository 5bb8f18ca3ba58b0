// abide fetch: a curl-like client that obeys the server (abide::Client), for
// one URL or a batch: the run itself. Its flags are in fetch_flags.cpp, its
// requests are made by fetch_request.h, its answers written by body_output.h
// (-w by fetch_write_out.h), and -L follows redirects by fetch_redirect.h.
// Built only with abide::curl (see CMakeLists.txt).

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
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "abide/client.h"
#include "abide/loop_client.h"
#include "abide/headers.h"
#include "abide/http_date.h"
#include "abide/profiles.h"
#include "body_output.h"
#include "fetch_batch.h"
#include "command.h"
#include "common.h"
#include "fetch_jobs.h"
#include "fetch_options.h"
#include "fetch_progress.h"
#include "fetch_redirect.h"
#include "fetch_request.h"
#include "fetch_store.h"
#include "fetch_verbose.h"
#include "fetch_write_out.h"
#include "key_secret.h"
#include "proxy/proxy_rules.h"
#include "shown_url.h"

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

}  // namespace cmd_fetch

int run_fetch(const FetchOptions& o) {
  // --- the requests -------------------------------------------------------
  if (!o.output.empty() && !o.output_dir.empty()) {
    std::cerr << "abide fetch: -o and --output-dir cannot be combined\n";
    return kExitUsage;
  }
  if (o.remote_name && !o.output.empty()) {
    std::cerr << "abide fetch: -o and -O cannot be combined\n";
    return kExitUsage;
  }
  auto spec = parse_store_spec(o.store);
  if (!spec) {
    std::cerr << "abide fetch: " << spec.error() << "\n";
    return kExitUsage;
  }
  spec->fallback = o.store_fallback;
  spec->fail_closed = o.fail_closed;
  auto profiles = load_profiles(o.profile_files);
  if (!profiles) {
    const RejectedProfileFile& r = profiles.error();
    return reject("--profile-file " + r.file + ": profile rejected: " + r.error.what());
  }
  ProfileRegistry& registry = *profiles;
  if (const auto unknown = unknown_profile(registry, o.profile)) {
    std::cerr << "abide fetch: --profile: " << *unknown << "\n";
    return kExitUsage;
  }
  auto plan = plan_requests(o);
  if (!plan) {
    std::cerr << "abide fetch: " << plan.error().message << "\n";
    return plan.error().exit_code;
  }
  const HeaderList& headers = plan->headers;
  const bool batch = plan->batch;
  for (FetchJob& job : plan->jobs) job.shown_url = shown_url(job.url);

  // --- the outputs, checked before anything is sent --------------------------
  std::optional<WriteOutFormat> write_out;
  if (!o.write_out.empty()) {
    auto text = write_out_argument(o.write_out);
    if (!text) {
      std::cerr << "abide fetch: -w: " << text.error().text << "\n";
      return kExitRejected;
    }
    write_out = parse_write_out(*text);
    // As curl: said (even with -s), and written as nothing.
    for (const std::string& name : write_out->unknown)
      std::cerr << "abide fetch: unknown --write-out variable: '" << printable(name, 100) << "'\n";
  }
  if (!o.stats.empty() && o.stats != "-") {
    if (auto err = unwritable(o.stats, "--stats file")) {
      std::cerr << "abide fetch: " << *err << "\n";
      return kExitRejected;
    }
  }
  // The store first: a store that cannot be used leaves no empty -o file.
  auto store = open_store(*spec);
  if (!store) return reject(store.error());
  // Credentials in pacer keys are hashed under a secret (key_secret.h); only
  // keys that hold one and leave the process need a secret that outlives it.
  const bool credential_keys = o.pacer_key.empty() && proxy::carries_credential(headers);
  const KeyScope scope = !credential_keys ? KeyScope::kProcess
                         : spec->redis    ? KeyScope::kFleet
                         : spec->file     ? KeyScope::kMachine
                                          : KeyScope::kProcess;
  auto key_secret = resolve_key_secret(scope,
                                       SecretEnvironment::of_process());
  if (!key_secret) return reject(key_secret.error().text);
  if (!key_secret->warning.empty()) std::cerr << "abide fetch: warning: " << key_secret->warning << "\n";
  BodyOutput sink;
  if (auto err = sink.open(o, plan->urls_file.empty() ? plan->jobs : cmd_fetch::first_lines(*plan))) {
    std::cerr << "abide fetch: " << *err << "\n";
    return kExitRejected;
  }
  JobFeed feed(*plan);
  if (auto err = feed.open()) {
    std::cerr << "abide fetch: " << *err << "\n";
    return kExitRejected;
  }

  // --- the client -----------------------------------------------------------
  // Signals first: every thread started from here on inherits the mask.
  cmd_fetch::SignalWatcher signals;
  ProgressOptions progress_options;
  progress_options.terminal = isatty(STDERR_FILENO) == 1;
  progress_options.stdout_same_terminal = progress_options.terminal && isatty(STDOUT_FILENO) == 1 && o.output.empty() &&
                                          o.output_dir.empty() && !o.remote_name;
  progress_options.silent = o.silent;
  progress_options.verbose = o.verbose;
  // A cooldown past --max-wait defers at once: it is not announced as a wait.
  if (o.has_max_wait) progress_options.max_wait = seconds_option(o.max_wait_s);
  progress_options.burst = o.pacing == "burst";
  progress_options.resume_file = cmd_fetch::resume_target(o);
  progress_options.registry = &registry;
  Progress progress(plan->total.value_or(Progress::kUnknownTotal), progress_options);

  // URL arguments run one after the other, as curl's (sequential) default
  // does, so that their outputs come in argument order; a --urls or --resume
  // batch runs --jobs requests at once, as many as the descriptors allow.
  // (A batch shorter than --jobs needs no more; only then are the descriptors asked.)
  const std::size_t jobs =
      batch ? std::max<std::size_t>(
                  cmd_fetch::fit_jobs(std::min(o.jobs, std::max<std::size_t>(1, plan->total.value_or(o.jobs))),
                                      o.jobs, o.silent),
                  1)
            : 1;
  ClientConfig config;
  config.max_transfers = jobs;  // also bounds the connections kept
  config.max_attempts = o.max_attempts;
  config.profile = o.profile;
  config.registry = &registry;
  config.connect_timeout = seconds_option(o.connect_timeout_s);
  config.attempt_timeout = seconds_option(o.max_time_s);
  config.proxy = o.proxy;
  config.verify_tls = !o.insecure;
  config.decompress = o.compressed;
  config.http_version = cmd_fetch::http_version(o.http_version);
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
  const auto remembered = store->remembered;  // asked again at the end
  config.pacer = std::make_shared<Pacer>(pacer_config, std::move(store->store));
  // -v: the requests being made, by their position in the run (Client::fetch's
  // index, which every event carries).
  std::mutex flight_mu;
  std::unordered_map<std::size_t, const FetchJob*> in_flight;
  config.on_event = [&](const ClientEvent& e) {
    progress.on_event(e);
    if (!o.verbose) return;
    std::lock_guard lock(flight_mu);
    if (const auto it = in_flight.find(e.index); it != in_flight.end()) verbose_event(progress, *it->second, e);
  };
  LoopClient client(config);

  const WallTime start_wall = system_wall_clock().now();
  const MonoTime start = system_monotonic_clock().now();
  // A resumed run: what the server permitted holds for the whole origin, so the
  // pacer starts with that cooldown (a fresh process knows nothing else).
  // (Only a resume file's requests carry a permitted time: they are a list.)
  std::map<std::string, WallTime> cooldowns;
  for (const FetchJob& job : plan->jobs) {
    if (!job.not_before) continue;
    const std::string key = request_pacer_key(job.url, headers, o.pacer_key, key_secret->secret);
    if (key.empty()) continue;
    auto [it, fresh] = cooldowns.emplace(key, *job.not_before);
    if (!fresh && *job.not_before > it->second) it->second = *job.not_before;
  }
  for (const auto& [key, until] : cooldowns) {
    if (until > start_wall) client.pacer().block_until(key, until);
  }
  // A request is made when a worker takes its job, and dropped when it is
  // done: a batch holds as many as it has workers.
  const auto make_request = [&](const FetchJob& job) {
    Request r;
    r.method = job.method;
    r.url = job.url;
    r.headers = headers;
    r.pacer_key = request_pacer_key(r.url, headers, o.pacer_key, key_secret->secret);
    r.body = job.body;
    r.idempotency_key = job.idempotency_key;
    r.not_before = job.not_before;
    if (o.has_deadline) r.deadline = saturating_add(start, seconds_option(o.deadline_s));
    return r;
  };

  std::atomic<bool> write_failed{false};
  std::atomic<bool> unsaid_failure{false};  // a write failure no request's message says
  std::atomic<bool> said_failure{false};    // one that a request's message says
  // Each outcome is folded in as its request finishes, then dropped.
  RunSummary summary;

  // What each pacer key learned from limited answers, where its server
  // announces no quota: said with -v as it changes, listed in --stats (at
  // most kLearnedKeys keys are watched).
  constexpr std::size_t kLearnedKeys = 1000;
  std::mutex learned_mu;
  std::map<std::string, std::optional<LearnedPolicy>> learned_keys;
  const auto watch_learned = [&](const std::string& name) {
    if (name.empty() || (!o.verbose && o.stats.empty())) return;
    if (!o.verbose) {
      // --stats asks each key once, at the end (a shared store's answer costs a round trip).
      std::lock_guard lock(learned_mu);
      if (learned_keys.size() < kLearnedKeys) learned_keys.try_emplace(name);
      return;
    }
    const std::optional<LearnedPolicy> now = client.pacer().learned(client.pacer().key(name));
    std::lock_guard lock(learned_mu);
    auto it = learned_keys.find(name);
    if (it == learned_keys.end()) {
      if (learned_keys.size() >= kLearnedKeys) return;
      it = learned_keys.emplace(name, std::nullopt).first;
    }
    const std::optional<LearnedPolicy>& was = it->second;
    const bool changed = now.has_value() != was.has_value() ||
                         (now && (now->count != was->count || now->window != was->window ||
                                  now->from_retry_after != was->from_retry_after));
    it->second = now;
    if (changed && now) progress.print_line("* learned for " + printable(name, 200) + ": " + learned_text(*now));
  };

  progress.start();
  {
    BatchContext context{o,
                         feed,
                         sink,
                         progress,
                         summary,
                         write_out,
                         client,
                         jobs,
                         make_request,
                         [&](const Request& r) {
                           return request_pacer_key(r.url, r.headers, o.pacer_key, key_secret->secret);
                         },
                         watch_learned,
                         flight_mu,
                         in_flight,
                         write_failed,
                         said_failure,
                         unsaid_failure};
    run_batch(context, signals.token());
  }
  progress.stop();
  const Duration elapsed = system_monotonic_clock().now() - start;
  if (!sink.close()) {
    write_failed.store(true);
    // Closing an output that failed before fails again: that is said already.
    if (!said_failure.load()) unsaid_failure.store(true);
  }
  const int signo = signals.signal_number();

  // --- records ---------------------------------------------------------------
  const std::uint64_t requests = summary.requests(), done = summary.done(), unfinished = requests - done;
  const std::uint64_t resumable_left = summary.resumable_left();
  int status = done == requests ? kExitOk : kExitRejected;
  if (const std::string bad = feed.error(); !bad.empty()) {
    // A bad line of standard input: the lines after it were not taken.
    std::cerr << "abide fetch: " << bad << "\n";
    status = kExitRejected;
  }
  if (write_failed.load()) status = kExitRejected;
  if (unsaid_failure.load()) {
    const std::string why = sink.first_error();
    std::cerr << "abide fetch: " << (why.empty() ? std::string("could not write every output") : why) << "\n";
    status = kExitRejected;
  }
  if (!o.stats.empty()) {
    auto j = summary.stats(elapsed, signo != 0);
    nlohmann::ordered_json learned = nlohmann::ordered_json::array();
    for (const auto& entry : learned_keys) {
      const std::string& name = entry.first;
      const std::optional<LearnedPolicy> l = client.pacer().learned(client.pacer().key(name));
      if (!l) continue;
      nlohmann::ordered_json k;
      k["key"] = name;
      put_learned_json(k, *l);
      learned.push_back(std::move(k));
    }
    j["learned"] = std::move(learned);
    const std::string text = j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    if (o.stats == "-") {
      if (!cmd_fetch::to_stdout(text)) {
        std::cerr << "abide fetch: cannot write --stats to standard output: " << std::strerror(errno) << "\n";
        status = kExitRejected;
      }
    } else if (auto err = write_file_atomically(o.stats, text)) {
      std::cerr << "abide fetch: " << unwritable(o.stats, "--stats file").value_or(*err) << "\n";
      status = kExitRejected;
    }
  }
  const std::string resume_file = cmd_fetch::resume_target(o);
  if (resumable_left > 0) {
    const auto j = summary.resume(system_wall_clock().now());
    // Owner only: the resume file keeps URLs and bodies as given (to send them again).
    if (auto err = write_file_atomically(resume_file,
                                         j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n",
                                         FileAccess::kOwnerOnly)) {
      // The reason, found again: the writer's message does not say it.
      std::cerr << "abide fetch: " << unwritable(resume_file, "the resume file").value_or(*err) << "\n";
      status = kExitRejected;
    } else if (!o.silent || signo != 0) {
      std::cerr << "abide fetch: " << resumable_left << " unfinished request" << (resumable_left == 1 ? "" : "s")
                << " written to " << resume_file << " (run again with: abide fetch --resume " << resume_file << ")\n";
    }
  } else if (!o.resume.empty() && o.resume == resume_file) {
    // Nothing left to resume.
    std::error_code ec;
    std::filesystem::remove(resume_file, ec);
    if (ec) {
      std::cerr << "abide fetch: cannot remove " << resume_file << ": " << ec.message() << "\n";
      status = kExitRejected;
    }
  }
  // Errors are said unless -s (and -S says them even then); the summary is -s's alone.
  if (!o.silent || o.show_error) {
    std::size_t shown = 0;
    for (const UnfinishedRequest& out : summary.unfinished()) {
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
        const std::string key = request_pacer_key(out.job.url, headers, o.pacer_key, key_secret->secret);
        if (auto where = remembered ? remembered(key, system_monotonic_clock().now()) : std::nullopt) {
          std::cerr << ", " << *where;
        }
      }
      std::cerr << "\n";
    }
    if (shown > 20) std::cerr << "abide fetch: ... and " << shown - 20 << " more\n";
  }
  if (!o.silent && (batch || o.verbose)) {
    std::cerr << "abide fetch: " << requests << " requests, " << done << " done, " << unfinished
              << " not done; elapsed " << fmt_seconds(elapsed) << "\n";
  }
  if (signo != 0) return signo == SIGTERM ? 143 : 130;
  return status;
}

}  // namespace abide::cli
