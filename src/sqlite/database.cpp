#include "database.h"

namespace abide::sqlite_detail {

Statement::Statement(sqlite3* db, std::string_view sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &s, nullptr) ==
      SQLITE_OK) {
    stmt_.reset(s);
  } else {
    sqlite3_finalize(s);
  }
}

std::string_view Statement::Use::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
  return p == nullptr ? std::string_view{} : std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, col)));
}

std::string_view Statement::Use::bytes(int col) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(s_, col));
  return p == nullptr ? std::string_view{} : std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, col)));
}

std::optional<Database> Database::open(const std::string& path, bool create, int& code, std::string& why) {
  sqlite3* raw = nullptr;
  // NOMUTEX: the store serialises its own use of the connection.
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  code = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Database d;
  d.db_.reset(raw);
  if (code != SQLITE_OK) {
    why = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(code);
    return std::nullopt;
  }
  sqlite3_extended_result_codes(raw, 1);
  return d;
}

int Database::exec(const char* sql) { return sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr); }

std::optional<std::int64_t> Database::integer(const char* sql) {
  Statement s(db_.get(), sql);
  if (!s.ok()) return std::nullopt;
  auto u = s.use();
  if (u.step() != SQLITE_ROW) return std::nullopt;
  return u.integer(0);
}

std::string Database::error() const { return sqlite3_errmsg(db_.get()); }

}  // namespace abide::sqlite_detail
