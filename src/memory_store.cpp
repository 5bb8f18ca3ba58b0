// MemoryStore: the pacing kernel's state per key, in process memory.
//
// A map of key -> (mutex, pacing::KeyState); each operation runs one kernel
// function under the key's mutex. The map is bounded by max_keys. When it is
// full, one pass drops every unheld key whose state no longer matters; live
// state is never dropped (that would forget a cooldown). When the pass frees
// nothing, the next max_keys/8 new keys skip it, so a full map costs one
// O(keys) pass per max_keys/8 new keys, not one each. A key past the bound
// never shares another key's state: it gets state of its own, not kept in
// the map, that its holder alone paces by.
#include <algorithm>
#include <atomic>
#include <string>
#include <unordered_map>
#include <utility>

#include "abide/quota_store.h"
#include "mutex.h"
#include "pacing/kernel.h"
#include "string_hash.h"

namespace abide {
namespace {

// The latest `now` any operation brought, unmapped keys' too: a pass
// measures expiry against it. Shared with the handles, which may outlive the store.
struct Latest {
  std::atomic<Duration::rep> ns{0};

  void saw(MonoTime now) {
    const Duration::rep t = now.time_since_epoch().count();
    Duration::rep seen = ns.load(std::memory_order_relaxed);
    while (seen < t && !ns.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
    }
  }
};

// One key: its state under its own mutex.
class Entry final : public QuotaStore::Handle {
 public:
  explicit Entry(std::shared_ptr<Latest> latest) : latest_(std::move(latest)) {}

  StoreGrant acquire(const StoreAcquire& request, const PacingRules& rules) override {
    latest_->saw(request.now);
    detail::MutexLock lock(mu_);
    return pacing::acquire(state_, request.now, request.max_wait, rules, request.costs);
  }
  RecordOutcome record(const StoreRecord& record, const PacingRules& rules) override {
    latest_->saw(record.now);
    detail::MutexLock lock(mu_);
    return pacing::record(state_, record, rules);
  }
  bool still_valid(std::uint64_t epoch, MonoTime /*now*/) override {
    detail::MutexLock lock(mu_);
    return pacing::still_valid(state_, epoch);
  }
  void abandon_probe(MonoTime now) override {
    detail::MutexLock lock(mu_);
    pacing::abandon_probe(state_, now);
  }
  void settle(const StoreSettle& settle, const PacingRules& /*rules*/) override {
    latest_->saw(settle.now);
    detail::MutexLock lock(mu_);
    pacing::settle(state_, settle);
  }
  std::optional<LearnedPolicy> learned(MonoTime now) override {
    detail::MutexLock lock(mu_);
    return pacing::learned(state_, now);
  }
  // True when the state no longer matters at `now`.
  bool expired(pacing::Instant now) {
    detail::MutexLock lock(mu_);
    return pacing::expiry(state_) < now;
  }

 private:
  std::shared_ptr<Latest> latest_;
  detail::Mutex mu_;
  pacing::KeyState state_ ABIDE_GUARDED_BY(mu_);
};

using detail::StringHash;

}  // namespace

struct MemoryStore::Impl {
  MemoryStoreOptions options;
  mutable detail::Mutex mu;
  std::unordered_map<std::string, std::shared_ptr<Entry>, StringHash, std::equal_to<>> keys ABIDE_GUARDED_BY(mu);

  std::size_t skip ABIDE_GUARDED_BY(mu) = 0;  // new keys that go unmapped before the next pass
  std::shared_ptr<Latest> latest = std::make_shared<Latest>();

  // Drops every unheld key whose state no longer matters.
  void sweep() ABIDE_REQUIRES(mu) {
    const pacing::Instant now = pacing::instant_of(MonoTime{Duration{latest->ns.load(std::memory_order_relaxed)}});
    std::erase_if(keys, [&](const auto& kv) { return kv.second.use_count() == 1 && kv.second->expired(now); });
  }

  // True when the map has room for one more key, after a pass if due.
  bool room() ABIDE_REQUIRES(mu) {
    if (keys.size() < options.max_keys) return true;
    if (skip > 0) {
      --skip;
      return false;
    }
    sweep();
    if (keys.size() < options.max_keys) return true;
    skip = options.max_keys / 8;
    return false;
  }
};

MemoryStore::MemoryStore(MemoryStoreOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  if (impl_->options.max_keys == 0) impl_->options.max_keys = 1;
}

MemoryStore::~MemoryStore() = default;

std::shared_ptr<QuotaStore::Handle> MemoryStore::open(std::string_view key) {
  detail::MutexLock lock(impl_->mu);
  if (auto it = impl_->keys.find(key); it != impl_->keys.end()) return it->second;
  auto s = std::make_shared<Entry>(impl_->latest);
  if (impl_->room()) impl_->keys.emplace(std::string(key), s);
  return s;
}

std::size_t MemoryStore::size() const {
  detail::MutexLock lock(impl_->mu);
  return impl_->keys.size();
}

}  // namespace abide
