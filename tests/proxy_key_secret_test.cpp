// The keyed hash behind `abide proxy`'s quota keys (key_secret.h), its secret
// and the state directory that keeps it (state_dir.h), in temporary
// directories, never the real home.
#include "support/proxy_rules_fixture.h"

namespace abide::proxy {
namespace {

std::string hex(const cli::KeySecret::Mac& mac) {
  std::string out;
  for (const std::uint8_t b : mac) {
    out.push_back("0123456789abcdef"[b >> 4]);
    out.push_back("0123456789abcdef"[b & 0xf]);
  }
  return out;
}

// ---- HMAC-SHA-256 ----

TEST(KeySecretMac, Rfc4231Vector) {
  // RFC 4231 test case 1: a key of 20 bytes 0x0b, "Hi There".
  auto s = cli::KeySecret::from_bytes(std::string(20, '\x0b'), "test");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(hex(s->mac("Hi There")), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

}  // namespace
}  // namespace abide::proxy

// ---- the secret of the keys, and the state directory ----------------------------------

namespace abide::cli {
namespace {

namespace fs = std::filesystem;

// A temporary directory, removed at the end: it stands for XDG_STATE_HOME or
// HOME, so that no test touches the real home.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "abide-keys-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? static_cast<unsigned>(st.st_mode & 07777) : 0xffffu;
}

void write_file(const fs::path& p, const std::string& bytes, mode_t mode) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
  ASSERT_GE(fd, 0) << p;
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::fchmod(fd, mode);
  ::close(fd);
}

SecretEnvironment state_home(const fs::path& dir) {
  SecretEnvironment env;
  env.xdg_state_home = dir.string();
  return env;
}

// Secrets compared by what they make, as the keys do.
std::string made_by(const KeySecret& s) {
  const KeySecret::Mac m = s.mac("probe");
  return std::string(m.begin(), m.end());
}

// Sets (or unsets) an environment variable for one scope, then restores it.
class ScopedVar {
 public:
  ScopedVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedVar() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedVar(const ScopedVar&) = delete;
  ScopedVar& operator=(const ScopedVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(StateDir, XdgStateHomeWhenAbsoluteElseHome) {
  auto d = state_dir_from("/srv/state", "/home/u", false);
  ASSERT_TRUE(d.has_value()) << d.error().text;
  EXPECT_EQ(*d, fs::path("/srv/state/abide"));
  for (const std::optional<std::string>& ignored :
       {std::optional<std::string>("relative/state"), std::optional<std::string>(""), std::optional<std::string>()}) {
    d = state_dir_from(ignored, "/home/u/", false);
    ASSERT_TRUE(d.has_value()) << d.error().text;
    EXPECT_EQ(*d, fs::path("/home/u/.local/state/abide"));
  }
  d = state_dir_from("relative", "also-relative", false);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().text.find("XDG_STATE_HOME"), std::string::npos) << d.error().text;
  EXPECT_NE(d.error().text.find("HOME"), std::string::npos) << d.error().text;
  EXPECT_FALSE(state_dir_from(std::nullopt, std::nullopt, true).has_value());
}

TEST(StateDir, ReadsTheEnvironment) {
  TempDir tmp;
  const ScopedVar xdg("XDG_STATE_HOME", (tmp.path() / "xdg").c_str());
  auto d = state_dir(false);
  ASSERT_TRUE(d.has_value()) << d.error().text;
  EXPECT_EQ(*d, tmp.path() / "xdg" / "abide");
  EXPECT_FALSE(fs::exists(tmp.path() / "xdg"));  // nothing made without `create`
  const ScopedVar unset("XDG_STATE_HOME", nullptr);
  const ScopedVar home("HOME", tmp.path().c_str());
  d = state_dir(true);
  ASSERT_TRUE(d.has_value()) << d.error().text;
  EXPECT_EQ(*d, tmp.path() / ".local" / "state" / "abide");
  EXPECT_EQ(mode_of(*d), 0700u);
}

TEST(StateDir, MadeWithItsParents0700) {
  TempDir tmp;
  const fs::path home = tmp.path() / "a" / "b";
  auto d = state_dir_from(home.string(), std::nullopt, true);
  ASSERT_TRUE(d.has_value()) << d.error().text;
  EXPECT_EQ(*d, home / "abide");
  EXPECT_EQ(mode_of(home / "abide"), 0700u);
  EXPECT_EQ(mode_of(home), 0700u);
  EXPECT_EQ(mode_of(tmp.path() / "a"), 0700u);
  // Again: an existing directory is fine as it is.
  EXPECT_TRUE(state_dir_from(home.string(), std::nullopt, true).has_value());
}

TEST(StateDir, AFileInTheWayIsAnErrorNamingIt) {
  TempDir tmp;
  write_file(tmp.path() / "abide", "x", 0600);
  auto d = state_dir_from(tmp.path().string(), std::nullopt, true);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().text.find((tmp.path() / "abide").string()), std::string::npos) << d.error().text;
}

TEST(KeySecretFile, MadeOnce0600InA0700DirectoryAndTheSameOnTheSecondCall) {
  TempDir tmp;
  auto first = resolve_key_secret(KeyScope::kMachine, state_home(tmp.path()));
  ASSERT_TRUE(first.has_value()) << first.error().text;
  EXPECT_TRUE(first->warning.empty()) << first->warning;
  const fs::path file = tmp.path() / "abide" / "key-secret";
  EXPECT_EQ(mode_of(tmp.path() / "abide"), 0700u);
  EXPECT_EQ(mode_of(file), 0600u);
  EXPECT_EQ(fs::file_size(file), kKeySecretBytes);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path() / "abide"), fs::directory_iterator()), 1)
      << "a temporary was left behind";
  auto second = resolve_key_secret(KeyScope::kFleet, state_home(tmp.path()));
  ASSERT_TRUE(second.has_value()) << second.error().text;
  EXPECT_EQ(made_by(first->secret), made_by(second->secret));
  EXPECT_NE(made_by(first->secret), made_by(KeySecret::per_process()));
}

TEST(KeySecretFile, AFleetStoreWithoutAGivenSecretWarnsInOneLine) {
  TempDir tmp;
  auto r = resolve_key_secret(KeyScope::kFleet, state_home(tmp.path()));
  ASSERT_TRUE(r.has_value()) << r.error().text;
  EXPECT_EQ(r->warning.find('\n'), std::string::npos);
  for (const std::string& text : {std::string("only with processes of this machine"), std::string("ABIDE_KEY_SECRET"),
                                 (tmp.path() / "abide" / "key-secret").string()}) {
    EXPECT_NE(r->warning.find(text), std::string::npos) << text << "\n" << r->warning;
  }
}

TEST(KeySecretFile, TheProcessScopeTouchesNoDisk) {
  TempDir tmp;
  auto r = resolve_key_secret(KeyScope::kProcess, state_home(tmp.path() / "none"));
  ASSERT_TRUE(r.has_value()) << r.error().text;
  EXPECT_TRUE(r->warning.empty());
  EXPECT_EQ(made_by(r->secret), made_by(KeySecret::per_process()));
  EXPECT_FALSE(fs::exists(tmp.path() / "none"));
  // Even with no state directory at all.
  EXPECT_TRUE(resolve_key_secret(KeyScope::kProcess, SecretEnvironment{}).has_value());
  auto none = resolve_key_secret(KeyScope::kMachine, SecretEnvironment{});
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().text.find("ABIDE_KEY_SECRET"), std::string::npos) << none.error().text;
}

TEST(KeySecretFile, ThreadsRacingAgree) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  constexpr int kThreads = 8;
  std::vector<std::string> made(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      auto s = load_or_create_secret_file(file);
      made[static_cast<std::size_t>(i)] = s.has_value() ? made_by(*s) : "error: " + s.error().text;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<std::string>(made.begin(), made.end()).size(), 1u) << made[0];
  EXPECT_EQ(made[0].rfind("error: ", 0), std::string::npos) << made[0];
}

TEST(KeySecretFile, ProcessesRacingAgree) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  constexpr int kProcesses = 6;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<std::pair<pid_t, int>> children;
  for (int i = 0; i < kProcesses; ++i) {
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      ::close(out[0]);
      char c = 0;
      if (::read(go[0], &c, 1) < 0) _exit(2);  // all start together, when the parent closes the pipe
      auto s = load_or_create_secret_file(file);
      const std::string made = s.has_value() ? made_by(*s) : std::string("error");
      _exit(::write(out[1], made.data(), made.size()) == static_cast<ssize_t>(made.size()) ? 0 : 1);
    }
    ::close(out[1]);
    children.emplace_back(pid, out[0]);
  }
  ::close(go[0]);
  ::close(go[1]);
  std::set<std::string> made;
  for (const auto& [pid, fd] : children) {
    std::string text(64, '\0');
    ssize_t got = 0;
    for (ssize_t n; (n = ::read(fd, text.data() + got, text.size() - static_cast<std::size_t>(got))) > 0;) got += n;
    text.resize(static_cast<std::size_t>(got));
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    made.insert(text);
  }
  EXPECT_EQ(made.size(), 1u);
  EXPECT_EQ(made.count("error"), 0u);
  auto again = load_or_create_secret_file(file);
  ASSERT_TRUE(again.has_value()) << again.error().text;
  EXPECT_EQ(made_by(*again), *made.begin());
}

TEST(KeySecretFile, AWrongSizeIsRefusedNamingThePath) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  for (const std::size_t size : {std::size_t{0}, std::size_t{31}, std::size_t{33}}) {
    write_file(file, std::string(size, 'x'), 0600);
    auto s = load_or_create_secret_file(file);
    ASSERT_FALSE(s.has_value()) << size;
    EXPECT_NE(s.error().text.find(file.string()), std::string::npos) << s.error().text;
    EXPECT_NE(s.error().text.find("not abide's"), std::string::npos) << s.error().text;
    EXPECT_EQ(fs::file_size(file), size) << "a file that is not abide's is left as it is";
  }
}

TEST(KeySecretFile, OpenToGroupOrOthersIsRefusedNamingThePath) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  for (const mode_t mode : {mode_t{0644}, mode_t{0640}, mode_t{0604}}) {
    write_file(file, std::string(32, 'x'), mode);
    auto s = load_or_create_secret_file(file);
    ASSERT_FALSE(s.has_value()) << mode;
    EXPECT_NE(s.error().text.find(file.string()), std::string::npos) << s.error().text;
    EXPECT_NE(s.error().text.find("chmod 600"), std::string::npos) << s.error().text;
    EXPECT_EQ(s.error().text.find("xxxx"), std::string::npos) << "the secret is never shown";
  }
  write_file(file, std::string(32, 'x'), 0600);
  EXPECT_TRUE(load_or_create_secret_file(file).has_value());
}

TEST(KeySecretFile, UnreadableDirectoriesAndLinksAreRefusedNamingThePath) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  fs::create_directory(file);
  auto s = load_or_create_secret_file(file);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().text.find(file.string()), std::string::npos) << s.error().text;
  fs::remove(file);
  write_file(tmp.path() / "elsewhere", std::string(32, 'x'), 0600);
  fs::create_symlink(tmp.path() / "elsewhere", file);
  s = load_or_create_secret_file(file);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().text.find("symbolic link"), std::string::npos) << s.error().text;
  fs::remove(file);
  if (::geteuid() != 0) {  // root reads whatever the mode says
    write_file(file, std::string(32, 'x'), 0200);
    s = load_or_create_secret_file(file);
    ASSERT_FALSE(s.has_value());
    EXPECT_NE(s.error().text.find(file.string()), std::string::npos) << s.error().text;
  }
}

TEST(KeySecretEnv, AGivenSecretWinsAndTouchesNoDisk) {
  TempDir tmp;
  SecretEnvironment env = state_home(tmp.path() / "none");
  env.secret = std::string(20, 's');
  for (const KeyScope scope : {KeyScope::kProcess, KeyScope::kMachine, KeyScope::kFleet}) {
    auto r = resolve_key_secret(scope, env);
    ASSERT_TRUE(r.has_value()) << r.error().text;
    EXPECT_TRUE(r->warning.empty()) << r->warning;
    EXPECT_EQ(made_by(r->secret), made_by(*KeySecret::from_bytes(std::string(20, 's'), "t")));
  }
  EXPECT_FALSE(fs::exists(tmp.path() / "none"));
}

TEST(KeySecretEnv, ATooShortSecretIsRefused) {
  SecretEnvironment env;
  env.secret = "abc123xyz";
  for (const KeyScope scope : {KeyScope::kProcess, KeyScope::kFleet}) {
    auto r = resolve_key_secret(scope, env);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().text.find("ABIDE_KEY_SECRET is too short"), std::string::npos) << r.error().text;
    EXPECT_NE(r.error().text.find("9 bytes"), std::string::npos) << r.error().text;
    EXPECT_NE(r.error().text.find("16"), std::string::npos) << r.error().text;
    EXPECT_EQ(r.error().text.find("abc123xyz"), std::string::npos) << "the secret is never shown";
  }
  env.secret = "";
  EXPECT_FALSE(resolve_key_secret(KeyScope::kProcess, env).has_value());
  env.secret_file = "/x";
  env.secret = std::string(20, 's');
  auto both = resolve_key_secret(KeyScope::kProcess, env);
  ASSERT_FALSE(both.has_value());
  EXPECT_NE(both.error().text.find("ABIDE_KEY_SECRET_FILE"), std::string::npos) << both.error().text;
}

TEST(KeySecretEnv, ASecretFileIsReadWithoutItsFinalNewline) {
  TempDir tmp;
  const fs::path file = tmp.path() / "fleet-secret";
  const std::string hex64(64, 'a');
  write_file(file, hex64 + "\n", 0600);
  SecretEnvironment env = state_home(tmp.path() / "none");
  env.secret_file = file.string();
  auto r = resolve_key_secret(KeyScope::kFleet, env);
  ASSERT_TRUE(r.has_value()) << r.error().text;
  EXPECT_TRUE(r->warning.empty());
  EXPECT_EQ(made_by(r->secret), made_by(*KeySecret::from_bytes(hex64, "t")));
  EXPECT_FALSE(fs::exists(tmp.path() / "none"));

  write_file(file, hex64, 0644);
  r = resolve_key_secret(KeyScope::kFleet, env);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().text.find(file.string()), std::string::npos) << r.error().text;
  write_file(file, "short\n", 0600);
  r = resolve_key_secret(KeyScope::kFleet, env);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().text.find("ABIDE_KEY_SECRET_FILE " + file.string()), std::string::npos) << r.error().text;
  env.secret_file = (tmp.path() / "missing").string();
  r = resolve_key_secret(KeyScope::kFleet, env);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().text.find((tmp.path() / "missing").string()), std::string::npos) << r.error().text;
}

TEST(KeySecretEnv, OfProcessReadsTheVariables) {
  const ScopedVar a("ABIDE_KEY_SECRET", "0123456789abcdef");
  const ScopedVar b("ABIDE_KEY_SECRET_FILE", nullptr);
  const ScopedVar c("XDG_STATE_HOME", "/srv/x");
  const SecretEnvironment env = SecretEnvironment::of_process();
  EXPECT_EQ(env.secret, std::optional<std::string>("0123456789abcdef"));
  EXPECT_FALSE(env.secret_file.has_value());
  EXPECT_EQ(env.xdg_state_home, std::optional<std::string>("/srv/x"));
}

}  // namespace
}  // namespace abide::cli

