// `abide fetch`'s command line: every flag, its help, and the footer of
// --help. What the flags mean is in fetch_options.h; run_fetch acts on them.

#include <cstdint>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "abide/headers.h"
#include "command.h"
#include "fetch/fetch_options.h"
#include "fetch_store.h"

namespace abide::cli {
namespace fetch_flags {  // private to this file (the CLI is compiled in unity batches)

// fetch's --max-wait when none is given: a batch user expects a run to end
// (with what is left recorded for --resume) rather than sleep for hours
// unseen; a quarter of an hour still covers the usual minute-scale windows.
constexpr double kDefaultMaxWaitS = 900;

constexpr const char* kFooterStart = R"(Sources (exactly one): URL... (fetched in order; without a scheme, http://),
--urls FILE, or --resume FILE. -X, -H, -d and --idempotency-key apply to
every request; in a batch, --idempotency-key KEY sends KEY-N for request N.

A --urls FILE ('-': standard input) has one request per line; blank lines and
lines starting with '#' are skipped:
  URL                  -X, -d (and -G) of the command line apply
  METHOD URL           this method, no body
  METHOD URL @FILE     this method, FILE's bytes as the body (a relative FILE
                       is found in the folder of the --urls file)
  METHOD URL TEXT      this method, the rest of the line as the body
A line's method and body are for that request only; -H applies to all.

Request bodies as in curl: -d/--data (@FILE: CR and LF removed; @-: standard
input), --data-binary (@FILE as it is), --data-raw (no @), --data-urlencode
(content, =content, name=content, @FILE, name@FILE), joined with '&' and sent
as application/x-www-form-urlencoded unless -H gives a Content-Type; --json
(joined as they are; JSON Content-Type and Accept); -F name=value,
name=@FILE[;type=T][;filename=N], name=<FILE (multipart/form-data). They make
a POST (-X changes the method; -G puts the data into the URL's query of a
GET; -G -I of a HEAD). -u USER:PASSWORD sends Basic credentials (there is no
password prompt). curl flags that abide does not have are refused, with a
hint where there is one.

--max-wait defaults to 900 s (15 minutes): a server hint longer than that
(Retry-After: 86400, a quota that resets tomorrow) ends the request deferred,
with its permitted time in the resume file, rather than a silent sleep of
hours. A larger --max-wait accepts such waits.

Outputs: bodies of final answers go to stdout, to -o FILE (all of them: URL
arguments run one at a time and are written in their order, a --urls batch in
the order its requests finish; -o /dev/null discards them), with -O to a file
named like the URL's last path segment, or with --output-dir DIR to one file per
request, named NNNNNN-LAST_PATH_SEGMENT (N: the request's line). -i writes
each final head before its body, -D FILE the heads alone, and -w FORMAT a line
of curl's write-out variables after each request. Failed attempts' bodies are never written. Bodies stream to their
destination as they arrive, with no size cap; --max-filesize BYTES fails a
request whose body is longer, and keeps no partial file of it.

Requests are paced per origin and credential: different Authorization or
API-key header values (X-Api-Key, Api-Key, ...) get separate pacer keys, which
hold an HMAC of the value under a secret (below), never the value. --pacer-key
NAME paces every request under NAME instead.

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

// Where quota state lives (fetch_store.h).
constexpr const char* kFooterStore = R"(Quota state (--store): by default a file that every abide of this machine
shares, $XDG_STATE_HOME/abide/quota.db (~/.local/state/abide/quota.db), so a
later run, or another process, never sends before what a server told an earlier
one; `abide state` shows what it holds and forgets a key. --store file:PATH
puts it elsewhere, --store memory keeps it in this process alone, and
ABIDE_STORE sets the default. A file that is not abide's, is damaged, was
written by a newer abide, cannot be written or stays locked is an error at
start naming it (exit 1, nothing sent), unless --store-fallback: then one line
on stderr and the run goes on in memory.

)";

// Only in an abide built with abide::redis.
constexpr const char* kFooterRedis = R"(--store redis://[[USER]:PASSWORD@]HOST[:PORT][/PREFIX],
redis://[[USER]:PASSWORD@]unix:/PATH or unix:/PATH (a socket's prefix:
?prefix=P) shares the quota state with other processes. Without a password in the URL, the environment variable
ABIDE_REDIS_PASSWORD gives it (so that it is not on the command line). Redis is
checked once at start, before anything is sent: if nothing answers there, the
credentials are refused or the Redis user may not use the prefix, fetch exits 1
with the reason, unless --store-fallback: then one line on stderr, and the run
starts as in an outage. If Redis goes down, one line on stderr says so and the
run goes on with in-process quota state, reconnecting in the background; no
request is lost. With --fail-closed, requests wait for Redis instead, each up to
its --max-wait (or --deadline), and then end deferred (kept in the resume file);
with --store-fallback too, the run starts without Redis and its requests wait
for it. Passwords are never printed.

)";

// How pacer keys keep credentials out of the store (key_secret.h).
constexpr const char* kFooterKeys = R"(The secret of the pacer keys: ABIDE_KEY_SECRET (16 bytes or more) or
ABIDE_KEY_SECRET_FILE (a file, mode 0600); with --store memory one of the
process alone; else key-secret beside quota.db in $XDG_STATE_HOME/abide,
made once, mode 0600. Give every machine of a fleet sharing a store the same
ABIDE_KEY_SECRET, or credentialed quota is shared per machine only (one warning
line on stderr says so).

)";

constexpr const char* kFooterEnd = R"(--stats FILE writes a JSON summary: requests, done, attempts, retries,
status_counts {"STATUS": count}, transport_errors, outcomes {kind: count},
ambiguous, waited_s (summed over requests), held_by {UNIT: {sends, paced_s,
deferred, last}} (the announced quotas that held sends back, "last" in words such as
"tokens: 1,850 of 40,000 left, 4,100 needed"), elapsed_s, interrupted, and
unfinished [{url, outcome, not_before (RFC 3339 or null), method, index,
reason, ambiguous, resumable}], and learned [{key, count, window_s,
window_measured, windows, from, text}]: the quota each pacer key learned from
limited answers where its server announces none ("about 20 per 2 s").

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

// curl flags that abide fetch does not have, with what to do instead.
struct Unsupported {
  std::initializer_list<std::string_view> names;
  std::string_view hint;  // empty: none
};

constexpr std::string_view kNotAnOption = "not a fetch option; see abide fetch --help";

const std::initializer_list<Unsupported>& unsupported_flags() {
  static const std::initializer_list<Unsupported> kFlags{
      {{"-b", "--cookie"}, "use -H 'Cookie: NAME=VALUE'"},
      {{"-c", "--cookie-jar", "--junk-session-cookies"},
       "abide keeps no cookies (-D FILE writes the heads, Set-Cookie included)"},
      {{"-T", "--upload-file"}, "use -X PUT --data-binary @FILE"},
      {{"-C", "--continue-at"}, "use -H 'Range: bytes=N-' to ask for the rest of a body"},
      {{"-r", "--range"}, "use -H 'Range: bytes=START-END'"},
      {{"-z", "--time-cond"}, "use -H 'If-Modified-Since: DATE'"},
      {{"--limit-rate", "--speed-limit", "-Y", "--speed-time", "-y"},
       "abide paces requests by the server's quota (--pacing), not bytes; --max-time bounds a transfer"},
      {{"-Z", "--parallel", "--parallel-max", "--parallel-immediate"}, "use --urls FILE -j N"},
      {{"-K", "--config"}, "put the requests in a file for --urls FILE"},
      {{"--cacert", "--capath", "-E", "--cert", "--cert-type", "--key", "--key-type", "--pass", "--crlfile",
        "--pinnedpubkey"},
       "abide verifies TLS with the system's CA certificates; client certificates are not supported"},
      {{"--negotiate", "--ntlm", "--digest", "--anyauth", "--basic", "--oauth2-bearer", "--aws-sigv4"},
       "Basic is built in (-u USER:PASSWORD); for another scheme use -H 'Authorization: ...'"},
      {{"-n", "--netrc", "--netrc-file", "--netrc-optional"}, "give -u USER:PASSWORD"},
      {{"-#", "--progress-bar"}, "abide shows its own progress line on a terminal (-s hides it)"},
      {{"--create-dirs"}, "create the folder first (mkdir -p)"},
      {{"-N", "--no-buffer"}, "abide writes bodies as they arrive; leave -N out"},
      {{"--url-query"}, "use -G --data-urlencode NAME=VALUE"},
      {{"--retry-delay", "--retry-max-time", "--retry-all-errors", "--retry-connrefused"},
       "abide waits what the server says, else its own backoff: see --max-attempts, --max-wait, --deadline"},
      {{"--trace", "--trace-ascii", "--trace-time", "--stderr"}, "use -v (credentials redacted)"},
      {{"--http1.0", "--http2-prior-knowledge", "--http3", "--http3-only"}, "give --http1.1 or --http2"},
      {{"-J", "--remote-header-name"}, "use -O (the name from the URL) or -o FILE"},
      {{"--data-ascii"}, "use -d (the same)"},
      {{"--url"}, "give the URLs as arguments (several are fetched in order), or --urls FILE"},
  };
  return kFlags;
}

// The flag of an argument CLI11 did not know ("--name=value": "--name";
// "-bVALUE": "-b"), and what to say about it.
std::string unsupported_message(std::string_view arg) {
  std::string_view flag = arg;
  if (arg.starts_with("--")) flag = arg.substr(0, arg.find('='));
  else if (arg.size() > 2) flag = arg.substr(0, 2);
  for (const Unsupported& u : unsupported_flags())
    for (std::string_view n : u.names)
      if (n == flag) return printable(flag, 64) + ": not supported by abide fetch; " + std::string(u.hint);
  return printable(flag, 64) + ": " + std::string(kNotAnOption);
}

// The flags whose presence, not only their value, the run needs: read when
// the command runs, after CLI11 has parsed the line.
struct GivenFlags {
  CLI::Option* data = nullptr;
  CLI::Option* data_binary = nullptr;
  CLI::Option* data_raw = nullptr;
  CLI::Option* data_urlencode = nullptr;
  CLI::Option* json = nullptr;
  CLI::Option* form = nullptr;
  CLI::Option* http11 = nullptr;
  CLI::Option* http2 = nullptr;
  CLI::Option* deadline = nullptr;
  CLI::Option* max_attempts = nullptr;
  CLI::Option* retry = nullptr;
  CLI::Option* max_wait = nullptr;
  CLI::Option* resume_file = nullptr;
  CLI::Option* seed = nullptr;
};

// The flags in the order --help lists them, a group at a time: the request,
// how it is sent, its limits, its quota, and the outputs.
void add_request_flags(CLI::App& app, FetchOptions& o, GivenFlags& given) {
  app.add_option("url", o.urls, "The URLs (http or https; without a scheme, http://), fetched in order");
  app.add_option("-X,--request", o.method, "Method (default GET, or POST with -d)");
  app.add_option("-H,--header", o.headers, "A request header 'Name: value' (repeatable)")->allow_extra_args(false);
  given.data = app.add_option("-d,--data", o.data, "Request body (@FILE reads a file, @- standard input)")
                   ->allow_extra_args(false);
  given.data_binary =
      app.add_option("--data-binary", o.data_binary, "Request body, @FILE sent as it is")->allow_extra_args(false);
  given.data_raw =
      app.add_option("--data-raw", o.data_raw, "Request body, with no special meaning for @")->allow_extra_args(false);
  given.data_urlencode = app.add_option("--data-urlencode", o.data_urlencode,
                                        "Request body part, URL-encoded (content, name=content, name@FILE)")
                             ->allow_extra_args(false);
  given.json = app.add_option("--json", o.json, "JSON request body (@FILE), with JSON Content-Type and Accept")
                   ->allow_extra_args(false);
  given.form =
      app.add_option("-F,--form", o.form, "A multipart form part name=value or name=@FILE")->allow_extra_args(false);
  app.add_flag("-G,--get", o.get, "Send the -d data in the URL's query of a GET");
  app.add_flag("-I,--head", o.head, "Send HEAD and write the response head");
  app.add_option("-u,--user", o.user, "USER[:PASSWORD] for Basic authentication");
  app.add_option("-A,--user-agent", o.user_agent, "User-Agent to send");
  app.add_option("-e,--referer", o.referer, "Referer to send");
  app.add_option("--idempotency-key", o.idempotency_key,
                 "Send Idempotency-Key: KEY (KEY-N in a batch), so POST/PATCH may be retried");
}

void add_transfer_flags(CLI::App& app, FetchOptions& o, GivenFlags& given) {
  app.add_option("--urls", o.urls_file, "A batch: one URL per line (- for standard input)");
  app.add_option("-j,--jobs", o.jobs, "Concurrent requests in a batch (all on one thread)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  app.add_option("-x,--proxy", o.proxy, "Use this HTTP proxy (http_proxy and https_proxy are honoured without it)");
  app.add_flag("-k,--insecure", o.insecure, "Do not verify the server's TLS certificate");
  app.add_flag("--compressed", o.compressed, "Ask for a compressed answer and decompress it");
  given.http11 = app.add_flag("--http1.1")->description("Use HTTP/1.1");
  given.http2 = app.add_flag("--http2")->description("Use HTTP/2 when the server offers it");
  app.add_flag("-L,--location", o.location, "Follow redirects (a 3xx Retry-After is obeyed)");
  app.add_option("--max-redirs", o.max_redirs, "Most redirects followed with -L")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1000}));
}

void add_limit_flags(CLI::App& app, FetchOptions& o, GivenFlags& given) {
  given.deadline = app.add_option("--deadline", o.deadline_s,
                                  "Seconds from the start by which every request must be done")
                       ->check(CLI::Range(0.0, 1e9));
  given.max_attempts = app.add_option("--max-attempts", o.max_attempts, "Attempts per request, the first included")
                           ->capture_default_str()
                           ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000}));
  given.retry = app.add_option("--retry", "Retries per request: the same as --max-attempts N+1")
                    ->check(CLI::Range(std::int64_t{0}, std::int64_t{999}));
  given.max_wait = app.add_option("--max-wait", o.max_wait_s,
                                  "Longest acceptable wait in seconds (default 900); a longer server hint ends "
                                  "the request deferred, recorded for --resume")
                       ->check(CLI::Range(0.0, 1e9));
  app.add_option("-m,--max-time", o.max_time_s, "Longest time for one attempt's transfer, in seconds (0: none)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--connect-timeout", o.connect_timeout_s, "Connect timeout in seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
}

// (--max-filesize among them: --help has always listed it here.)
void add_quota_flags(CLI::App& app, FetchOptions& o) {
  app.add_option("--profile", o.profile, "Vendor profile for quota headers (default: by host; none: off)");
  app.add_option("--profile-file", o.profile_files, "Load a profile from this JSON file first (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--pacer-key", o.pacer_key,
                 "Pace every request under this one key (default: per origin and credential)");
  app.add_option("--max-filesize", o.max_filesize,
                 "Refuse a body larger than BYTES (the request fails, and no partial file is kept)")
      ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()));
  app.add_option("--store", o.store,
                 std::string("Quota state: file (the default, shared by this machine's processes), file:PATH, "
                             "memory") +
                     (redis_built_in() ? ", or redis://[:PASSWORD@]HOST:PORT[/PREFIX] (or unix:/PATH) to share it "
                                         "across machines (password also from $ABIDE_REDIS_PASSWORD)"
                                       : "") +
                     "; ABIDE_STORE sets the default");
  app.add_flag("--store-fallback", o.store_fallback,
               "Start even when the store cannot be used: go on in memory (a Redis store: as during an outage)");
  if (redis_built_in()) {
    app.add_flag("--fail-closed", o.fail_closed, "While Redis is down, wait for it instead of going on without");
  }
  app.add_option("--pacing", o.pacing, "Spend known quota smoothly, or in a burst")
      ->capture_default_str()
      ->check(CLI::IsMember({"smooth", "burst"}));
}

void add_output_flags(CLI::App& app, FetchOptions& o, GivenFlags& given) {
  app.add_option("-o,--output", o.output, "Write bodies to FILE (/dev/null discards them)");
  app.add_flag("-O,--remote-name", o.remote_name, "Write the body to a file named like the URL's last segment");
  app.add_option("--output-dir", o.output_dir, "Write one file per request into DIR");
  app.add_flag("-i,--include", o.include, "Write the response head before the body");
  app.add_option("-D,--dump-header", o.dump_header, "Write the response heads to FILE");
  app.add_flag("-f,--fail", o.fail, "Write no body for an HTTP error (400 and up); the request fails");
  app.add_flag("--fail-with-body", o.fail_with_body, "As --fail, but write the body");
  app.add_flag("-S,--show-error", o.show_error, "Say errors even with -s");
  app.add_option("-w,--write-out", o.write_out, "After each request, write FORMAT (%{http_code}, ...) to stdout");
  app.add_option("--stats", o.stats, "Write a JSON summary to FILE (- for standard output)");
  app.add_option("--resume", o.resume, "Run the unfinished requests recorded in FILE");
  given.resume_file = app.add_option("--resume-file", o.resume_file,
                                     "Where unfinished requests are recorded (with --resume FILE: FILE)")
                          ->capture_default_str();
  given.seed = app.add_option("--seed", o.seed, "Seed for the jitter (reproducible runs)");
  app.add_flag("-v,--verbose", o.verbose, "Print every attempt and decision (credentials redacted)");
  app.add_flag("-s,--silent", o.silent, "No progress line, no summary");
}

// What the parsed line means beyond each flag's value (FetchOptions' has_*
// fields, --retry, the HTTP version), then the run; arguments CLI11 kept
// unknown are refused here, by name.
int run(const CLI::App& app, FetchOptions& o, const GivenFlags& given) {
  o.has_resume_file = given.resume_file->count() > 0;
  for (const std::string& arg : app.remaining()) {
    std::cerr << "abide fetch: "
              << (arg.starts_with('-') && arg.size() > 1 ? unsupported_message(arg)
                                                         : "unexpected argument " + printable(arg, 64))
              << "\n";
    return kExitUsage;
  }
  if (given.retry->count() > 0 && given.max_attempts->count() > 0) {
    std::cerr << "abide fetch: give --retry N or --max-attempts N+1, not both\n";
    return kExitUsage;
  }
  o.has_data = given.data->count() + given.data_binary->count() + given.data_raw->count() +
                   given.data_urlencode->count() + given.json->count() + given.form->count() >
               0;
  o.has_deadline = given.deadline->count() > 0;
  if (given.max_wait->count() == 0) o.max_wait_s = kDefaultMaxWaitS;
  o.has_max_wait = true;  // given, or fetch's default
  o.has_seed = given.seed->count() > 0;
  if (given.http2->count() > 0) o.http_version = "2";
  if (given.http11->count() > 0) o.http_version = "1.1";
  if (given.retry->count() > 0) o.max_attempts = given.retry->as<std::int64_t>() + 1;
  return run_fetch(o);
}

const Registration fetch_cmd{{"fetch"},
                             "Fetch URLs like curl, obeying Retry-After, RateLimit and vendor quotas",
                             [](CLI::App& app) -> Run {
                               auto o = std::make_shared<FetchOptions>();
                               GivenFlags given;
                               // Unknown flags are kept (not an error of CLI11's, which would blame the
                               // URL after them) and refused by name when the command runs.
                               app.allow_extras();
                               add_request_flags(app, *o, given);
                               add_transfer_flags(app, *o, given);
                               add_limit_flags(app, *o, given);
                               add_quota_flags(app, *o);
                               add_output_flags(app, *o, given);
                               app.footer(std::string(kFooterStart) + (file_store_built_in() ? kFooterStore : "") +
                                          (redis_built_in() ? kFooterRedis : "") + kFooterKeys + kFooterEnd);
                               return [&app, o, given] { return run(app, *o, given); };
                             }};

}  // namespace fetch_flags
}  // namespace abide::cli
