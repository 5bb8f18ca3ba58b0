// The profile registry: profiles selectable by name or host, the built-in
// ones loaded once (abide/profiles.h).
#include "abide/profiles.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <utility>

#include "ascii.h"
#include "profiles_internal.h"

namespace abide::detail {
// Generated from profiles/*.json by cmake/EmbedProfiles.cmake: (file name, text).
std::span<const std::pair<std::string_view, std::string_view>> builtin_profile_files() noexcept;
}  // namespace abide::detail

namespace abide {

// ---- Profile ----------------------------------------------------------------------

bool Profile::knows(std::string_view header) const noexcept {
  for (const auto& h : known_headers) {
    if (ascii::iequals(h, header)) return true;
  }
  for (const auto& q : quotas) {
    if (!q.header_prefix.empty() && ascii::istarts_with(header, q.header_prefix)) return true;
  }
  return false;
}

namespace {

// The host without port, trailing dot or brackets.
std::string_view bare_host(std::string_view host) noexcept {
  host = ascii::trim_ows(host);
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    return close == std::string_view::npos ? host.substr(1) : host.substr(1, close - 1);
  }
  const std::size_t colon = host.rfind(':');
  if (colon != std::string_view::npos && host.find(':') == colon) host = host.substr(0, colon);
  while (!host.empty() && host.back() == '.') host.remove_suffix(1);
  return host;
}

// 0: no match; otherwise a score (exact beats any suffix, longer suffix beats
// shorter). `host` is already bare (see bare_host).
std::size_t host_score(const Profile& p, std::string_view host) noexcept {
  if (host.empty()) return 0;
  std::size_t best = 0;
  for (const auto& entry : p.hosts) {
    if (entry.front() == '.') {
      // ".github.com": github.com itself, or anything ending in .github.com.
      if (host.size() + 1 == entry.size()) {
        if (ascii::iequals(host, std::string_view(entry).substr(1))) best = std::max(best, entry.size());
      } else if (host.size() > entry.size() && ascii::iequals(host.substr(host.size() - entry.size()), entry)) {
        best = std::max(best, entry.size());
      }
    } else if (ascii::iequals(host, entry)) {
      return std::size_t{1} << 20;
    }
  }
  return best;
}

}  // namespace

bool Profile::matches_host(std::string_view host) const noexcept { return host_score(*this, bare_host(host)) > 0; }

// ---- registry -----------------------------------------------------------------------

const ProfileRegistry& ProfileRegistry::builtin() {
  static const ProfileRegistry registry = [] {
    ProfileRegistry r;
    for (const auto& [name, text] : detail::builtin_profile_files()) {
      (void)r.load_text(text, name);  // a broken built-in profile fails the profiles test
    }
    return r;
  }();
  return registry;
}

ProfileRegistry ProfileRegistry::with_builtins() { return builtin(); }

namespace {
std::atomic<std::uint64_t> g_generation{0};
}  // namespace

std::uint64_t ProfileRegistry::next_generation() noexcept { return g_generation.fetch_add(1) + 1; }

ProfileRegistry::ProfileRegistry() noexcept : generation_(next_generation()) {}
ProfileRegistry::ProfileRegistry(const ProfileRegistry& other)
    : profiles_(other.profiles_), generation_(next_generation()) {}
ProfileRegistry::ProfileRegistry(ProfileRegistry&& other) noexcept
    : profiles_(std::move(other.profiles_)), generation_(next_generation()) {
  other.generation_ = next_generation();
}
ProfileRegistry& ProfileRegistry::operator=(const ProfileRegistry& other) {
  if (this != &other) {
    profiles_ = other.profiles_;
    generation_ = next_generation();
  }
  return *this;
}
ProfileRegistry& ProfileRegistry::operator=(ProfileRegistry&& other) noexcept {
  if (this != &other) {
    profiles_ = std::move(other.profiles_);
    generation_ = next_generation();
    other.generation_ = next_generation();
  }
  return *this;
}

const Profile* detail::cached_for_host(const ProfileRegistry& registry, std::string_view host) {
  struct Entry {
    const ProfileRegistry* registry = nullptr;
    std::uint64_t generation = 0;
    std::string host;
    const Profile* profile = nullptr;
  };
  thread_local Entry last;
  if (last.registry == &registry && last.generation == registry.generation() && last.host == host) {
    return last.profile;
  }
  const Profile* p = registry.for_host(host);
  if (host.size() <= 253 + 8) {  // a host name, not something to keep around
    last.registry = &registry;
    last.generation = registry.generation();
    last.host.assign(host);
    last.profile = p;
  }
  return p;
}

Result<std::string, ProfileError> ProfileRegistry::load_text(std::string_view text, std::string_view file) {
  auto parsed = parse_profile(text, file);
  if (!parsed) return fail(std::move(parsed.error()));
  generation_ = next_generation();
  auto profile = std::make_shared<const Profile>(std::move(*parsed));
  std::string name = profile->name;
  for (auto& existing : profiles_) {
    if (existing->name == name) {
      existing = std::move(profile);
      return name;
    }
  }
  profiles_.push_back(std::move(profile));
  return name;
}

Result<std::string, ProfileError> ProfileRegistry::load_file(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ProfileError{file, "", "cannot be read", 0});
  constexpr std::size_t kMax = 1 << 20;
  std::string text;
  char buf[8192];
  while (in) {
    in.read(buf, sizeof buf);
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMax) return fail(ProfileError{file, "", "larger than 1 MiB", 0});
  }
  return load_text(text, file);
}

const Profile* ProfileRegistry::find(std::string_view name) const noexcept {
  for (const auto& p : profiles_) {
    if (ascii::iequals(p->name, name)) return p.get();
  }
  return nullptr;
}

const Profile* ProfileRegistry::for_host(std::string_view host) const noexcept {
  host = bare_host(host);
  const Profile* best = nullptr;
  std::size_t best_score = 0;
  for (const auto& p : profiles_) {
    const std::size_t s = host_score(*p, host);
    if (s > best_score) {
      best = p.get();
      best_score = s;
    }
  }
  return best;
}

const Profile* ProfileRegistry::by_fields(const HeaderList& headers, std::string* field) const {
  const Profile* found = nullptr;
  for (const Header& h : headers.lines()) {
    // Only names that look like quota fields: Content-Type is known to none,
    // and a profile's informational names are no evidence of its vendor.
    if (!detail::looks_like_vendor_quota_header(h.name)) continue;
    const Profile* knower = nullptr;
    bool shared = false;
    for (const auto& p : profiles_) {
      if (!p->knows(h.name)) continue;
      if (knower != nullptr) {
        shared = true;
        break;
      }
      knower = p.get();
    }
    if (knower == nullptr || shared) continue;
    if (found != nullptr && found != knower) return nullptr;  // two vendors' fields: not a guess to make
    if (found == nullptr && field != nullptr) *field = h.name;
    found = knower;
  }
  return found;
}

std::vector<const Profile*> ProfileRegistry::all() const {
  std::vector<const Profile*> out;
  out.reserve(profiles_.size());
  for (const auto& p : profiles_) out.push_back(p.get());
  return out;
}

}  // namespace abide
