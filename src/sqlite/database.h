// sqlite/database.h: a SQLite connection and its prepared statements, owned.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace abide::sqlite_detail {

// One prepared statement, reset after each use (Use).
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, std::string_view sql);  // check ok() after
  bool ok() const noexcept { return stmt_ != nullptr; }

  // Binds, steps and reads one use of the statement; resets it when done.
  class Use {
   public:
    explicit Use(sqlite3_stmt* s) : s_(s) {}
    ~Use() {
      sqlite3_reset(s_);
      sqlite3_clear_bindings(s_);
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    Use& bind(int i, std::int64_t v) {
      sqlite3_bind_int64(s_, i, v);
      return *this;
    }
    Use& bind(int i, std::string_view v) {
      sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
      return *this;
    }
    Use& blob(int i, std::string_view v) {
      sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
      return *this;
    }
    int step() { return sqlite3_step(s_); }  // SQLITE_ROW, SQLITE_DONE or an error
    std::int64_t integer(int col) const { return sqlite3_column_int64(s_, col); }
    bool null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
    std::string_view text(int col) const;
    std::string_view bytes(int col) const;

   private:
    sqlite3_stmt* s_;
  };
  Use use() { return Use(stmt_.get()); }

 private:
  struct Finalize {
    void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
  };
  std::unique_ptr<sqlite3_stmt, Finalize> stmt_;
};

// An open database connection.
class Database {
 public:
  // Opens `path` read-write (creating it when `create`); on failure the
  // SQLite result code and its words.
  static std::optional<Database> open(const std::string& path, bool create, int& code, std::string& why);

  sqlite3* get() const noexcept { return db_.get(); }
  // Runs SQL without results; the SQLite result code.
  int exec(const char* sql);
  // One integer from a query such as "PRAGMA user_version" (nullopt on failure).
  std::optional<std::int64_t> integer(const char* sql);
  // The connection's last error, in SQLite's words.
  std::string error() const;

 private:
  struct Close {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
  };
  std::unique_ptr<sqlite3, Close> db_;
};

}  // namespace abide::sqlite_detail
