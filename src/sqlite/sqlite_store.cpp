// SqliteStore: the pacing kernel's state per key, one row each in a SQLite
// file. A write is one transaction: read the row, run one kernel function on
// it, write it back (BEGIN IMMEDIATE takes the write lock first, so two
// processes never interleave a read-modify-write). Operations of this
// process that arrive while one runs share the next transaction
// (group_commit.h), each still run on the row as the one before left it.
#include "abide/sqlite_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "abide/headers.h"
#include "database.h"
#include "group_commit.h"
#include "mutex.h"
#include "pacing/kernel.h"
#include "pacing/state_codec.h"

namespace abide {

using sqlite_detail::Database;
using sqlite_detail::Statement;

namespace {

constexpr std::int64_t kApplicationId = 0x61626964;  // "abid"
constexpr std::int64_t kSchema = 1;
constexpr std::uint64_t kPruneEvery = 512;  // writes between two prunes
constexpr Duration kRetryAfterFailure = std::chrono::seconds{1};
constexpr std::size_t kMaxBatchRows = 256;  // rows a batch holds before it commits and goes on
// The longest a batch transaction stays open (the write lock other processes wait for).
constexpr Duration kMaxBatchAge = std::chrono::milliseconds{10};

constexpr const char* kCreate =
    "CREATE TABLE quota_state ("
    " key TEXT PRIMARY KEY NOT NULL,"
    " state BLOB NOT NULL,"          // pacing::encode()
    " boot TEXT NOT NULL,"           // the boot whose monotonic clock the state's instants are on
    " mono_ns INTEGER NOT NULL,"     // the writer's monotonic now ...
    " wall_ns INTEGER NOT NULL,"     // ... and its wall clock at the same moment (for a reboot)
    " expires_mono INTEGER NOT NULL,"
    " expires_wall INTEGER NOT NULL,"
    " told_wall INTEGER,"            // when a response was last recorded on the key
    " told_by INTEGER"               // by which store (SqliteStore instance)
    ") WITHOUT ROWID;"
    "PRAGMA application_id = 1633839460;"  // kApplicationId
    "PRAGMA user_version = 1;";

std::string boot_of_machine() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? std::string("unknown-boot") : id;
}

std::int64_t ns(MonoTime t) { return t.time_since_epoch().count(); }
std::int64_t ns(WallTime t) { return t.time_since_epoch().count(); }

// Creates the folders of `path` that are missing, 0700.
bool make_parents(const std::string& path, std::string& why) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      why = "cannot create the folder " + dir + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

// The file exists afterwards, 0600 when this made it; or why not.
bool make_file(const std::string& path, std::string& why) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      why = path + " is not a regular file";
      return false;
    }
    return true;
  }
  if (!make_parents(path, why)) return false;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno != EEXIST) {
    why = "cannot create " + path + ": " + std::strerror(errno);
    return false;
  }
  if (fd >= 0) ::close(fd);
  return true;
}

SqliteProblem problem_of(int code) {
  switch (code & 0xff) {
    case SQLITE_NOTADB: return SqliteProblem::kNotAbide;
    case SQLITE_CORRUPT: return SqliteProblem::kCorrupt;
    case SQLITE_READONLY: return SqliteProblem::kReadOnly;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return SqliteProblem::kLocked;
    default: return SqliteProblem::kCannotOpen;
  }
}

std::string words_of(SqliteProblem p, const std::string& path) {
  switch (p) {
    case SqliteProblem::kNotAbide: return path + " is not abide's quota store";
    case SqliteProblem::kCorrupt: return path + " is damaged";
    case SqliteProblem::kNewerSchema: return path + " was written by a newer abide";
    case SqliteProblem::kReadOnly: return path + " cannot be written";
    case SqliteProblem::kLocked: return path + " is locked by another process";
    case SqliteProblem::kCannotOpen: return "cannot open " + path;
  }
  return path;
}

Unexpected<SqliteOpenError> open_error(SqliteProblem p, const std::string& path, const std::string& detail) {
  return fail(SqliteOpenError{p, words_of(p, path) + (detail.empty() ? "" : " (" + detail + ")")});
}

// Puts the file in WAL mode. The switch takes the exclusive lock from a read
// lock; when two openers switch at once SQLite answers one of them BUSY at
// once instead of calling the busy handler (that wait could deadlock), so
// that one tries again, within the same patience as any other lock.
int enter_wal(Database& db, std::chrono::milliseconds patience) {
  const auto give_up = std::chrono::steady_clock::now() + patience;
  auto pause = std::chrono::milliseconds{1};
  for (;;) {
    const int rc = db.exec("PRAGMA journal_mode = WAL");
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= give_up) return rc;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds{50});
  }
}

// A row as read, with what the kernel does not keep.
struct Row {
  pacing::KeyState state;
  std::optional<std::int64_t> told_wall;
  std::optional<std::int64_t> told_by;
};

// A row a batch read, as its operations left it: written once, when the
// batch's transaction commits. (Inside the write transaction no other
// process can change the row, so the copy stays the row.)
struct BatchRow {
  std::string key;
  Row row;
  bool stored = false;  // the file has the row (an UPDATE, not an INSERT)
  bool dirty = false;   // an operation wrote it
  bool told = false;    // a response was recorded on it
  MonoTime now{};       // the latest write's clocks
  WallTime wall_now{};
};

// One write operation waiting for its transaction: the kernel function to
// run on its key's row (a reference to the caller's lambda, which outlives
// the wait), and whether it ran in a transaction that committed.
struct WriteOp : sqlite_detail::Queued {
  std::string_view key;
  MonoTime now{};
  bool told = false;  // a response is recorded
  void* change = nullptr;
  void (*run)(void*, Row&) = nullptr;
  bool committed = false;
};

}  // namespace

std::string_view to_string(SqliteEvent e) noexcept {
  return e == SqliteEvent::kDown ? "down" : "recovered";
}

std::string_view to_string(SqliteProblem p) noexcept {
  switch (p) {
    case SqliteProblem::kCannotOpen: return "cannot_open";
    case SqliteProblem::kNotAbide: return "not_abide";
    case SqliteProblem::kCorrupt: return "corrupt";
    case SqliteProblem::kNewerSchema: return "newer_schema";
    case SqliteProblem::kReadOnly: return "read_only";
    case SqliteProblem::kLocked: return "locked";
  }
  return "unknown";
}

struct SqliteStore::Impl {
  class Key;  // a key's handle (below)

  SqliteStoreOptions options;
  const WallClock& wall;
  std::string boot;
  std::int64_t self = 0;  // this store's id in told_by
  MemoryStore fallback;

  detail::Mutex mu;  // one connection, one transaction at a time
  sqlite_detail::GroupCommit<WriteOp> writers;
  Database db ABIDE_GUARDED_BY(mu);
  Statement begin_write ABIDE_GUARDED_BY(mu);
  Statement begin_read ABIDE_GUARDED_BY(mu);
  Statement commit ABIDE_GUARDED_BY(mu);
  Statement rollback ABIDE_GUARDED_BY(mu);
  Statement select ABIDE_GUARDED_BY(mu);
  Statement insert ABIDE_GUARDED_BY(mu);
  Statement update ABIDE_GUARDED_BY(mu);
  Statement update_told ABIDE_GUARDED_BY(mu);
  Statement remove ABIDE_GUARDED_BY(mu);
  Statement prune_rows ABIDE_GUARDED_BY(mu);
  Statement all_rows ABIDE_GUARDED_BY(mu);
  std::uint64_t writes ABIDE_GUARDED_BY(mu) = 0;
  // The batch transaction (see begin_batch): the threads inside a batch,
  // whether it is open, since when, the latest `now` of its operations, and
  // the rows it read (few: a scan finds one).
  int batchers ABIDE_GUARDED_BY(mu) = 0;
  bool batch_open ABIDE_GUARDED_BY(mu) = false;
  MonoTime batch_began ABIDE_GUARDED_BY(mu){};
  MonoTime batch_latest ABIDE_GUARDED_BY(mu){};
  std::vector<BatchRow> batch_rows ABIDE_GUARDED_BY(mu);
  bool down ABIDE_GUARDED_BY(mu) = false;
  MonoTime retry_at ABIDE_GUARDED_BY(mu){};

  Impl(SqliteStoreOptions o, Database d)
      : options(std::move(o)),
        wall(options.wall != nullptr ? *options.wall : system_wall_clock()),
        boot(options.boot_id.empty() ? boot_of_machine() : options.boot_id),
        fallback(options.fallback),
        db(std::move(d)) {
    std::random_device rd;
    self = static_cast<std::int64_t>((static_cast<std::uint64_t>(rd()) << 32 | rd()) >> 1) | 1;
  }

  bool prepare() ABIDE_REQUIRES(mu) {
    sqlite3* h = db.get();
    begin_write = Statement(h, "BEGIN IMMEDIATE");
    begin_read = Statement(h, "BEGIN");
    commit = Statement(h, "COMMIT");
    rollback = Statement(h, "ROLLBACK");
    select = Statement(h, "SELECT state, boot, mono_ns, wall_ns, told_wall, told_by FROM quota_state WHERE key = ?1");
    // The row was read first, so the write is an UPDATE or an INSERT, never
    // an upsert that tries one and falls back to the other.
    insert = Statement(h,
                       "INSERT INTO quota_state (key, state, boot, mono_ns, wall_ns, expires_mono, expires_wall,"
                       " told_wall, told_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
    update = Statement(h,
                       "UPDATE quota_state SET state = ?2, boot = ?3, mono_ns = ?4, wall_ns = ?5, expires_mono = ?6,"
                       " expires_wall = ?7 WHERE key = ?1");
    update_told = Statement(h,
                            "UPDATE quota_state SET state = ?2, boot = ?3, mono_ns = ?4, wall_ns = ?5,"
                            " expires_mono = ?6, expires_wall = ?7, told_wall = ?8, told_by = ?9 WHERE key = ?1");
    remove = Statement(h, "DELETE FROM quota_state WHERE key = ?1");
    // A row of this boot expires by the monotonic clock, which never jumps;
    // one of an earlier boot can only be judged by the wall clock.
    prune_rows = Statement(h,
                           "DELETE FROM quota_state WHERE (boot = ?1 AND expires_mono < ?2)"
                           " OR (boot <> ?1 AND expires_wall < ?3)");
    all_rows = Statement(h, "SELECT key, state, boot, mono_ns, wall_ns, told_wall, told_by FROM quota_state ORDER BY key");
    for (const Statement* s : {&begin_write, &begin_read, &commit, &rollback, &select, &insert, &update, &update_told,
                               &remove, &prune_rows,
                               &all_rows}) {
      if (!s->ok()) return false;
    }
    return true;
  }

  // The state of a row, on this boot's clock. An error names the key.
  Result<pacing::KeyState, std::string> state_of(const Statement::Use& u, int col, std::string_view key,
                                                 MonoTime now, WallTime wall_now) const {
    auto s = pacing::decode(u.bytes(col));
    if (!s) return fail("the row of " + printable(key, 128) + " is damaged: " + s.error());
    if (u.text(col + 1) != boot) {
      // Written before a reboot: the instant that was wall_ns then is
      // (wall_now - wall_ns) before now on this boot's clock.
      const Duration then_to_now = saturating_sub(Duration{ns(wall_now)}, Duration{u.integer(col + 3)});
      const Duration by = saturating_sub(saturating_sub(now.time_since_epoch(), then_to_now),
                                         Duration{u.integer(col + 2)});
      pacing::shift(*s, std::chrono::ceil<pacing::Micros>(by));  // rounded later, never earlier
    }
    return std::move(*s);
  }

  void finish_failed() ABIDE_REQUIRES(mu) {
    auto u = rollback.use();
    (void)u.step();
  }

  // One operation on one key's row: `change` runs the kernel on the state.
  // A write (`told`: a response is recorded) goes in the next transaction
  // with the others queued (run_writes); a read is one read transaction.
  // nullopt when the file cannot be used (the caller goes to the fallback).
  template <class F>
  auto on_row(std::string_view key, MonoTime now, bool write, bool told, F&& change)
      -> std::optional<decltype(change(std::declval<Row&>()))> {
    using R = decltype(change(std::declval<Row&>()));
    if (held().impl == this) return in_batch(key, now, write, told, change);
    if (!write) return read_row(key, now, change);
    std::optional<R> result;
    auto apply = [&](Row& row) { result = change(row); };
    WriteOp op;
    op.key = key;
    op.now = now;
    op.told = told;
    op.change = &apply;
    op.run = [](void* f, Row& row) { (*static_cast<decltype(apply)*>(f))(row); };
    writers.submit(op, [this](std::vector<WriteOp*>& batch) { run_writes(batch); });
    if (!op.committed) return std::nullopt;
    return result;
  }

  // ---- batches (begin_batch .. end_batch on one thread) ----
  // While any thread of this store is inside a batch, the operations of all
  // of them share one write transaction (two event loops of one proxy each
  // bracket their turns): it opens at the first operation and commits when
  // the last batch ends, when an answer holds sends back, at kMaxBatchRows
  // rows or kMaxBatchAge after it opened (so loops whose turns overlap all
  // the time still commit, and other processes get the file). `mu` is held
  // per operation only, never across a loop's network I/O. An operation
  // outside any batch, and list/forget/prune, commit the open transaction
  // first. A thread counts its nested begins (`depth`); begins on another
  // store meanwhile (`foreign`) pair up with their ends and do nothing.
  struct Held {
    Impl* impl = nullptr;
    int depth = 0;
    int foreign = 0;
  };
  static Held& held() {
    static thread_local Held h;
    return h;
  }

  void begin_batch() {
    Held& h = held();
    if (h.impl == this) {
      ++h.depth;
      return;
    }
    if (h.impl != nullptr) {
      ++h.foreign;
      return;
    }
    h = Held{this, 1, 0};
    detail::MutexLock lock(mu);
    ++batchers;
  }

  void end_batch() {
    Held& h = held();
    if (h.impl != this) {
      if (h.foreign > 0) --h.foreign;
      return;
    }
    if (--h.depth > 0) return;
    h.impl = nullptr;
    detail::MutexLock lock(mu);
    if (--batchers == 0) end_batch_transaction();
  }

  // Writes the batch transaction's changed rows and commits. On a failure
  // nothing of it is kept (its operations' answers were given: documented).
  void end_batch_transaction() ABIDE_REQUIRES(mu) {
    if (!batch_open) return;
    batch_open = false;
    std::vector<BatchRow> rows;
    rows.swap(batch_rows);
    (void)write_and_commit(rows, batch_latest, wall.now());
  }

  // The row of `key` among `rows`, read from the file (inside the open
  // transaction) when it is not there yet; nullptr when the read failed
  // (the transaction was rolled back and the file marked down).
  BatchRow* row_in(std::vector<BatchRow>& rows, std::string_view key, MonoTime now, WallTime wall_now)
      ABIDE_REQUIRES(mu) {
    auto r = std::find_if(rows.begin(), rows.end(), [&](const BatchRow& b) { return b.key == key; });
    if (r != rows.end()) return &*r;
    BatchRow fresh;
    fresh.key = std::string(key);
    if (!select_row(key, now, wall_now, fresh.row, fresh.stored)) return nullptr;
    rows.push_back(std::move(fresh));
    return &rows.back();
  }

  // An operation at `now` wrote `r` (`told`: it recorded a response).
  static void wrote(BatchRow& r, bool told, MonoTime now, WallTime wall_now) {
    r.dirty = true;
    r.told = r.told || told;
    if (now >= r.now) {  // the clocks' pair, from one moment
      r.now = now;
      r.wall_now = wall_now;
    }
  }

  // Writes the changed rows in the open transaction and commits it; on a
  // failure nothing is kept (rolled back, the file marked down).
  bool write_and_commit(const std::vector<BatchRow>& rows, MonoTime latest, WallTime wall_now) ABIDE_REQUIRES(mu) {
    std::uint64_t written = 0;
    for (const BatchRow& r : rows) {
      if (!r.dirty) continue;
      if (!write_row(r.key, r.row, r.stored, r.told, r.now, r.wall_now)) return false;
      ++written;
    }
    if (!commit_or_mark_down(latest)) return false;
    const std::uint64_t before = writes;
    writes += written;
    if (before / kPruneEvery != writes / kPruneEvery) (void)prune_locked(latest, wall_now);
    mark_up();
    return true;
  }

  // One operation inside a batch, in the batch transaction, which stays
  // open for the next: the row is read on the transaction's first operation
  // on its key, each operation runs on it as the one before left it, and it
  // is written once, at the commit (a proxy's loop turn asks and records on
  // one key many times: one SELECT and one UPDATE).
  template <class F>
  auto in_batch(std::string_view key, MonoTime now, bool write, bool told, F& change)
      -> std::optional<decltype(change(std::declval<Row&>()))> {
    detail::MutexLock lock(mu);
    if (down && now < retry_at) return std::nullopt;
    if (!batch_open) {
      auto b = begin_write.use();
      if (b.step() != SQLITE_DONE) {
        mark_down(now, db.error());
        return std::nullopt;
      }
      batch_open = true;
      batch_began = now;
      batch_latest = now;
    }
    batch_latest = std::max(batch_latest, now);
    const WallTime wall_now = wall.now();
    BatchRow* r = row_in(batch_rows, key, now, wall_now);
    if (r == nullptr) {  // (rolled back)
      batch_rows.clear();
      batch_open = false;
      return std::nullopt;
    }
    auto result = change(r->row);
    if (write) wrote(*r, told, now, wall_now);
    if (holds_back(result) || batch_rows.size() >= kMaxBatchRows || now - batch_began >= kMaxBatchAge) {
      end_batch_transaction();
    }
    return result;
  }

  // An answer that holds sends back (a cooldown started or grew) is on the
  // file before anything acts on it: the proxy answers its caller "not
  // before T" in the same turn, and a crash right after must not lose T.
  static bool holds_back(const RecordOutcome& r) noexcept { return r.blocked; }
  template <class T>
  static bool holds_back(const T&) noexcept {
    return false;
  }

  // Writes `row` inside the open transaction; on an error the transaction is
  // rolled back and the file marked down.
  bool write_row(std::string_view key, const Row& row, bool stored, bool told, MonoTime now, WallTime wall_now)
      ABIDE_REQUIRES(mu) {
    const MonoTime expires = pacing::mono_of(pacing::expiry(row.state));
    const WallTime expires_wall = saturating_add(wall_now, expires > now ? expires - now : Duration::zero());
    auto u = (!stored ? insert : told ? update_told : update).use();
    u.bind(1, key).blob(2, pacing::encode(row.state)).bind(3, boot).bind(4, ns(now)).bind(5, ns(wall_now));
    u.bind(6, ns(expires)).bind(7, ns(expires_wall));
    if (told) u.bind(8, ns(wall_now)).bind(9, self);
    if (u.step() == SQLITE_DONE) return true;
    const std::string e = db.error();
    finish_failed();
    mark_down(now, e);
    return false;
  }

  // Reads `key`'s row in a read transaction and runs `change` on it (what it
  // changes is not kept).
  template <class F>
  auto read_row(std::string_view key, MonoTime now, F& change) -> std::optional<decltype(change(std::declval<Row&>()))> {
    detail::MutexLock lock(mu);
    end_batch_transaction();  // what a batch did comes first
    if (down && now < retry_at) return std::nullopt;
    {
      auto b = begin_read.use();
      if (b.step() != SQLITE_DONE) {
        mark_down(now, db.error());
        return std::nullopt;
      }
    }
    Row row;
    bool stored = false;
    if (!select_row(key, now, wall.now(), row, stored)) return std::nullopt;
    auto result = change(row);
    if (!commit_or_mark_down(now)) return std::nullopt;
    mark_up();
    return result;
  }

  // Ends the open transaction; when that fails, rolls it back and marks the
  // file down.
  bool commit_or_mark_down(MonoTime now) ABIDE_REQUIRES(mu) {
    auto c = commit.use();
    if (c.step() == SQLITE_DONE) return true;
    const std::string e = db.error();
    finish_failed();
    mark_down(now, e);
    return false;
  }

  // Reads `key`'s row into `row` inside the open transaction; on an error the
  // transaction is rolled back and the file marked down.
  bool select_row(std::string_view key, MonoTime now, WallTime wall_now, Row& row, bool& stored)
      ABIDE_REQUIRES(mu) {
    std::string error;
    {
      auto u = select.use();
      u.bind(1, key);
      const int rc = u.step();
      if (rc == SQLITE_ROW) {
        stored = true;
        if (auto s = state_of(u, 0, key, now, wall_now)) {
          row.state = std::move(*s);
          if (!u.null(4)) row.told_wall = u.integer(4);
          if (!u.null(5)) row.told_by = u.integer(5);
        } else {
          error = s.error() + "; `abide state --forget` clears it";
        }
      } else if (rc != SQLITE_DONE) {
        error = db.error();
      }
    }
    if (error.empty()) return true;
    finish_failed();
    mark_down(now, error);
    return false;
  }

  // One transaction for a batch of writes, in their order: each key's row is
  // read once, every operation on it runs on the row as the one before left
  // it, and each row is written once. When any step fails, none is kept and
  // every operation goes to the fallback.
  void run_writes(std::vector<WriteOp*>& batch) {
    detail::MutexLock lock(mu);
    end_batch_transaction();  // what a batch did comes first
    MonoTime latest = batch.front()->now;
    for (const WriteOp* op : batch) latest = std::max(latest, op->now);
    if (down && latest < retry_at) return;
    const WallTime wall_now = wall.now();
    {
      auto b = begin_write.use();
      if (b.step() != SQLITE_DONE) {
        mark_down(latest, db.error());
        return;
      }
    }
    std::vector<BatchRow> touched;  // a batch holds few keys: found by a scan
    for (WriteOp* op : batch) {
      BatchRow* t = row_in(touched, op->key, op->now, wall_now);
      if (t == nullptr) return;  // (rolled back)
      op->run(op->change, t->row);
      wrote(*t, op->told, op->now, wall_now);
    }
    if (!write_and_commit(touched, latest, wall_now)) return;
    for (WriteOp* op : batch) op->committed = true;
  }

  Result<std::size_t, std::string> prune_locked(MonoTime now, WallTime wall_now) ABIDE_REQUIRES(mu) {
    auto u = prune_rows.use();
    u.bind(1, boot).bind(2, ns(now)).bind(3, ns(wall_now));
    if (u.step() != SQLITE_DONE) return fail(db.error());
    return static_cast<std::size_t>(sqlite3_changes(db.get()));
  }

  void mark_down(MonoTime now, const std::string& why) ABIDE_REQUIRES(mu) {
    retry_at = saturating_add(now, kRetryAfterFailure);
    if (down) return;
    down = true;
    if (options.on_event) {
      options.on_event(SqliteEvent::kDown, options.path + ": " + why + "; going on with in-process quota state");
    }
  }

  void mark_up() ABIDE_REQUIRES(mu) {
    if (!down) return;
    down = false;
    if (options.on_event) options.on_event(SqliteEvent::kRecovered, options.path + " can be used again");
  }
};

Result<std::shared_ptr<SqliteStore>, SqliteOpenError> SqliteStore::open_file(SqliteStoreOptions options) {
  const std::string path = options.path;
  if (path.empty()) return fail(SqliteOpenError{SqliteProblem::kCannotOpen, "no path given for the quota store"});
  std::string why;
  if (!make_file(path, why)) return fail(SqliteOpenError{SqliteProblem::kCannotOpen, why});
  int code = SQLITE_OK;
  auto db = Database::open(path, false, code, why);
  if (!db) return open_error(problem_of(code), path, why);
  const std::chrono::milliseconds patience{std::clamp<std::int64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(options.busy_timeout).count(), 0, 3'600'000)};
  sqlite3_busy_timeout(db->get(), static_cast<int>(patience.count()));
  // Read before anything is written: another program's database is left as it
  // was. The three reads are one transaction: apart, they could see another
  // process create the file between two of them (a table, no id yet).
  if (int rc = db->exec("BEGIN"); rc != SQLITE_OK) return open_error(problem_of(rc), path, db->error());
  const auto app = db->integer("PRAGMA application_id");
  const auto version = app ? db->integer("PRAGMA user_version") : std::nullopt;
  const auto tables = version ? db->integer("SELECT count(*) FROM sqlite_schema") : std::nullopt;
  if (!app || !version || !tables) return open_error(problem_of(sqlite3_extended_errcode(db->get())), path, db->error());
  if (int rc = db->exec("COMMIT"); rc != SQLITE_OK) return open_error(problem_of(rc), path, db->error());
  const bool fresh = *app == 0 && *version == 0 && *tables == 0;
  if (!fresh && *app != kApplicationId) return open_error(SqliteProblem::kNotAbide, path, "another program's database");
  if (*version > kSchema) {
    return open_error(SqliteProblem::kNewerSchema, path,
                      "layout " + std::to_string(*version) + "; this abide knows " + std::to_string(kSchema));
  }
  if (!fresh && *version < 1) return open_error(SqliteProblem::kNotAbide, path, "no layout version");
  if (int rc = enter_wal(*db, patience); rc != SQLITE_OK) {
    return open_error(problem_of(rc), path, db->error());
  }
  (void)db->exec("PRAGMA synchronous = NORMAL");
  // The write lock, once: a file that cannot be written or stays locked is
  // found now, not by the first request. A new file gets its table here
  // (again checked inside the lock: another process may have made it first).
  if (int rc = db->exec("BEGIN IMMEDIATE"); rc != SQLITE_OK) return open_error(problem_of(rc), path, db->error());
  const auto made = db->integer("SELECT count(*) FROM sqlite_schema WHERE name = 'quota_state'");
  int rc = made ? SQLITE_OK : sqlite3_extended_errcode(db->get());
  if (made && *made == 0) rc = db->exec(kCreate);
  if (rc == SQLITE_OK) rc = db->exec("COMMIT");
  if (rc != SQLITE_OK) {
    const std::string e = db->error();
    (void)db->exec("ROLLBACK");
    return open_error(problem_of(rc), path, e);
  }
  {
    Statement check(db->get(), "PRAGMA quick_check");
    auto u = check.use();
    if (!check.ok() || u.step() != SQLITE_ROW || u.text(0) != "ok") {
      return open_error(SqliteProblem::kCorrupt, path, check.ok() ? std::string(printable(u.text(0), 120)) : db->error());
    }
  }
  auto impl = std::make_shared<Impl>(std::move(options), std::move(*db));
  {
    // Nobody else has it yet: the lock is for the checks of what it guards.
    detail::MutexLock lock(impl->mu);
    if (!impl->prepare()) return open_error(SqliteProblem::kCorrupt, path, impl->db.error());
  }
  std::shared_ptr<SqliteStore> store(new SqliteStore(std::move(impl)));
  return store;
}

SqliteStore::SqliteStore(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteStore::~SqliteStore() = default;

const std::string& SqliteStore::path() const noexcept { return impl_->options.path; }

// One key of the file: each operation one transaction on its row; while the
// file cannot be used, the fallback's handle answers.
class SqliteStore::Impl::Key final : public QuotaStore::Handle {
 public:
  Key(std::shared_ptr<SqliteStore::Impl> store, std::string key, std::shared_ptr<QuotaStore::Handle> memory)
      : store_(std::move(store)), key_(std::move(key)), memory_(std::move(memory)) {}

  StoreGrant acquire(const StoreAcquire& request, const PacingRules& rules) override {
    auto g = store_->on_row(key_, request.now, true, false, [&](Row& row) {
      return pacing::acquire(row.state, request.now, request.max_wait, rules, request.costs);
    });
    return g ? *g : memory_->acquire(request, rules);
  }

  RecordOutcome record(const StoreRecord& record, const PacingRules& rules) override {
    auto r = store_->on_row(key_, record.now, true, true,
                            [&](Row& row) { return pacing::record(row.state, record, rules); });
    return r ? *r : memory_->record(record, rules);
  }

  bool still_valid(std::uint64_t epoch, MonoTime now) override {
    auto v = store_->on_row(key_, now, false, false, [&](Row& row) { return pacing::still_valid(row.state, epoch); });
    // When the file cannot be asked, a reservation cannot be confirmed: the
    // caller asks for a slot again.
    return v.value_or(false);
  }

  void abandon_probe(MonoTime now) override {
    auto done = store_->on_row(key_, now, true, false, [&](Row& row) {
      pacing::abandon_probe(row.state, now);
      return true;
    });
    if (!done) memory_->abandon_probe(now);
  }

  void settle(const StoreSettle& settle, const PacingRules& rules) override {
    auto done = store_->on_row(key_, settle.now, true, false, [&](Row& row) {
      pacing::settle(row.state, settle);
      return true;
    });
    if (!done) memory_->settle(settle, rules);
  }

  std::optional<LearnedPolicy> learned(MonoTime now) override {
    auto l = store_->on_row(key_, now, false, false, [&](Row& row) { return pacing::learned(row.state, now); });
    return l ? *l : memory_->learned(now);
  }

 private:
  std::shared_ptr<SqliteStore::Impl> store_;
  std::string key_;
  std::shared_ptr<QuotaStore::Handle> memory_;  // the fallback's, while the file cannot be used
};

void SqliteStore::begin_batch() { impl_->begin_batch(); }
void SqliteStore::end_batch() { impl_->end_batch(); }

std::shared_ptr<QuotaStore::Handle> SqliteStore::open(std::string_view key) {
  return std::make_shared<Impl::Key>(impl_, std::string(key), impl_->fallback.open(key));
}

std::optional<WallTime> SqliteStore::remembered(std::string_view key, MonoTime now) {
  auto t = impl_->on_row(key, now, false, false, [&](Row& row) -> std::optional<WallTime> {
    if (!row.told_wall || !row.told_by || *row.told_by == impl_->self ||
        pacing::mono_of(row.state.cool_end) <= now)
      return std::nullopt;
    return WallTime{Duration{*row.told_wall}};
  });
  return t ? *t : std::nullopt;
}

Result<std::vector<StoredKey>, std::string> SqliteStore::list(MonoTime now) {
  Impl& m = *impl_;
  detail::MutexLock lock(m.mu);
  m.end_batch_transaction();  // what a batch did comes first
  const WallTime wall_now = m.wall.now();
  const auto at = [&](pacing::Instant t) { return saturating_add(wall_now, pacing::mono_of(t) - now); };
  std::vector<StoredKey> out;
  {
    auto b = m.begin_read.use();
    if (b.step() != SQLITE_DONE) return fail(m.options.path + ": " + m.db.error());
  }
  std::string e;
  {
  auto u = m.all_rows.use();
  int rc = SQLITE_ROW;
  while ((rc = u.step()) == SQLITE_ROW) {
    StoredKey k;
    k.key = std::string(u.text(0));
    auto s = m.state_of(u, 1, k.key, now, wall_now);
    if (!s) continue;  // a damaged row is not shown as empty; `forget` clears it
    if (pacing::mono_of(pacing::expiry(*s)) < now) continue;
    if (pacing::mono_of(s->cool_end) > now) {
      k.cooldown_until = at(s->cool_end);
      k.cooldown_cause = s->cool_cause;
    }
    for (const auto& p : s->policies) {
      StoredKey::Policy q{p.id, p.limit, pacing::duration_of(p.window), std::nullopt, std::nullopt};
      if (p.remaining >= 0 && pacing::mono_of(p.reset_at) > now) {
        q.remaining = p.remaining;
        q.reset = at(p.reset_at);
      }
      k.policies.push_back(std::move(q));
    }
    k.learned = pacing::learned(*s, now);
    if (!u.null(5)) k.told = WallTime{Duration{u.integer(5)}};
    k.expires = at(pacing::expiry(*s));
    out.push_back(std::move(k));
  }
  if (rc != SQLITE_DONE) e = m.db.error();
  }
  {
    auto c = m.commit.use();
    (void)c.step();
  }
  if (!e.empty()) return fail(m.options.path + ": " + e);
  return out;
}

Result<bool, std::string> SqliteStore::forget(std::string_view key) {
  Impl& m = *impl_;
  detail::MutexLock lock(m.mu);
  m.end_batch_transaction();  // what a batch did comes first
  auto u = m.remove.use();
  u.bind(1, key);
  if (u.step() != SQLITE_DONE) return fail(m.options.path + ": " + m.db.error());
  return sqlite3_changes(m.db.get()) > 0;
}

Result<std::size_t, std::string> SqliteStore::prune(MonoTime now) {
  Impl& m = *impl_;
  detail::MutexLock lock(m.mu);
  m.end_batch_transaction();  // what a batch did comes first
  auto r = m.prune_locked(now, m.wall.now());
  if (!r) return fail(m.options.path + ": " + r.error());
  return *r;
}

}  // namespace abide
