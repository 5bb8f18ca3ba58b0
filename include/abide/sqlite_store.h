// abide/sqlite_store.h: the pacer's quota state in a file that every process
// of a machine shares (target abide::sqlite).
//
// One SQLite database in WAL mode, one row per key holding the pacing
// kernel's state; each acquire and record runs in a BEGIN IMMEDIATE
// transaction (threads of one process that ask while one runs share the
// next), so the processes of a machine take turns on it safely, and
// consecutive runs and a restarted process remember what a server said. A process crash loses
// nothing committed (synchronous=NORMAL: a power loss may lose the last
// transactions). Rows whose every bound lies in the past are pruned.
//
// Times are the callers' monotonic clock, which all processes of one boot
// share (steady_clock); rows written before a reboot are moved onto the new
// boot's clock through the wall clock. When the file cannot be used after it
// was opened (disk full, removed, a lock held too long), operations go on in
// an in-process MemoryStore, reported once through on_event, and the file is
// tried again after a second.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/quota_store.h"
#include "abide/result.h"

namespace abide {

// Reported through SqliteStoreOptions::on_event.
enum class SqliteEvent : std::uint8_t {
  kDown,       // the file could not be used (once per outage)
  kRecovered,  // it can be used again
};

// "down", "recovered".
std::string_view to_string(SqliteEvent e) noexcept;

struct SqliteStoreOptions {
  std::string path;  // the database file; created 0600 when missing (its folder too, 0700)
  // How long an operation waits for another process's transaction.
  Duration busy_timeout = std::chrono::seconds{2};
  // The machine's boot, to tell which rows are on this boot's monotonic
  // clock; empty: /proc/sys/kernel/random/boot_id. Tests set their own.
  std::string boot_id;
  // The wall clock that moves rows across a reboot; nullptr: the system's.
  const WallClock* wall = nullptr;
  // Outages and recoveries, with a message safe to print (the path, SQLite's words).
  std::function<void(SqliteEvent, std::string_view message)> on_event;
  MemoryStoreOptions fallback;
};

// Why a file cannot serve as the store.
enum class SqliteProblem : std::uint8_t {
  kCannotOpen,   // no such folder, no permission, not a regular file
  kNotAbide,     // a file that is not abide's quota store (not SQLite, or another program's database)
  kCorrupt,      // abide's, damaged
  kNewerSchema,  // written by a newer abide, whose layout this one does not know
  kReadOnly,     // cannot be written (read-only file or disk)
  kLocked,       // another process held it longer than the busy timeout
};

// "cannot_open", "not_abide", "corrupt", "newer_schema", "read_only", "locked".
std::string_view to_string(SqliteProblem p) noexcept;

struct SqliteOpenError {
  SqliteProblem problem = SqliteProblem::kCannotOpen;
  std::string message;  // one sentence naming the path
};

// What the file holds about one key, for people (`abide state`).
struct StoredKey {
  std::string key;
  std::optional<WallTime> cooldown_until;  // nothing is sent before it
  WaitCause cooldown_cause = WaitCause::kCooldown;
  struct Policy {
    std::string id;
    std::int64_t limit = 0;  // 0: unknown
    Duration window{};       // zero: unknown
    std::optional<std::int64_t> remaining;
    std::optional<WallTime> reset;
  };
  std::vector<Policy> policies;      // what the server announced
  std::optional<LearnedPolicy> learned;  // what its limited answers taught
  std::optional<WallTime> told;      // when a response was last recorded on the key
  WallTime expires{};                // when the row stops mattering
};

// QuotaStore in a SQLite file. Thread-safe; any number of processes share a file.
class SqliteStore final : public QuotaStore {
 public:
  // Opens (or creates) the file and checks that it is abide's, of a layout
  // this build knows, writable, and not locked past the busy timeout.
  static Result<std::shared_ptr<SqliteStore>, SqliteOpenError> open_file(SqliteStoreOptions options);
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  std::shared_ptr<Handle> open(std::string_view key) override;
  bool shared() const noexcept override { return true; }
  // A batch holds the file's write lock from its first operation to its end;
  // batches of threads that overlap share one transaction, committed when
  // the last ends, or at 256 rows or 10 ms open (then taken again). Each row
  // is read once and written once, at the commit. A recorded answer that
  // holds sends back is committed at once, before anyone acts on it; an
  // operation outside a batch commits the batch's work before its own. An
  // operation that fails in a batch rolls back the transaction's earlier
  // ones too.
  void begin_batch() override;
  void end_batch() override;

  // When a response on `key` was last recorded by another store on the file
  // (an earlier run, another process), while its cooldown still holds: the
  // time it was told. nullopt when this store told it, or nothing holds.
  std::optional<WallTime> remembered(std::string_view key, MonoTime now);

  // Every key the file holds that still matters, sorted by key.
  [[nodiscard]] Result<std::vector<StoredKey>, std::string> list(MonoTime now);
  // Forgets a key; true when it was there.
  [[nodiscard]] Result<bool, std::string> forget(std::string_view key);
  // Drops the rows that no longer matter; how many.
  [[nodiscard]] Result<std::size_t, std::string> prune(MonoTime now);

  const std::string& path() const noexcept;

 private:
  struct Impl;
  explicit SqliteStore(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // shared with the handles
};

}  // namespace abide
