#include "key_secret.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "state_dir.h"

namespace abide::cli {
namespace key_secret_cpp {  // private to this file (the tool is compiled in unity batches)

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::string os_error(int err) { return std::strerror(err); }

// Closes a descriptor at the end of a scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// The bytes of an open secret file, after the checks that make it trustworthy:
// a regular file, open to nobody but its owner (another user could read the
// secret and brute-force the key names again), at most `max` bytes.
Result<std::string, ErrorMessage> read_checked(int fd, const std::filesystem::path& file, std::size_t max) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail("cannot read the key secret " + file.string() + ": " + os_error(errno));
  if (!S_ISREG(st.st_mode)) return fail("the key secret " + file.string() + " is not a regular file");
  if ((st.st_mode & 077) != 0) {
    return fail("the key secret " + file.string() + " is open to group or others (mode " + mode_text(st.st_mode) +
                "): make it readable by its owner alone (chmod 600 " + file.string() + ")");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max) {
    return fail("the key secret " + file.string() + " is not one: " + std::to_string(st.st_size) +
                " bytes, more than " + std::to_string(max));
  }
  std::string bytes(static_cast<std::size_t>(st.st_size) + 1, '\0');  // one more: a file that grew is seen
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot read the key secret " + file.string() + ": " + os_error(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

Result<KeySecret, ErrorMessage> read_state_secret(int fd, const std::filesystem::path& file) {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_uid != ::geteuid()) {
    return fail("the key secret " + file.string() + " belongs to another user (uid " + std::to_string(st.st_uid) +
                "): abide's is its user's own");
  }
  auto bytes = read_checked(fd, file, kMaxKeySecretBytes);
  if (!bytes) return fail(std::move(bytes.error()));
  if (bytes->size() != kKeySecretBytes) {
    return fail("the key secret " + file.string() + " is not abide's: " + std::to_string(bytes->size()) +
                " bytes where abide writes " + std::to_string(kKeySecretBytes) +
                " (remove it and abide makes a new one; quota state kept under the old keys is then not found)");
  }
  return KeySecret::from_bytes(std::move(*bytes), file.string());
}

// Writes all of `bytes`, then makes them durable.
bool write_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return ::fsync(fd) == 0;
}

std::string random_bytes(std::size_t n, bool& ok) {
  std::string out(n, '\0');
  ok = RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) == 1;
  return out;
}

}  // namespace key_secret_cpp

KeySecret::KeySecret() : KeySecret(per_process()) {}

Result<KeySecret, ErrorMessage> KeySecret::random() {
  bool ok = false;
  std::string bytes = key_secret_cpp::random_bytes(kKeySecretBytes, ok);
  if (!ok) return fail(std::string("no random bytes for the key secret (OpenSSL's RAND_bytes failed)"));
  return KeySecret(std::move(bytes));
}

Result<KeySecret, ErrorMessage> KeySecret::from_bytes(std::string bytes, std::string_view what) {
  if (bytes.size() < kMinKeySecretBytes) {
    return fail(std::string(what) + " is too short for a key secret: " + std::to_string(bytes.size()) +
                " bytes where at least " + std::to_string(kMinKeySecretBytes) +
                " are needed (for example `openssl rand -hex 32`)");
  }
  return KeySecret(std::move(bytes));
}

const KeySecret& KeySecret::per_process() {
  static const KeySecret secret = [] {
    auto made = random();
    if (!made) {
      // Only a system without a working random source gets here: no secret, no key.
      std::fprintf(stderr, "abide: %s\n", made.error().text.c_str());
      std::abort();
    }
    return std::move(*made);
  }();
  return secret;
}

KeySecret::Mac KeySecret::mac(std::string_view message) const {
  Mac out{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &length) == nullptr ||
      length != out.size()) {
    // Never with a valid digest and key; a key made of zeros would merge every credential's quota.
    std::fputs("abide: HMAC-SHA-256 failed\n", stderr);
    std::abort();
  }
  return out;
}

SecretEnvironment SecretEnvironment::of_process() {
  using key_secret_cpp::env;
  return SecretEnvironment{env(kKeySecretEnv), env(kKeySecretFileEnv), env("XDG_STATE_HOME"), env("HOME")};
}

Result<KeySecret, ErrorMessage> load_or_create_secret_file(const std::filesystem::path& file) {
  using namespace key_secret_cpp;
  // A few rounds: a file that another process links between our open and our
  // link is read in the next one.
  for (int round = 0; round < 3; ++round) {
    {
      Fd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (fd.fd >= 0) return read_state_secret(fd.fd, file);
      const int err = errno;
      if (err == ELOOP) return fail("the key secret " + file.string() + " is a symbolic link: abide's is a file");
      if (err != ENOENT) return fail("cannot read the key secret " + file.string() + ": " + os_error(err));
    }
    bool ok = false;
    const std::string bytes = random_bytes(kKeySecretBytes, ok);
    if (!ok) return fail(std::string("no random bytes for the key secret (OpenSSL's RAND_bytes failed)"));
    // Whole in a temporary first (mkstemp: O_CREAT | O_EXCL, 0600), then
    // linked: a reader never sees a short file, and link() fails when a
    // file is already there, so one process's secret wins.
    std::string tmp = file.string() + ".XXXXXX";
    Fd fd(::mkstemp(tmp.data()));
    if (fd.fd < 0) return fail("cannot create the key secret " + file.string() + ": " + os_error(errno));
    ::fchmod(fd.fd, 0600);
    if (!write_all(fd.fd, bytes)) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return fail("cannot write the key secret " + file.string() + ": " + os_error(err));
    }
    const int linked = ::link(tmp.c_str(), file.c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (linked == 0) {
      // The directory entry made durable too: a crash must not lose the secret that keys were made with.
      Fd dir(::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (dir.fd >= 0) ::fsync(dir.fd);
      return KeySecret::from_bytes(bytes, file.string());
    }
    if (err != EEXIST) return fail("cannot create the key secret " + file.string() + ": " + os_error(err));
  }
  return fail("cannot create the key secret " + file.string() + ": it keeps changing");
}

Result<KeySecret, ErrorMessage> read_secret_file(const std::filesystem::path& file) {
  using namespace key_secret_cpp;
  const std::string what = std::string(kKeySecretFileEnv) + " " + file.string();
  Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return fail("cannot read the key secret " + what + ": " + os_error(errno));
  auto bytes = read_checked(fd.fd, file, kMaxKeySecretBytes);
  if (!bytes) return fail(std::move(bytes.error()));
  // `openssl rand -hex 32 > FILE` and editors end it with a newline: not part of the secret.
  if (bytes->ends_with('\n')) bytes->pop_back();
  if (bytes->ends_with('\r')) bytes->pop_back();
  return KeySecret::from_bytes(std::move(*bytes), what);
}

Result<ResolvedSecret, ErrorMessage> resolve_key_secret(KeyScope scope, const SecretEnvironment& env) {
  if (env.secret && env.secret_file) {
    return fail(std::string("both ") + kKeySecretEnv + " and " + kKeySecretFileEnv + " are set: set one of them");
  }
  if (env.secret) {
    auto s = KeySecret::from_bytes(*env.secret, kKeySecretEnv);
    if (!s) return fail(std::move(s.error()));
    return ResolvedSecret{std::move(*s), {}};
  }
  if (env.secret_file) {
    if (env.secret_file->empty()) return fail(std::string(kKeySecretFileEnv) + " is set but empty: give a path");
    auto s = read_secret_file(*env.secret_file);
    if (!s) return fail(std::move(s.error()));
    return ResolvedSecret{std::move(*s), {}};
  }
  // Keys that never leave the process need nothing that outlives it.
  if (scope == KeyScope::kProcess) return ResolvedSecret{KeySecret::per_process(), {}};
  auto dir = state_dir_from(env.xdg_state_home, env.home, true);
  if (!dir) {
    return fail("cannot keep the key secret: " + dir.error().text + " (or give one in " + kKeySecretEnv + ")");
  }
  const std::filesystem::path file = *dir / kKeySecretFileName;
  auto s = load_or_create_secret_file(file);
  if (!s) return fail(std::move(s.error()));
  ResolvedSecret out{std::move(*s), {}};
  if (scope == KeyScope::kFleet) {
    out.warning = "credentialed requests share quota only with processes of this machine: their keys are hashed "
                  "with this machine's secret (" +
                  file.string() + "); " + kKeySecretEnv + " (or " + kKeySecretFileEnv +
                  ") gives every machine of a fleet one secret";
  }
  return out;
}

}  // namespace abide::cli
