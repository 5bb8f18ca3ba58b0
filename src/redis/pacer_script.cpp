// PacerScript: pacer.lua by its digest, loaded with SCRIPT LOAD.
#include "pacer_script.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <string>
#include <vector>

#include "connection_pool.h"

namespace abide::redis_detail {
namespace {

constexpr std::size_t kMaxErrorBytes = 200;

ScriptReply no_reply() { return ScriptReply{ScriptReply::Kind::kNoReply, {}, {}}; }

ScriptReply error_reply(std::string message) {
  ScriptReply r{ScriptReply::Kind::kError, {}, std::move(message)};
  if (r.error.size() > kMaxErrorBytes) r.error.resize(kMaxErrorBytes);
  return r;
}

bool is_error(const Reply& r, std::string_view prefix) {
  return r && r->type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).substr(0, prefix.size()) == prefix;
}

// A digest is 40 hex digits: anything else in its place is not one.
bool is_digest(std::string_view s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

}  // namespace

std::string PacerScript::digest() const {
  detail::MutexLock lock(mu_);
  return digest_;
}

ScriptReply PacerScript::load(Connection& connection, std::string& digest, std::atomic<std::uint64_t>& round_trips) {
  const std::string_view argv[] = {"SCRIPT", "LOAD", pacer_script()};
  round_trips.fetch_add(1, std::memory_order_relaxed);
  const Reply r = connection.command(argv);
  if (!r) return no_reply();
  if (r->type == REDIS_REPLY_ERROR) return error_reply(std::string(r->str, r->len));
  if (r->type != REDIS_REPLY_STRING || !is_digest(std::string_view(r->str, r->len))) {
    return error_reply("SCRIPT LOAD answered without a digest");
  }
  digest.assign(r->str, r->len);
  detail::MutexLock lock(mu_);
  digest_ = digest;
  return ScriptReply{ScriptReply::Kind::kOk, {}, {}};
}

ScriptReply PacerScript::run(Connection& connection, std::string_view key, std::span<const std::string> args,
                             std::atomic<std::uint64_t>& round_trips) {
  std::string digest = this->digest();
  if (digest.empty()) {
    ScriptReply loaded = load(connection, digest, round_trips);
    if (loaded.kind != ScriptReply::Kind::kOk) return loaded;
  }
  std::vector<std::string_view> argv;
  argv.reserve(args.size() + 4);
  argv.insert(argv.end(), {"EVALSHA", digest, "1", key});
  argv.insert(argv.end(), args.begin(), args.end());
  round_trips.fetch_add(1, std::memory_order_relaxed);
  Reply r = connection.command(argv);
  if (is_error(r, "NOSCRIPT")) {
    // Redis lost its copy (a restart, SCRIPT FLUSH): load it again and retry
    // once. A second NOSCRIPT is reported as the error it is.
    ScriptReply loaded = load(connection, digest, round_trips);
    if (loaded.kind != ScriptReply::Kind::kOk) return loaded;
    argv[1] = digest;
    round_trips.fetch_add(1, std::memory_order_relaxed);
    r = connection.command(argv);
  }
  if (!r) return no_reply();
  if (r->type == REDIS_REPLY_ERROR) return error_reply(std::string(r->str, std::min(r->len, kMaxErrorBytes)));
  ScriptReply out{ScriptReply::Kind::kOk, {}, {}, {}};
  if (r->type == REDIS_REPLY_ARRAY) {
    out.values.reserve(r->elements);
    for (std::size_t i = 0; i < r->elements; ++i) {
      const redisReply* el = r->element[i];
      if (el != nullptr && el->type == REDIS_REPLY_STRING && out.text.empty()) {
        out.text.assign(el->str, std::min(el->len, kMaxTextBytes));
      }
      out.values.push_back(el != nullptr && el->type == REDIS_REPLY_INTEGER ? el->integer : 0);
    }
  }
  return out;
}

}  // namespace abide::redis_detail
