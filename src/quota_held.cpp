// describe(QuotaHeld): which quota held a send, in the words people read in
// -v, explain and the proxy's logs.
#include <string>

#include "abide/quota_store.h"

namespace abide {
namespace {

// 40000 -> "40,000": counts of tokens are read at a glance only when grouped.
std::string grouped(std::int64_t n) {
  const bool negative = n < 0;
  std::string digits = std::to_string(n);
  if (negative) digits.erase(0, 1);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

}  // namespace

std::string describe(const QuotaHeld& held) {
  std::string out = held.unit.empty() ? "requests" : held.unit;
  out += ": ";
  if (held.remaining >= 0) {
    out += grouped(held.remaining);
    if (held.limit > 0) out += " of " + grouped(held.limit);
    out += " left, ";
  } else if (held.limit > 0) {
    out += "spaced to " + grouped(held.limit) + " a window, ";
  }
  out += grouped(held.need) + " needed";
  return out;
}

}  // namespace abide
