#include "connection_gate.h"

#include <algorithm>
#include <utility>

namespace abide::curl_detail {

bool ConnectionGate::admit(const std::string& origin, Id id) {
  auto it = origins_.find(origin);
  if (it != origins_.end() && it->second.serial) return true;
  if (!connecting_.contains(origin)) {
    connecting_.emplace(origin, id);
    if (it == origins_.end()) origins_.try_emplace(origin);
    return true;
  }
  origins_[origin].held.push_back(id);
  return false;
}

void ConnectionGate::connected(const std::string& origin, Id id) {
  const auto c = connecting_.find(origin);
  if (c == connecting_.end() || c->second != id) return;
  connecting_.erase(c);
  auto it = origins_.find(origin);
  if (it != origins_.end()) release_next(origin, it->second);
  forget_if_idle(origin);
}

void ConnectionGate::heard(const std::string& origin, int version) {
  if (version >= 20) return;
  auto it = origins_.find(origin);
  if (it == origins_.end()) {
    if (origins_.size() >= kMaxKnown) return;
    it = origins_.try_emplace(origin).first;
  }
  Origin& o = it->second;
  o.serial = true;
  connecting_.erase(origin);
  released_.insert(released_.end(), o.held.begin(), o.held.end());
  o.held.clear();
}

void ConnectionGate::left(const std::string& origin, Id id) {
  auto it = origins_.find(origin);
  const auto c = connecting_.find(origin);
  if (c != connecting_.end() && c->second == id) {
    connecting_.erase(c);
    if (it != origins_.end()) {
      released_.insert(released_.end(), it->second.held.begin(), it->second.held.end());
      it->second.held.clear();
    }
  } else if (it != origins_.end()) {
    std::erase(it->second.held, id);
  }
  forget_if_idle(origin);
}

std::vector<ConnectionGate::Id> ConnectionGate::take_released() { return std::exchange(released_, {}); }

// The first held transfer becomes the connecting one.
void ConnectionGate::release_next(const std::string& origin, Origin& o) {
  if (o.held.empty()) return;
  const Id next = o.held.front();
  o.held.pop_front();
  connecting_.emplace(origin, next);
  released_.push_back(next);
}

// An origin with nothing connecting or held is kept only when it is known
// serial (and there is room), so that the map stays as large as what is in
// flight.
void ConnectionGate::forget_if_idle(const std::string& origin) {
  auto it = origins_.find(origin);
  if (it == origins_.end() || !it->second.held.empty() || connecting_.contains(origin)) return;
  if (it->second.serial && origins_.size() <= kMaxKnown) return;
  origins_.erase(it);
}

}  // namespace abide::curl_detail
