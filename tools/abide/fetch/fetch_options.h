// `abide fetch`: everything its command line says, as parsed (fetch_flags.cpp),
// for the parts that act on it: the requests (fetch_request.h), where the
// answers go (body_output.h, fetch_write_out.h), what is said on stderr
// (fetch_progress.h, fetch_verbose.h), the quota store (fetch_store.h) and
// the run itself (cmd_fetch.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace abide::cli {

struct FetchOptions {
  // --- sources: URL arguments (in order, like curl), --urls FILE, or --resume FILE
  std::vector<std::string> urls;
  std::string urls_file;
  std::string resume;
  std::string resume_file = "abide-resume.json";

  // --- the request (the same for every URL)
  std::string method;                  // -X
  std::vector<std::string> headers;    // -H 'Name: value'
  std::vector<std::string> data;       // -d/--data (@FILE: the file, CR and LF dropped, as curl does)
  std::vector<std::string> data_binary;     // --data-binary (@FILE: the file as it is)
  std::vector<std::string> data_raw;        // --data-raw (no @ meaning)
  std::vector<std::string> data_urlencode;  // --data-urlencode (curl's forms: content, =content, name=content, @file, name@file)
  std::vector<std::string> json;            // --json (as --data-binary, with JSON Content-Type and Accept)
  std::vector<std::string> form;            // -F/--form name=value, name=@file[;type=...]
  bool get = false;                         // -G: the data goes into the query of a GET
  bool head = false;                        // -I: HEAD, and the head is the output
  std::string user;                         // -u USER[:PASSWORD] (Basic)
  std::string user_agent;                   // -A
  std::string referer;                      // -e
  std::string idempotency_key;

  // --- transfers
  std::string proxy;      // -x (http_proxy/https_proxy are honoured without it)
  bool insecure = false;  // -k
  bool compressed = false;
  std::string http_version;  // "", "1.1" (--http1.1) or "2" (--http2)
  bool location = false;     // -L
  std::int64_t max_redirs = 50;
  double max_time_s = 0;
  double connect_timeout_s = 10;
  std::uint64_t max_filesize = 0;  // 0: no limit

  // --- the rules
  std::int64_t max_attempts = 5;  // --retry N sets N + 1
  double deadline_s = 0;
  double max_wait_s = 0;  // has_max_wait false: fetch's default
  std::string profile;
  std::vector<std::string> profile_files;
  std::string pacer_key;
  std::string store;  // --store; empty: ABIDE_STORE, else the file store
  bool store_fallback = false;  // --store-fallback: a store that cannot be used at start is not an error
  bool fail_closed = false;     // --fail-closed: while Redis is down, wait for it instead of going on without
  std::string pacing = "smooth";
  std::uint64_t seed = 0;
  std::size_t jobs = 4;

  // --- outputs
  std::string output;       // -o FILE
  std::string output_dir;   // --output-dir DIR
  bool remote_name = false;  // -O
  bool include = false;      // -i: the head before the body
  std::string dump_header;   // -D FILE
  bool fail = false;         // -f: no body for an HTTP error, exit 1
  bool fail_with_body = false;
  bool show_error = false;   // -S: errors even with -s
  std::string write_out;     // -w FORMAT
  std::string stats;         // --stats FILE ('-': stdout)
  bool verbose = false;
  bool silent = false;

  // Which options were given.
  bool has_data = false;  // any of -d, --data-*, --json, -F
  bool has_deadline = false;
  bool has_max_wait = false;
  bool has_seed = false;
  bool has_resume_file = false;
};

// Runs `abide fetch` with these options; returns the exit status.
int run_fetch(const FetchOptions& options);

}  // namespace abide::cli
