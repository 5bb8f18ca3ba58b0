// The secret behind the credential part of `abide fetch`'s and `abide
// proxy`'s quota keys (proxy::quota_key). A key names the origin and, for a
// request that carries a credential, a keyed hash of it (HMAC-SHA-256): a
// plain hash of a short token can be brute-forced back from a key name by
// anyone who reads the store (Redis key names), a keyed one cannot without
// the secret.
//
// Where the secret comes from, first match wins:
//   ABIDE_KEY_SECRET        the secret itself (at least 16 bytes): one fleet, one secret;
//   ABIDE_KEY_SECRET_FILE   a file that holds it (a final newline is not part of it);
//   the process alone       --store memory: keys never leave the process, nothing is written;
//   the state directory     `key-secret` there (state_dir.h), 32 random bytes made once, 0600.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "abide/result.h"

namespace abide::cli {

inline constexpr const char* kKeySecretEnv = "ABIDE_KEY_SECRET";
inline constexpr const char* kKeySecretFileEnv = "ABIDE_KEY_SECRET_FILE";
inline constexpr const char* kKeySecretFileName = "key-secret";
inline constexpr std::size_t kKeySecretBytes = 32;     // made by abide
inline constexpr std::size_t kMinKeySecretBytes = 16;  // given by the environment
inline constexpr std::size_t kMaxKeySecretBytes = 4096;

// A secret for keyed hashes. Never printed: it has no text form.
class KeySecret {
 public:
  using Mac = std::array<std::uint8_t, 32>;

  // This process's own random secret (per_process()).
  KeySecret();
  // kKeySecretBytes fresh random bytes (OpenSSL's RAND_bytes).
  [[nodiscard]] static Result<KeySecret, ErrorMessage> random();
  // The given bytes as a secret: at least kMinKeySecretBytes, else an error
  // that names `what` (where they came from) and their length, never them.
  [[nodiscard]] static Result<KeySecret, ErrorMessage> from_bytes(std::string bytes, std::string_view what);
  // One random secret for the life of the process (made on first use).
  [[nodiscard]] static const KeySecret& per_process();

  // HMAC-SHA-256 of `message` under this secret.
  [[nodiscard]] Mac mac(std::string_view message) const;

  friend bool operator==(const KeySecret&, const KeySecret&) = default;

 private:
  explicit KeySecret(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string bytes_;
};

// Who can read the keys, which decides the secret a run needs.
enum class KeyScope : std::uint8_t {
  kProcess,  // --store memory: the keys never leave the process
  kMachine,  // a store in a file of this machine: the state directory's secret
  kFleet,    // a store shared by machines (Redis): the fleet's secret, else this machine's (with a warning)
};

// What decides the secret, read once from the environment (tests build their own).
struct SecretEnvironment {
  std::optional<std::string> secret;          // ABIDE_KEY_SECRET
  std::optional<std::string> secret_file;     // ABIDE_KEY_SECRET_FILE
  std::optional<std::string> xdg_state_home;  // XDG_STATE_HOME
  std::optional<std::string> home;            // HOME
  [[nodiscard]] static SecretEnvironment of_process();
};

struct ResolvedSecret {
  KeySecret secret;
  // One line (without newline) for stderr, or empty: a fleet store keyed with
  // this machine's secret shares credentialed quota with this machine only.
  std::string warning;
};

// The secret for `scope` (see the head of this file). Errors name the
// variable or the path and what is wrong, never the secret.
[[nodiscard]] Result<ResolvedSecret, ErrorMessage> resolve_key_secret(KeyScope scope, const SecretEnvironment& env);

// The state directory's secret file: read when it exists (a regular file of
// the user, kKeySecretBytes long, open to nobody else: else an error naming
// it), else made race-free: 32 random bytes in a 0600 temporary, linked to
// `file` only when none exists yet, so that of processes starting together
// one wins and the others read its secret.
[[nodiscard]] Result<KeySecret, ErrorMessage> load_or_create_secret_file(const std::filesystem::path& file);

// ABIDE_KEY_SECRET_FILE's file: its bytes without a final newline, at least
// kMinKeySecretBytes, a regular file open to nobody but its owner.
[[nodiscard]] Result<KeySecret, ErrorMessage> read_secret_file(const std::filesystem::path& file);

}  // namespace abide::cli
