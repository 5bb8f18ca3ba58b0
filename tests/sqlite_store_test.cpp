// SqliteStore: the shared state-machine suite on a file, what a file keeps
// across stores (processes), and every file it refuses.
#include "abide/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "abide/testing/manual_clock.h"
#include "support/quota_store_conformance.h"

namespace abide::test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A folder of this test program's own, removed at exit.
const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("abide-sqlite-test-" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    std::atexit([] { std::error_code ec; fs::remove_all(fs::temp_directory_path() / ("abide-sqlite-test-" + std::to_string(getpid())), ec); });
    return d;
  }();
  return dir;
}

std::string fresh_path(const std::string& name) {
  static std::atomic<int> n{0};
  return (scratch() / (name + "-" + std::to_string(n++) + ".db")).string();
}

SqliteStoreOptions options_at(const std::string& path, const WallClock* wall = nullptr, std::string boot = "boot-1") {
  SqliteStoreOptions o;
  o.path = path;
  o.boot_id = std::move(boot);
  o.wall = wall;
  return o;
}

std::shared_ptr<SqliteStore> must_open(SqliteStoreOptions o) {
  auto s = SqliteStore::open_file(std::move(o));
  if (!s) ADD_FAILURE() << s.error().message;
  return s ? *s : nullptr;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(File, QuotaStoreConformance,
                         ::testing::Values(StoreParam{"File",
                                                      []() -> std::shared_ptr<QuotaStore> {
                                                        return must_open(options_at(fresh_path("conformance")));
                                                      }}),
                         store_param_name);

namespace {

const MonoTime kT0{std::chrono::hours{1000}};

StoreRecord cooldown_at(MonoTime now, Duration d) {
  StoreRecord r;
  r.now = now;
  r.cooldown = d;
  r.limited = true;
  return r;
}

// What one store was told, a later one (another process, a later run) keeps.
TEST(SqliteStore, ACooldownOutlivesTheStoreThatWasTold) {
  const std::string path = fresh_path("outlive");
  const PacingRules rules;
  {
    auto first = must_open(options_at(path));
    auto k = first->open("https://api.example");
    (void)k->record(cooldown_at(kT0, seconds{30}), rules);
  }
  auto later = must_open(options_at(path));
  auto k = later->open("https://api.example");
  const StoreGrant g = k->acquire({kT0 + seconds{10}, seconds{1}}, rules);
  EXPECT_EQ(g.kind, StoreGrant::Kind::kTooLate);
  EXPECT_EQ(g.wait, seconds{20});
  EXPECT_EQ(g.cause, WaitCause::kCooldown);
  // Other keys are not held.
  auto other = later->open("https://other.example");
  EXPECT_EQ(other->acquire({kT0 + seconds{10}, seconds{1}}, rules).kind, StoreGrant::Kind::kGranted);
}

// remembered() tells a cooldown another store recorded from one of its own.
TEST(SqliteStore, SaysWhenACooldownWasToldElsewhere) {
  const std::string path = fresh_path("remembered");
  ManualClock clock;
  const PacingRules rules;
  auto a = must_open(options_at(path, &clock.wall()));
  auto b = must_open(options_at(path, &clock.wall()));
  auto ka = a->open("k");
  auto kb = b->open("k");
  const WallTime told = clock.wall_now();
  (void)ka->record(cooldown_at(kT0, seconds{30}), rules);
  clock.advance(seconds{5});
  EXPECT_EQ(a->remembered("k", kT0 + seconds{5}), std::nullopt);
  EXPECT_EQ(b->remembered("k", kT0 + seconds{5}), told);
  EXPECT_EQ(b->remembered("k", kT0 + seconds{31}), std::nullopt);  // over: nothing holds
}

// Rows the file holds as another connection sees them (committed ones).
int committed_rows(const std::string& path) {
  sqlite3* db = nullptr;
  int n = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM quota_state", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

// A batch's operations share one transaction, committed at its end (nested
// begins pair up), except that an answer that holds sends back is committed
// at once; another thread's operation outside a batch commits what the batch
// did first, then its own.
TEST(SqliteStore, ABatchCommitsItsOperationsTogetherAtItsEnd) {
  const std::string path = fresh_path("batch");
  const PacingRules rules;
  auto a = must_open(options_at(path));
  a->begin_batch();
  EXPECT_EQ(a->open("granted")->acquire({kT0, seconds{1}}, rules).kind, StoreGrant::Kind::kGranted);
  EXPECT_EQ(committed_rows(path), 0);
  auto cooled = a->open("cooled");
  EXPECT_TRUE(cooled->record(cooldown_at(kT0, seconds{30}), rules).blocked);
  EXPECT_EQ(committed_rows(path), 2);  // at once, with what came before it
  EXPECT_EQ(cooled->acquire({kT0 + seconds{1}, seconds{1}}, rules).kind, StoreGrant::Kind::kTooLate);
  EXPECT_EQ(a->open("later")->acquire({kT0, seconds{1}}, rules).kind, StoreGrant::Kind::kGranted);
  a->begin_batch();
  a->end_batch();
  EXPECT_EQ(committed_rows(path), 2);
  StoreGrant::Kind other_thread = StoreGrant::Kind::kTooLate;
  std::thread t([&] { other_thread = a->open("other")->acquire({kT0, seconds{1}}, rules).kind; });
  t.join();
  EXPECT_EQ(other_thread, StoreGrant::Kind::kGranted);
  EXPECT_EQ(committed_rows(path), 4);  // the batch's "later", then "other"
  EXPECT_EQ(a->open("last")->acquire({kT0, seconds{1}}, rules).kind, StoreGrant::Kind::kGranted);
  a->end_batch();
  EXPECT_EQ(committed_rows(path), 5);
}

// Threads inside batches at once (two event loops) share the transaction:
// it commits when the last of them ends, or once it has been open 10 ms.
TEST(SqliteStore, OverlappingBatchesCommitWhenTheLastEndsOrTheyAreOld) {
  const std::string path = fresh_path("overlap");
  const PacingRules rules;
  auto a = must_open(options_at(path));
  a->begin_batch();
  EXPECT_EQ(a->open("x")->acquire({kT0, seconds{1}}, rules).kind, StoreGrant::Kind::kGranted);
  std::thread other([&] {
    a->begin_batch();
    (void)a->open("y")->acquire({kT0, seconds{1}}, rules);
    a->end_batch();
  });
  other.join();
  EXPECT_EQ(committed_rows(path), 0);  // this thread's batch still runs
  a->end_batch();
  EXPECT_EQ(committed_rows(path), 2);

  a->begin_batch();
  (void)a->open("z")->acquire({kT0 + milliseconds{1}, seconds{1}}, rules);
  (void)a->open("z")->acquire({kT0 + milliseconds{5}, seconds{1}}, rules);
  EXPECT_EQ(committed_rows(path), 2);
  (void)a->open("z")->acquire({kT0 + milliseconds{11}, seconds{1}}, rules);
  EXPECT_EQ(committed_rows(path), 3);  // open 10 ms: committed though the batch goes on
  a->end_batch();
}

// After a reboot the monotonic clock starts again: rows of the old boot are
// moved onto the new one through the wall clock, waits kept whole.
TEST(SqliteStore, ARebootKeepsTheWaitByTheWallClock) {
  const std::string path = fresh_path("reboot");
  ManualClock clock;
  const PacingRules rules;
  {
    auto before = must_open(options_at(path, &clock.wall(), "boot-1"));
    auto k = before->open("k");
    (void)k->record(cooldown_at(kT0, seconds{60}), rules);
  }
  clock.advance(seconds{25});  // 25 s of wall time pass, across the reboot
  const MonoTime fresh_boot{seconds{3}};
  auto after = must_open(options_at(path, &clock.wall(), "boot-2"));
  auto k = after->open("k");
  const StoreGrant g = k->acquire({fresh_boot, seconds{1}}, rules);
  EXPECT_EQ(g.kind, StoreGrant::Kind::kTooLate);
  EXPECT_EQ(g.wait, seconds{35});
  auto rows = after->list(fresh_boot);
  ASSERT_TRUE(rows.has_value()) << rows.error();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].cooldown_until, clock.wall_now() + seconds{35});
}

// Many stores on one file (as many processes), one key: every slot is its own.
// Tells `key` its server allows 1000 a second (no count): with the default
// safety margin, slots 1050 us apart.
void announce_1000_a_second(QuotaStore::Handle& key, const PacingRules& rules) {
  StoreRecord r;
  r.now = kT0;
  PolicyUpdate u;
  u.id = "p";
  u.limit = 1000;
  u.window = seconds{1};
  r.policies.push_back(u);
  (void)key.record(r, rules);
}

// The waits of every grant on one key, gathered from all who asked: `count`
// of them, each slot its own, 1050 us after the one before.
void expect_spaced_slots(std::vector<Duration> all, std::size_t count, const std::string& what) {
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), count) << what;
  for (std::size_t i = 1; i < all.size(); ++i) {
    ASSERT_EQ(all[i] - all[i - 1], std::chrono::microseconds{1050}) << what << " " << i;
  }
}

TEST(SqliteStore, StoresOnOneFileNeverShareASlot) {
  const std::string path = fresh_path("contended");
  PacingRules rules;
  {
    auto s = must_open(options_at(path));
    ASSERT_NE(s, nullptr);
    announce_1000_a_second(*s->open("hot"), rules);
  }
  constexpr int kStores = 4;
  constexpr int kEach = 100;
  std::vector<std::vector<Duration>> waits(kStores);
  std::vector<std::thread> threads;
  for (int t = 0; t < kStores; ++t) {
    threads.emplace_back([&, t] {
      auto s = must_open(options_at(path));
      if (s == nullptr) return;
      auto k = s->open("hot");
      for (int i = 0; i < kEach; ++i) {
        waits[static_cast<std::size_t>(t)].push_back(k->acquire({kT0, kMaxDuration}, rules).wait);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<Duration> all;
  for (const auto& w : waits) all.insert(all.end(), w.begin(), w.end());
  expect_spaced_slots(std::move(all), std::size_t{kStores * kEach}, "hot");
}

// A batch reads a key's row once and writes it once, at its end: each
// operation runs on the row as the one before left it (no two share a slot,
// two keys taken in turn), the other processes see nothing before the end,
// and every change then. (The proxy runs a loop turn as one batch.)
TEST(SqliteStore, ABatchWritesEachRowOnceWithEveryOperationOnIt) {
  const std::string path = fresh_path("batch_rows");
  PacingRules rules;
  auto a = must_open(options_at(path));
  auto b = must_open(options_at(path));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  for (const char* key : {"hot", "warm"}) announce_1000_a_second(*a->open(key), rules);
  auto hot = a->open("hot");
  auto warm = a->open("warm");
  std::vector<Duration> on_hot, on_warm;
  a->begin_batch();
  for (int i = 0; i < 10; ++i) {
    on_hot.push_back(hot->acquire({kT0, kMaxDuration}, rules).wait);
    on_warm.push_back(warm->acquire({kT0, kMaxDuration}, rules).wait);
  }
  std::thread elsewhere([&] { on_hot.push_back(b->open("hot")->acquire({kT0, kMaxDuration}, rules).wait); });
  std::this_thread::sleep_for(std::chrono::milliseconds{50});  // it waits for the file's write lock
  a->end_batch();
  elsewhere.join();
  on_warm.push_back(b->open("warm")->acquire({kT0, kMaxDuration}, rules).wait);
  expect_spaced_slots(on_hot, 11, "hot");
  expect_spaced_slots(on_warm, 11, "warm");
  EXPECT_EQ(on_hot.back(), 10 * std::chrono::microseconds{1050});  // after the batch's ten
}

// The threads of one store share transactions (operations queued while one
// runs go in the next): each still runs on the row as the one before it left
// it, so no two share a slot, on either of two keys taken in turn.
TEST(SqliteStore, ThreadsOfOneStoreNeverShareASlot) {
  auto s = must_open(options_at(fresh_path("threads")));
  ASSERT_NE(s, nullptr);
  PacingRules rules;
  for (const char* key : {"hot", "warm"}) announce_1000_a_second(*s->open(key), rules);
  constexpr int kThreads = 8;
  constexpr int kEach = 60;
  std::vector<std::vector<Duration>> waits(2 * kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto hot = s->open("hot");
      auto warm = s->open("warm");
      for (int i = 0; i < kEach; ++i) {
        const bool on_hot = (i + t) % 2 == 0;
        const auto g = (on_hot ? hot : warm)->acquire({kT0, kMaxDuration}, rules);
        waits[static_cast<std::size_t>(2 * t + (on_hot ? 0 : 1))].push_back(g.wait);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int key = 0; key < 2; ++key) {
    std::vector<Duration> all;
    for (int t = 0; t < kThreads; ++t) {
      const auto& w = waits[static_cast<std::size_t>(2 * t + key)];
      all.insert(all.end(), w.begin(), w.end());
    }
    expect_spaced_slots(std::move(all), std::size_t{kThreads * kEach / 2}, key == 0 ? "hot" : "warm");
  }
}

// Processes started together all open one new file: none may see another's
// creation half-way (a table, no application id yet) and refuse the file.
TEST(SqliteStore, ManyOpenOneNewFileAtOnce) {
  constexpr int kOpeners = 8;
  for (int round = 0; round < 40; ++round) {
    const std::string path = fresh_path("together");
    std::atomic<int> ready{0};
    std::vector<std::string> refusals(kOpeners);
    std::vector<std::thread> openers;
    for (int i = 0; i < kOpeners; ++i) {
      openers.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < kOpeners) std::this_thread::yield();
        auto s = SqliteStore::open_file(options_at(path));
        if (!s) refusals[static_cast<std::size_t>(i)] = s.error().message;
      });
    }
    for (auto& t : openers) t.join();
    for (const std::string& r : refusals) ASSERT_EQ(r, "") << "round " << round;
  }
}

TEST(SqliteStore, MakesItsFile0600AndItsFolder0700) {
  const std::string dir = (scratch() / "made" / "deeper").string();
  const std::string path = dir + "/quota.db";
  ASSERT_NE(must_open(options_at(path)), nullptr);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(SqliteStore, ListsWhatMattersAndForgetsOnRequest) {
  const std::string path = fresh_path("list");
  ManualClock clock;
  const PacingRules rules;
  auto s = must_open(options_at(path, &clock.wall()));
  auto cooled = s->open("b-cooled");
  (void)cooled->record(cooldown_at(kT0, seconds{30}), rules);
  auto announced = s->open("a-announced");
  StoreRecord r;
  r.now = kT0;
  PolicyUpdate u;
  u.id = "default";
  u.limit = 100;
  u.window = seconds{60};
  u.remaining = 40;
  u.reset = seconds{20};
  r.policies.push_back(u);
  (void)announced->record(r, rules);
  auto gone = s->open("c-gone");
  (void)gone->record(cooldown_at(kT0 - std::chrono::hours{1}, seconds{1}), rules);

  auto rows = s->list(kT0);
  ASSERT_TRUE(rows.has_value()) << rows.error();
  ASSERT_EQ(rows->size(), 2u);  // the key whose every bound passed is not shown
  EXPECT_EQ((*rows)[0].key, "a-announced");
  ASSERT_EQ((*rows)[0].policies.size(), 1u);
  EXPECT_EQ((*rows)[0].policies[0].limit, 100);
  EXPECT_EQ((*rows)[0].policies[0].remaining, 40);
  EXPECT_EQ((*rows)[0].policies[0].reset, clock.wall_now() + seconds{20});
  EXPECT_EQ((*rows)[1].key, "b-cooled");
  EXPECT_EQ((*rows)[1].cooldown_until, clock.wall_now() + seconds{30});
  EXPECT_EQ((*rows)[1].told, clock.wall_now());

  auto pruned = s->prune(kT0);
  ASSERT_TRUE(pruned.has_value());
  EXPECT_EQ(*pruned, 1u);
  auto forgot = s->forget("b-cooled");
  ASSERT_TRUE(forgot.has_value());
  EXPECT_TRUE(*forgot);
  EXPECT_FALSE(*s->forget("b-cooled"));
  EXPECT_EQ(cooled->acquire({kT0, Duration::zero()}, rules).kind, StoreGrant::Kind::kGranted);
}

// A row that cannot be read is never taken for an empty one: the operation
// goes to the in-process state, and the outage is said once.
TEST(SqliteStore, ADamagedRowIsReportedNotReset) {
  const std::string path = fresh_path("damaged");
  std::vector<std::string> events;
  auto o = options_at(path);
  o.on_event = [&](SqliteEvent e, std::string_view m) { events.push_back(std::string(to_string(e)) + ": " + std::string(m)); };
  auto s = must_open(o);
  const PacingRules rules;
  auto k = s->open("k");
  (void)k->record(cooldown_at(kT0, seconds{30}), rules);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE quota_state SET state = x'01020304'", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const StoreGrant g = k->acquire({kT0 + seconds{1}, Duration::zero()}, rules);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].find("down: " + path + ": the row of k is damaged"), std::string::npos) << events[0];
  EXPECT_NE(events[0].find("abide state --forget"), std::string::npos) << events[0];
  // The store never confirms a reservation it cannot read.
  EXPECT_FALSE(k->still_valid(g.epoch, kT0 + seconds{1}));
}

// ---- files it refuses, each named ------------------------------------------

SqliteOpenError refusal(const std::string& path, Duration busy = seconds{2}) {
  auto o = options_at(path);
  o.busy_timeout = busy;
  auto s = SqliteStore::open_file(o);
  EXPECT_FALSE(s.has_value()) << path;
  return s ? SqliteOpenError{} : s.error();
}

void sql(const std::string& path, const char* text) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, text, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

TEST(SqliteStoreRefuses, AFileThatIsNotSqlite) {
  const std::string path = fresh_path("text");
  std::ofstream(path) << "not a database, but someone's notes\n" << std::string(2000, 'x');
  const SqliteOpenError e = refusal(path);
  EXPECT_EQ(e.problem, SqliteProblem::kNotAbide);
  EXPECT_EQ(e.message.rfind(path + " is not abide's quota store", 0), 0u) << e.message;
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "not a database, but someone's notes");  // left as it was
}

TEST(SqliteStoreRefuses, AnotherProgramsDatabase) {
  const std::string path = fresh_path("other");
  sql(path, "CREATE TABLE notes (body TEXT)");
  const SqliteOpenError e = refusal(path);
  EXPECT_EQ(e.problem, SqliteProblem::kNotAbide);
  EXPECT_NE(e.message.find("another program's database"), std::string::npos) << e.message;
}

TEST(SqliteStoreRefuses, ANewerLayout) {
  const std::string path = fresh_path("newer");
  ASSERT_NE(must_open(options_at(path)), nullptr);
  sql(path, "PRAGMA user_version = 7");
  const SqliteOpenError e = refusal(path);
  EXPECT_EQ(e.problem, SqliteProblem::kNewerSchema);
  EXPECT_EQ(e.message, path + " was written by a newer abide (layout 7; this abide knows 1)");
}

TEST(SqliteStoreRefuses, ADamagedFile) {
  const std::string path = fresh_path("corrupt");
  {
    auto s = must_open(options_at(path));
    auto k = s->open("k");
    for (int i = 0; i < 200; ++i) {
      auto h = s->open("key-" + std::to_string(i) + std::string(100, 'k'));
      (void)h->record(cooldown_at(kT0, seconds{30}), PacingRules{});
    }
  }
  sql(path, "PRAGMA wal_checkpoint(TRUNCATE)");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);  // past the header: the schema page
    const std::string junk(3000, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const SqliteOpenError e = refusal(path);
  EXPECT_EQ(e.problem, SqliteProblem::kCorrupt) << e.message;
  EXPECT_EQ(e.message.rfind(path + " is damaged", 0), 0u) << e.message;
}

TEST(SqliteStoreRefuses, ALockHeldTooLong) {
  const std::string path = fresh_path("locked");
  ASSERT_NE(must_open(options_at(path)), nullptr);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  const SqliteOpenError e = refusal(path, milliseconds{50});
  EXPECT_EQ(e.problem, SqliteProblem::kLocked);
  EXPECT_EQ(e.message.rfind(path + " is locked by another process", 0), 0u) << e.message;
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
}

TEST(SqliteStoreRefuses, AFolderInPlaceOfTheFile) {
  const std::string path = fresh_path("folder");
  fs::create_directories(path);
  const SqliteOpenError e = refusal(path);
  EXPECT_EQ(e.problem, SqliteProblem::kCannotOpen);
  EXPECT_EQ(e.message, path + " is not a regular file");
}

TEST(SqliteStoreRefuses, AReadOnlyFile) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes read-only files";
  const std::string path = fresh_path("readonly");
  ASSERT_NE(must_open(options_at(path)), nullptr);
  sql(path, "PRAGMA journal_mode = DELETE");
  ASSERT_EQ(::chmod(path.c_str(), 0400), 0);
  const SqliteOpenError e = refusal(path);
  EXPECT_EQ(e.problem, SqliteProblem::kReadOnly) << e.message;
}

}  // namespace
}  // namespace abide::test
