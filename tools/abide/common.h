// Helpers shared by the CLI's commands.
#pragma once

#include <cstddef>
#include <optional>

#include "abide/clock.h"
#include "abide/profiles.h"
#include "abide/result.h"
#include <string>
#include <string_view>
#include <vector>

namespace abide::cli {

// Reads a whole file, or standard input when path is empty or "-". The
// error says which file and why ("cannot read F: No such file or directory").
[[nodiscard]] Result<std::string, ErrorMessage> read_text(const std::string& path);
// read_text, printing "abide: <error>" on stderr when it cannot be read.
std::optional<std::string> read_input(const std::string& path);
// The name of read_input's `path` in messages: "<stdin>" for "" and "-".
std::string input_name(const std::string& path);

// Prints "abide: <what>" on stderr and returns kExitRejected.
int reject(std::string_view what);

// Server bytes are made printable where a text is made (abide::printable).
// Texts already made that way (warnings, the planner's reasons, transport
// errors) are printed through safe_text: unchanged when they hold only
// printable ASCII, so nothing is escaped twice; otherwise, should a server
// byte have slipped through, they go through abide::printable whole. Either
// way no control byte reaches a terminal and the result is valid UTF-8 for
// JSON. At most max_bytes are shown.
std::string safe_text(std::string_view text, std::size_t max_bytes = 4096);

// The host a --host value names: "https://user@api.github.com/x" ->
// "api.github.com"; a bare host is kept.
std::string host_of(std::string h);

// Raises RLIMIT_NOFILE's soft limit to the hard one (systemd's default soft
// limit is 1,024) and returns the descriptors a process may then hold;
// nullopt when unlimited or unknown.
std::optional<std::size_t> raise_descriptor_limit();

// Seconds from a flag (its range checked by CLI11) as a Duration: zero for
// zero or less (and NaN), kMaxDuration beyond 1e9 s.
Duration seconds_option(double s);

// A --profile-file that the loader rejected, and why.
struct RejectedProfileFile {
  std::string file;
  ProfileError error;
};

// The built-in profiles with those of `files` loaded over them, in order (the
// --profile-file flags of every command that reads profiles); the first file
// rejected ends it. Each command words the rejection itself.
[[nodiscard]] Result<ProfileRegistry, RejectedProfileFile> load_profiles(const std::vector<std::string>& files);

// When `chosen` (a --profile value) names no profile of `registry`: the
// sentence that says so and lists the known ones. "none" and "" choose
// none; "auto" is a choice only where `auto_allowed`.
[[nodiscard]] std::optional<std::string> unknown_profile(const ProfileRegistry& registry, std::string_view chosen,
                                                         bool auto_allowed = false);

// The profiles of a command that reads one answer (explain, parse ratelimit):
// load_profiles, and `chosen` (its --profile) checked among them. A failure
// is said on stderr ("abide: profile rejected: ...", or an unknown profile)
// and its exit status is the error (kExitRejected, or kExitUsage).
[[nodiscard]] Result<ProfileRegistry, int> load_chosen_profiles(const std::vector<std::string>& files,
                                                               std::string_view chosen);

}  // namespace abide::cli
