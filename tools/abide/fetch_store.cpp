#include "fetch_store.h"

#include <charconv>

#if defined(ABIDE_REDIS) && __has_include("abide/redis_store.h")
#include "abide/redis_store.h"
#define ABIDE_FETCH_HAS_REDIS 1
#endif

namespace abide::cli {

Result<StoreSpec, std::string> parse_store_spec(const std::string& text) {
  StoreSpec spec;
  if (text == "memory") return spec;
  constexpr std::string_view kScheme = "redis://";
  if (!std::string_view(text).starts_with(kScheme))
    return fail("--store must be memory or redis://HOST:PORT[/PREFIX], not \"" + text + "\"");
  spec.redis = true;
  std::string_view rest = std::string_view(text).substr(kScheme.size());
  const std::size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    const std::string_view prefix = rest.substr(slash + 1);
    if (!prefix.empty()) spec.prefix = std::string(prefix);
    rest = rest.substr(0, slash);
  }
  const std::size_t colon = rest.rfind(':');
  std::string_view host = rest.substr(0, colon);
  if (colon != std::string_view::npos) {
    const std::string_view port = rest.substr(colon + 1);
    int p = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc{} || end != port.data() + port.size() || p < 1 || p > 65535)
      return fail("--store: bad port \"" + std::string(port) + "\"");
    spec.port = p;
  }
  if (host.empty()) return fail(std::string("--store: redis:// needs a host"));
  for (char c : spec.prefix)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return fail(std::string("--store: the prefix must be printable"));
  spec.host = std::string(host);
  return spec;
}

Result<std::shared_ptr<QuotaStore>, std::string> open_store(const StoreSpec& spec) {
  if (!spec.redis) return std::shared_ptr<QuotaStore>(std::make_shared<MemoryStore>());
#ifdef ABIDE_FETCH_HAS_REDIS
  return open_redis_store(spec);
#else
  return fail(std::string("this abide was built without Redis support (abide::redis)"));
#endif
}

}  // namespace abide::cli
