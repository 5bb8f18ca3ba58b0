// The IETF RateLimit fields, every draft generation (abide/ratelimit.h).
//
// Each field is read in one pass of the streaming SF parser into views of the
// value (kept on the stack for up to 8 members), and turned into
// observations only when it is valid as a whole: a malformed field is ignored
// entirely (RFC 9651 4.2, and the drafts' "malformed fields MUST be
// ignored"), never half-read.
#include "abide/ratelimit.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "abide/http_date.h"
#include "abide/structured_fields.h"
#include "field_index.h"
#include "ratelimit_internal.h"

namespace abide {
namespace {

// Names of the fields, lower case.
constexpr std::string_view kRateLimit = "ratelimit";
constexpr std::string_view kPolicy = "ratelimit-policy";
constexpr std::string_view kLimit = "ratelimit-limit";
constexpr std::string_view kRemaining = "ratelimit-remaining";
constexpr std::string_view kReset = "ratelimit-reset";
constexpr std::string_view kPartition = "ratelimit-partition";

// Every form of the drafts states times in whole seconds.
constexpr Duration kWholeSecond = std::chrono::seconds{1};

// The longest delta-seconds reset taken as a delay: a yearly quota's reset
// (a leap year's). Anything longer is a Unix time sent where the drafts say
// delta-seconds (DigitalOcean, Twitch, GitLab), or garbage: a hint is never
// read as a wait of years.
constexpr std::int64_t kLongestDelay = 366LL * 24 * 3600;
// A Unix time this close to the server's Date (or the receive time) is
// plausibly the instant the quota resets; one further away is neither.
constexpr std::int64_t kNearInstant = 366LL * 24 * 3600;

// The value of a field, all its lines combined (RFC 9110 5.3). The common
// single-line case is a view of the line; several lines are joined into a
// string kept in `Joined`. Cheap to construct: five are built per call.
struct FieldValue {
  // Set by the first line (take()); only lines_ is initialized up front.
  const Header* first_;
  std::string* joined_;  // the lines joined, from the second line on
  std::size_t lines_ = 0;

  bool present() const noexcept { return lines_ > 0; }
  std::string_view value() const noexcept {
    return joined_ != nullptr ? std::string_view(*joined_) : std::string_view(first_->value);
  }
  // The field's name as the server spelled it, for messages.
  std::string_view name() const noexcept { return first_->name; }
};

// Storage for joined values. Reserved once, so the views stay valid.
class Joined {
 public:
  std::string& add(std::size_t capacity) {
    if (strings_.capacity() == 0) strings_.reserve(capacity);
    return strings_.emplace_back();
  }

 private:
  std::vector<std::string> strings_;
};

// The six fields, in FieldKind order from kRateLimit.
enum Slot { kSlotRateLimit, kSlotPolicy, kSlotLimit, kSlotRemaining, kSlotReset, kSlotPartition, kSlots };
constexpr std::string_view kSlotNames[kSlots] = {kRateLimit, kPolicy, kLimit, kRemaining, kReset, kPartition};
static_assert(static_cast<int>(FieldKind::kRateLimitPolicy) - static_cast<int>(FieldKind::kRateLimit) == kSlotPolicy &&
              static_cast<int>(FieldKind::kRateLimitLimit) - static_cast<int>(FieldKind::kRateLimit) == kSlotLimit &&
              static_cast<int>(FieldKind::kRateLimitRemaining) - static_cast<int>(FieldKind::kRateLimit) ==
                  kSlotRemaining &&
              static_cast<int>(FieldKind::kRateLimitReset) - static_cast<int>(FieldKind::kRateLimit) == kSlotReset &&
              static_cast<int>(FieldKind::kRateLimitPartition) - static_cast<int>(FieldKind::kRateLimit) ==
                  kSlotPartition);

// Adds one field line to its field.
void take(FieldValue& f, const Header& h, Joined& joined) {
  if (++f.lines_ == 1) {
    f.first_ = &h;
    f.joined_ = nullptr;
    return;
  }
  if (f.joined_ == nullptr) {
    f.joined_ = &joined.add(kSlots);
    f.joined_->assign(f.first_->value);
  }
  f.joined_->append(", ").append(h.value);
}

// Collects the fields: unprefixed ones by the kind the index gave each line
// (one pass, no name comparisons), prefixed ones ("x-ratelimit-limit")
// through its lookup by name.
void collect(const detail::FieldIndex& index, std::string_view prefix, FieldValue (&fields)[kSlots], Joined& joined) {
  if (prefix.empty()) {
    const auto& lines = index.lines();
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto k = static_cast<int>(index.kind(i)) - static_cast<int>(FieldKind::kRateLimit);
      if (k >= 0 && k < kSlots) take(fields[k], lines[i], joined);
    }
    return;
  }
  std::string name;
  for (int k = 0; k < kSlots; ++k) {
    name.assign(prefix).append(kSlotNames[k]);
    index.for_each(name, [&](std::size_t, const Header& h) {
      take(fields[k], h, joined);
      return true;
    });
  }
}

// A parameter or dictionary key compared with a short literal, without a call.
constexpr bool key_is(std::string_view key, std::string_view literal) noexcept {
  if (key.size() != literal.size()) return false;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (key[i] != literal[i]) return false;
  }
  return true;
}

// A few elements on the stack (left uninitialized until pushed), more on the
// heap. For small trivially copyable records of views and numbers.
template <class T, std::size_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  SmallVec() noexcept {}  // NOLINT: the buffer is deliberately left uninitialized
  SmallVec(const SmallVec&) = delete;
  SmallVec& operator=(const SmallVec&) = delete;

  void push_back(const T& v) {
    if (n_ < N) {
      std::memcpy(static_cast<void*>(buf_ + n_ * sizeof(T)), &v, sizeof(T));
    } else {
      if (spill_.empty()) spill_.assign(data(), data() + N);
      spill_.push_back(v);
    }
    ++n_;
  }
  std::size_t size() const noexcept { return n_; }
  const T& operator[](std::size_t i) const noexcept { return n_ > N ? spill_[i] : data()[i]; }

 private:
  const T* data() const noexcept { return std::launder(reinterpret_cast<const T*>(buf_)); }

  alignas(T) unsigned char buf_[N * sizeof(T)];
  std::vector<T> spill_;
  std::size_t n_ = 0;
};

// Field names and policy names are server bytes: shown through printable().
std::string ignored(std::string_view field, std::string_view why) {
  std::string s = printable(field);
  s.append(" ignored: ").append(why);
  return s;
}

std::string sf_error(const sf::Parser& p) { return sf::describe(p.error()) + " (RFC 9651)"; }

bool non_negative_integer(const sf::BareView& v) noexcept { return v.type == sf::Type::integer && v.number >= 0; }

// A String, Token or Byte Sequence kept for later decoding. Trivial (no
// member initializers): the records holding it are built on every call, and
// only their flags need setting.
struct Text {
  const char* data;
  std::size_t size;
  bool escaped;  // a String with a backslash escape

  static Text of(const sf::BareView& v) noexcept {
    return {v.raw.data(), v.raw.size(), v.type == sf::Type::string && v.escaped};
  }
  std::string_view raw() const noexcept { return {data, size}; }
};

std::string decode_name(const Text& t) {
  std::string out;
  if (t.escaped) {
    sf::append_unescaped_string(t.raw(), out);
  } else {
    out.assign(t.raw());
  }
  return out;
}
std::string decode_name(const sf::BareView& v) { return decode_name(Text::of(v)); }

std::string decode_bytes(const Text& t) {
  std::vector<std::uint8_t> bytes;
  sf::append_decoded_byte_sequence(t.raw(), bytes);
  return std::string(bytes.begin(), bytes.end());
}

Duration seconds(std::int64_t s) noexcept { return seconds_saturating(s); }

// a - b, saturating: a parsed date (or Date) may sit at an end of WallTime's range.
Duration minus(WallTime a, WallTime b) noexcept {
  Duration::rep r;
  if (__builtin_sub_overflow(a.time_since_epoch().count(), b.time_since_epoch().count(), &r)) {
    return a > b ? Duration::max() : Duration::min();
  }
  return Duration{r};
}

// What a reset in delta-seconds (RateLimit-Reset, `reset`, `t`, `w`) that is
// no plausible delay means. `what` names the field (and parameter) for the
// warning. Out of line: real servers that follow the drafts never get here.
[[gnu::cold]] [[gnu::noinline]] std::optional<Duration> implausible_delay(
    std::int64_t v, std::string_view field, std::string_view param, std::string_view policy, const RateLimitOptions& o,
    Confidence& confidence, std::vector<std::string>& warnings) {
  std::string what = printable(field);
  if (!policy.empty()) what.append(" policy \"").append(printable(policy)).append("\"");
  if (!param.empty()) what.append(" ").append(param);
  what.append(" ").append(std::to_string(v));
  // The Date says what the server's clock meant; without one, the local clock.
  const WallTime ref = o.server_date ? *o.server_date : o.received;
  const std::int64_t ref_s = std::chrono::duration_cast<std::chrono::seconds>(ref.time_since_epoch()).count();
  const std::string_view ref_name = o.server_date ? "the server's Date" : "the receive time";
  confidence = Confidence::kLow;
  // (The last test keeps the instant representable: WallTime counts nanoseconds.)
  constexpr std::int64_t kLatestInstant = Duration::max().count() / 1'000'000'000 - 2 * kNearInstant;
  if (v - ref_s > kNearInstant || ref_s - v > kNearInstant || v > kLatestInstant) {
    // Neither a delay nor a nearby instant: a wait of years, or a guess at
    // an instant, would both be inventions. The planner falls back to other
    // signals and its own backoff, as for a malformed value (rule 2).
    warnings.push_back(what + " ignored: neither a plausible delay (at most a year) nor a Unix time within a year of " +
                       std::string(ref_name));
    return std::nullopt;
  }
  // Rule 3: from receipt, and never earlier than the server's Date allows.
  const WallTime at{std::chrono::seconds{v}};
  Duration d = minus(at, o.received);
  if (o.server_date) d = std::max(d, minus(at, *o.server_date));
  if (d > std::chrono::seconds{kLongestDelay}) {
    // Near a Date far ahead of the local clock: still a wait of years here.
    warnings.push_back(what + " ignored: as a Unix time it is more than a year after the receive time (the "
                              "server's Date is far ahead of the local clock)");
    return std::nullopt;
  }
  warnings.push_back(what + " is no plausible delay (over a year) but a Unix time within a year of " +
                     std::string(ref_name) +
                     ": read as that instant (low confidence; a vendor profile decides for sure)");
  return std::max(d, Duration::zero());
}

// A reset in delta-seconds; nullopt when it is to be ignored (see implausible_delay).
inline std::optional<Duration> delta_reset(std::int64_t v, std::string_view field, std::string_view param,
                                           std::string_view policy, const RateLimitOptions& o, Confidence& confidence,
                                           std::vector<std::string>& warnings) {
  if (v <= kLongestDelay) return seconds(v);
  return implausible_delay(v, field, param, policy, o, confidence, warnings);
}

// ---- RateLimit-Policy --------------------------------------------------------

enum class PolicyKind { kNone, kNamed, kInteger };

// One member of RateLimit-Policy (or of a draft-03 RateLimit-Limit list).
// Trivial, set field by field: a member without some parameter costs one flag.
struct PolicyItem {
  Text value;           // the name (String or Token)
  std::int64_t number;  // the quota (Integer)
  std::int64_t q, w;
  Text qu, pk, name;  // name: Envoy's name="..." on an unnamed policy
  bool has_q, has_w, has_qu, has_pk, has_name;
};
using PolicyItems = SmallVec<PolicyItem, 8>;

// Reads a RateLimit-Policy value; returns its kind, or kNone and why.
PolicyKind parse_policy(std::string_view value, PolicyItems& items, std::string& why) {
  sf::Parser p(value);
  PolicyKind kind = PolicyKind::kNone;
  std::size_t index = 0;
  while (auto m = p.next_list_member()) {
    ++index;
    if (m->inner_list) {
      why = "member " + std::to_string(index) + " is an inner list";
      return PolicyKind::kNone;
    }
    PolicyKind k = PolicyKind::kNone;
    if (m->item.type == sf::Type::string || m->item.type == sf::Type::token) {
      k = PolicyKind::kNamed;
    } else if (non_negative_integer(m->item)) {
      k = PolicyKind::kInteger;
    } else {
      why = "member " + std::to_string(index) + " is neither a policy name nor a non-negative Integer";
      return PolicyKind::kNone;
    }
    if (kind != PolicyKind::kNone && k != kind) {
      why = "members mix named and unnamed policies";
      return PolicyKind::kNone;
    }
    kind = k;
    PolicyItem item;
    item.value = Text::of(m->item);
    item.number = m->item.number;
    item.has_q = item.has_w = item.has_qu = item.has_pk = item.has_name = false;
    while (auto param = p.next_param()) {
      const auto& v = param->value;
      // Parameters not named here are comments (all revisions); a repeated
      // one counts last (RFC 9651 4.2.3.2).
      if (key_is(param->key, "q") || key_is(param->key, "w") || key_is(param->key, "window")) {
        if (!non_negative_integer(v)) {
          why = "parameter " + std::string(param->key) + " of member " + std::to_string(index) +
                " is not a non-negative Integer";
          return PolicyKind::kNone;
        }
        if (key_is(param->key, "q")) {
          if (kind == PolicyKind::kNamed) {
            item.q = v.number;
            item.has_q = true;
          }
        } else if (key_is(param->key, "w") || kind == PolicyKind::kInteger) {
          item.w = v.number;
          item.has_w = true;
        }
      } else if (kind == PolicyKind::kNamed && key_is(param->key, "qu")) {
        if (v.type != sf::Type::string && v.type != sf::Type::token) {
          why = "parameter qu of member " + std::to_string(index) + " is not a String";
          return PolicyKind::kNone;
        }
        item.qu = Text::of(v);
        item.has_qu = true;
      } else if (kind == PolicyKind::kNamed && key_is(param->key, "pk")) {
        if (v.type != sf::Type::byte_sequence) {
          why = "parameter pk of member " + std::to_string(index) + " is not a Byte Sequence";
          return PolicyKind::kNone;
        }
        item.pk = Text::of(v);
        item.has_pk = true;
      } else if (kind == PolicyKind::kInteger && key_is(param->key, "name") && v.type == sf::Type::string) {
        item.name = Text::of(v);
        item.has_name = true;
      }
    }
    items.push_back(item);
  }
  if (p.failed()) {
    why = sf_error(p);
    return PolicyKind::kNone;
  }
  if (kind == PolicyKind::kNone) why = "empty list";
  return kind;
}

// Where observations came from: a draft form, or a vendor profile reading the
// draft syntax under its own names.
struct Label {
  QuotaSource source = QuotaSource::kUnknown;
  std::string_view profile;
  void apply(QuotaObservation& q) const {
    q.source = source;
    q.profile.assign(profile);
  }
};

// One observation per policy (limit, window, unit, pk).
void commit_policies(const PolicyItems& items, PolicyKind kind, Label source, std::vector<QuotaObservation>& out,
                     std::vector<std::string>& warnings, std::string_view field) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    const PolicyItem& item = items[i];
    QuotaObservation& q = out.emplace_back();  // filled in place: no moves
    source.apply(q);
    if (kind == PolicyKind::kNamed) {
      if (item.value.escaped) {
        q.policy = decode_name(item.value);
      } else {
        q.policy.assign(item.value.raw());
      }
      if (item.has_q) {
        q.limit = item.q;
      } else {
        warnings.push_back(printable(field) + ": policy \"" + printable(q.policy) + "\" has no quota (q)");
      }
      if (item.has_qu) {
        q.unit = decode_name(item.qu);
        // The drafts' IANA table says "request", their text "requests"; -08's
        // example said "bytes" where -09 says "content-bytes".
        if (q.unit == "request") q.unit = "requests";
        if (q.unit == "bytes") q.unit = "content-bytes";
      }
      if (item.has_pk) q.partition_key = decode_bytes(item.pk);
    } else {
      q.limit = item.number;
      if (item.has_name) q.policy = decode_name(item.name);  // Envoy names its descriptors
    }
    if (item.has_w) {
      if (item.w == 0) {
        warnings.push_back(printable(field) + ": window w=0 of policy \"" + printable(q.policy) + "\" ignored");
      } else {
        q.window = seconds(item.w);
      }
    }
  }
}

// ---- RateLimit (draft-08 and later: a List of named items) --------------------

// The draft-08 to -11 parameters r and t, and their provisional draft-12
// names a and w beside them, with the cost c (PR #166 of the draft). Which
// are present is one bit mask: one store to clear, one test for "any -12 name".
enum : std::uint8_t { kParamR = 1, kParamT = 2, kParamA = 4, kParamW = 8, kParamC = 16 };
constexpr std::uint8_t kDraft12Params = kParamA | kParamW | kParamC;

struct RateItem {  // trivial, like PolicyItem
  Text name;
  std::int64_t r, t, a, w, c;
  Text pk;
  std::uint8_t has;  // kParam* bits
  bool has_pk;
};
using RateItems = SmallVec<RateItem, 8>;

bool parse_named_ratelimit(std::string_view value, RateItems& items, std::string& why) {
  sf::Parser p(value);
  std::size_t index = 0;
  while (auto m = p.next_list_member()) {
    ++index;
    if (m->inner_list || (m->item.type != sf::Type::string && m->item.type != sf::Type::token)) {
      why = "member " + std::to_string(index) + " is not a policy name";
      return false;
    }
    RateItem item;
    item.name = Text::of(m->item);
    item.has = 0;
    item.has_pk = false;
    while (auto param = p.next_param()) {
      const auto& v = param->value;
      const std::string_view key = param->key;
      if (key.size() == 1) {
        std::int64_t* slot = nullptr;
        std::uint8_t bit = 0;
        switch (key[0]) {
          case 'r':
            slot = &item.r;
            bit = kParamR;
            break;
          case 't':
            slot = &item.t;
            bit = kParamT;
            break;
          case 'a':
            slot = &item.a;
            bit = kParamA;
            break;
          case 'w':
            slot = &item.w;
            bit = kParamW;
            break;
          case 'c':
            slot = &item.c;
            bit = kParamC;
            break;
          default: break;
        }
        if (slot == nullptr) continue;  // a comment
        if (!non_negative_integer(v)) {
          why = "parameter " + std::string(key) + " of member " + std::to_string(index) +
                " is not a non-negative Integer";
          return false;
        }
        *slot = v.number;
        item.has |= bit;
      } else if (key_is(key, "pk")) {
        if (v.type != sf::Type::byte_sequence) {
          why = "parameter pk of member " + std::to_string(index) + " is not a Byte Sequence";
          return false;
        }
        item.pk = Text::of(v);
        item.has_pk = true;
      }
    }
    items.push_back(item);
  }
  if (p.failed()) {
    why = sf_error(p);
    return false;
  }
  if (index == 0) {
    why = "empty list";
    return false;
  }
  return true;
}

// The labels of the named forms: draft-08 to -11, or draft-12 when an item
// used any of its provisional parameters.
struct NamedSources {
  Label draft08, draft12;
};

// An item with any of the draft-12 names: old and new names both present and
// different give the more restrictive (smaller available, longer window).
// Out of line: the -08 to -11 items that servers send today skip it.
[[gnu::noinline]] void merge_draft12(const RateItem& item, std::string_view name, QuotaObservation& target,
                                     std::string_view field, const RateLimitOptions& options,
                                     std::vector<std::string>& warnings) {
  const bool r = (item.has & kParamR) != 0;
  const bool a = (item.has & kParamA) != 0;
  if (r && a) {
    target.remaining = std::min(item.r, item.a);
    if (item.r != item.a) {
      warnings.push_back(printable(field) + " policy \"" + printable(name) + "\": r=" + std::to_string(item.r) +
                         " and a=" + std::to_string(item.a) + " differ; the smaller is used");
    }
  } else if (r || a) {
    target.remaining = r ? item.r : item.a;
  }
  std::optional<Duration> t, w;
  if (item.has & kParamT) t = delta_reset(item.t, field, "t", name, options, target.confidence, warnings);
  if (item.has & kParamW) w = delta_reset(item.w, field, "w", name, options, target.confidence, warnings);
  if (t && w) {
    target.reset = std::max(*t, *w);
    if (item.t != item.w) {
      warnings.push_back(printable(field) + " policy \"" + printable(name) + "\": t=" + std::to_string(item.t) +
                         " and w=" + std::to_string(item.w) + " differ; the longer is used");
    }
  } else if (t || w) {
    target.reset = t ? t : w;
  }
  if (item.has & kParamC) target.cost = item.c;
}

// Merges the RateLimit items into the observations of their policies (those
// in out[from..]), or appends new ones for names without a policy.
void merge_named_ratelimit(const RateItems& items, NamedSources source, std::vector<QuotaObservation>& out,
                           std::size_t from, std::string_view field, const RateLimitOptions& options,
                           std::vector<std::string>& warnings) {
  for (std::size_t k = 0; k < items.size(); ++k) {
    const RateItem& item = items[k];
    // Compare names without allocating when the name has no escape.
    std::string decoded;
    std::string_view name = item.name.raw();
    if (item.name.escaped) {
      decoded = decode_name(item.name);
      name = decoded;
    }
    QuotaObservation* target = nullptr;
    for (std::size_t i = from; i < out.size(); ++i) {
      auto& q = out[i];
      if (q.policy == name && !q.remaining && !q.reset) {
        target = &q;
        break;
      }
    }
    const bool draft12 = (item.has & kDraft12Params) != 0;
    if (target == nullptr) {
      target = &out.emplace_back();
      target->policy.assign(name);
      (draft12 ? source.draft12 : source.draft08).apply(*target);
    } else if (draft12) {
      source.draft12.apply(*target);
    }
    target->remaining.reset();
    if (draft12) {
      merge_draft12(item, name, *target, field, options, warnings);
    } else {
      if (item.has & kParamR) target->remaining = item.r;
      if (item.has & kParamT)
        target->reset = delta_reset(item.t, field, "t", name, options, target->confidence, warnings);
    }
    if (item.has_pk) target->partition_key = decode_bytes(item.pk);
  }
}

// ---- RateLimit-Partition (provisional draft-12) ----------------------------------

// Checks a RateLimit-Partition value: an SF List of policy names (String or
// Token) whose parameters name the dimensions the policy is partitioned by.
// A valid one contributes nothing to the observations (see ratelimit.h).
bool valid_partition(std::string_view value, std::string& why) {
  sf::Parser p(value);
  std::size_t index = 0;
  while (auto m = p.next_list_member()) {
    ++index;
    if (m->inner_list || (m->item.type != sf::Type::string && m->item.type != sf::Type::token)) {
      why = "member " + std::to_string(index) + " is not a policy name";
      return false;
    }
    while (p.next_param()) {
    }
  }
  if (p.failed()) {
    why = sf_error(p);
    return false;
  }
  if (index == 0) {
    why = "empty list";
    return false;
  }
  return true;
}

// ---- RateLimit (draft-07: a Dictionary) ---------------------------------------

struct Draft07 {
  std::optional<std::int64_t> limit, remaining, reset;
};

bool read_draft07(std::string_view value, Draft07& d, std::string& why) {
  sf::Parser p(value);
  while (auto m = p.next_dict_member()) {
    std::optional<std::int64_t>* slot = nullptr;
    if (key_is(m->key, "limit")) slot = &d.limit;
    else if (key_is(m->key, "remaining")) slot = &d.remaining;
    else if (key_is(m->key, "reset")) slot = &d.reset;
    if (slot == nullptr) continue;  // unknown keys are ignored
    if (m->inner_list || !non_negative_integer(m->item)) {
      why = "\"" + std::string(m->key) + "\" is not a non-negative Integer";
      return false;
    }
    *slot = m->item.number;  // duplicate keys: the last wins (RFC 9651 4.2.2)
  }
  if (p.failed()) {
    why = sf_error(p);
    return false;
  }
  if (!d.limit && !d.remaining && !d.reset) {
    why = "none of limit, remaining, reset";
    return false;
  }
  return true;
}

// ---- the separate fields (draft-00 to -06) -------------------------------------

// An Integer item field (RateLimit-Remaining, RateLimit-Reset); parameters ignored.
std::optional<std::int64_t> integer_item(std::string_view value, std::string& why) {
  sf::Parser p(value);
  auto item = p.item();
  if (!item) {
    why = sf_error(p);
    return std::nullopt;
  }
  while (p.next_param()) {
  }
  if (!p.finish()) {
    why = sf_error(p);
    return std::nullopt;
  }
  if (!non_negative_integer(*item)) {
    why = "not a non-negative Integer";
    return std::nullopt;
  }
  return item->number;
}

struct LimitList {
  std::int64_t limit = 0;
  std::optional<std::int64_t> window;  // a `w` on the expiring limit itself
  std::size_t members = 0;
};

// RateLimit-Limit: an Integer, or (draft-03) a list whose first member is the
// expiring limit and whose other members are quota policies.
bool validate_limit(std::string_view value, LimitList& out, std::string& why) {
  sf::Parser p(value);
  while (auto m = p.next_list_member()) {
    ++out.members;
    if (m->inner_list || !non_negative_integer(m->item)) {
      why = "member " + std::to_string(out.members) + " is not a non-negative Integer";
      return false;
    }
    if (out.members == 1) out.limit = m->item.number;
    while (auto param = p.next_param()) {
      if (key_is(param->key, "w") || key_is(param->key, "window")) {
        if (!non_negative_integer(param->value)) {
          why = "parameter " + std::string(param->key) + " is not a non-negative Integer";
          return false;
        }
        if (out.members == 1 && param->value.number > 0) out.window = param->value.number;
      }
    }
  }
  if (p.failed()) {
    why = sf_error(p);
    return false;
  }
  if (out.members == 0) {
    why = "empty";
    return false;
  }
  return true;
}

// Drafts -06 and -07 say two policies MUST NOT share a quota value: the
// expiring limit names its policy by that value, so which window is meant
// becomes a guess (the first is taken). Read as sent, with one warning.
void warn_shared_quota(const PolicyItems& items, std::string_view field, std::vector<std::string>& warnings) {
  const std::size_t n = items.size();
  std::optional<std::int64_t> shared;
  if (n <= 16) {
    for (std::size_t i = 0; i < n && !shared; ++i) {
      for (std::size_t j = i + 1; j < n; ++j) {
        if (items[i].number == items[j].number) {
          shared = items[i].number;
          break;
        }
      }
    }
  } else {  // a long list: sorted, not compared pairwise
    std::vector<std::int64_t> quotas(n);
    for (std::size_t i = 0; i < n; ++i) quotas[i] = items[i].number;
    std::sort(quotas.begin(), quotas.end());
    const auto it = std::adjacent_find(quotas.begin(), quotas.end());
    if (it != quotas.end()) shared = *it;
  }
  if (shared) {
    warnings.push_back(printable(field) + ": two policies have the same quota " + std::to_string(*shared) +
                       " (drafts -06 and -07 forbid it); the first one's window is taken for the current quota");
  }
}

// Looks for a quota policy (from a policy list) whose quota equals limit and
// gives its window to q; that policy then describes the same quota and is dropped.
void adopt_matching_policy(QuotaObservation& q, std::vector<QuotaObservation>& policies) {
  if (!q.limit) return;
  for (auto it = policies.begin(); it != policies.end(); ++it) {
    if (it->limit == q.limit) {
      if (!q.window) q.window = it->window;
      if (q.policy.empty()) q.policy = it->policy;
      policies.erase(it);
      return;
    }
  }
}

// The label of an observation of `form`: a profile's, when one reads the fields.
Label label_of(const RateLimitOptions& options, QuotaSource form) {
  return options.profile.empty() ? Label{form, {}} : Label{QuotaSource::kVendor, options.profile};
}

// q is the current quota: a policy of the list with its quota gives it its
// window (and is dropped), and the others are read in q's form.
void make_current(QuotaObservation& q, std::vector<QuotaObservation>& unnamed) {
  adopt_matching_policy(q, unnamed);
  for (auto& u : unnamed) {
    u.source = q.source;
    u.profile = q.profile;
  }
}

// RateLimit-Policy. Unnamed (draft-04 to -07) policies wait in `unnamed` for
// the field that says which is current; named ones are left in `items` for
// the caller (they come before RateLimit's items). The form read.
PolicyKind read_policy_field(const FieldValue& policy, const RateLimitOptions& options, PolicyItems& items,
                             std::vector<QuotaObservation>& unnamed, std::vector<std::string>& warnings) {
  if (!policy.present()) return PolicyKind::kNone;
  std::string why;
  const PolicyKind kind = parse_policy(policy.value(), items, why);
  if (kind == PolicyKind::kNone) warnings.push_back(ignored(policy.name(), why));
  if (kind == PolicyKind::kInteger) {
    commit_policies(items, kind, label_of(options, QuotaSource::kDraft06), unnamed, warnings, policy.name());
    warn_shared_quota(items, policy.name(), warnings);
  }
  return kind;
}

// RateLimit: a List of named items (draft-08+), merged into the policies
// from quota[from] on, or a Dictionary (draft-07).
void read_combined_field(const FieldValue& combined, std::size_t from, const RateLimitOptions& options,
                         std::vector<QuotaObservation>& quota, std::vector<QuotaObservation>& unnamed,
                         std::vector<std::string>& warnings) {
  std::string why_list;
  RateItems rate_items;
  if (parse_named_ratelimit(combined.value(), rate_items, why_list)) {
    merge_named_ratelimit(rate_items,
                          {label_of(options, QuotaSource::kDraft08), label_of(options, QuotaSource::kDraft12Provisional)},
                          quota, from, combined.name(), options, warnings);
    return;
  }
  Draft07 d;
  std::string why_dict;
  if (!read_draft07(combined.value(), d, why_dict)) {
    warnings.push_back(ignored(combined.name(), "neither a draft-08 list (" + why_list +
                                                    ") nor a draft-07 dictionary (" + why_dict + ")"));
    return;
  }
  QuotaObservation q;
  label_of(options, QuotaSource::kDraft07).apply(q);
  q.limit = d.limit;
  q.remaining = d.remaining;
  if (d.reset) q.reset = delta_reset(*d.reset, combined.name(), "reset", {}, options, q.confidence, warnings);
  make_current(q, unnamed);
  quota.push_back(std::move(q));
}

// The quota policies after the expiring limit (draft-03), read like a policy list.
std::vector<QuotaObservation> draft03_policies(std::string_view rest) {
  std::vector<QuotaObservation> listed;
  sf::Parser p(rest);
  std::size_t member = 0;
  while (auto m = p.next_list_member()) {
    if (++member == 1) {
      while (p.next_param()) {
      }
      continue;
    }
    QuotaObservation pq;
    pq.limit = m->item.number;
    while (auto param = p.next_param()) {
      if ((key_is(param->key, "w") || key_is(param->key, "window")) && param->value.number > 0) {
        pq.window = seconds(param->value.number);
      } else if (key_is(param->key, "name") && param->value.type == sf::Type::string) {
        pq.policy = decode_name(param->value);
      }
    }
    listed.push_back(std::move(pq));
  }
  return listed;
}

// RateLimit-Limit into q: true when it was read. A list (draft-03) sets the
// form, and its policies wait in `unnamed`.
bool read_limit_field(const FieldValue& limit_f, QuotaObservation& q, QuotaSource& form,
                      std::vector<QuotaObservation>& unnamed, std::vector<std::string>& warnings) {
  std::string why;
  LimitList list;
  if (!validate_limit(limit_f.value(), list, why)) {
    warnings.push_back(ignored(limit_f.name(), why));
    return false;
  }
  q.limit = list.limit;
  if (list.window) q.window = seconds(*list.window);
  if (list.members > 1) {
    form = QuotaSource::kDraft03;
    const std::vector<QuotaObservation> listed = draft03_policies(limit_f.value());
    unnamed.insert(unnamed.begin(), listed.begin(), listed.end());
  }
  return true;
}

// RateLimit-Reset into q: true when it was read. A date sets the form.
bool read_reset_field(const FieldValue& reset_f, const RateLimitOptions& options, QuotaObservation& q,
                      QuotaSource& form, std::vector<std::string>& warnings) {
  std::string why;
  if (auto r = integer_item(reset_f.value(), why)) {
    q.reset = delta_reset(*r, reset_f.name(), {}, {}, options, q.confidence, warnings);
    return true;
  }
  // draft-polli-00 allowed an IMF-fixdate here.
  auto date = parse_http_date(reset_f.value(), options.received, ParseMode::kStrict);
  if (!date) {
    warnings.push_back(ignored(reset_f.name(), why));
    return false;
  }
  form = QuotaSource::kDraftPolli00;
  Duration d = minus(date->time, options.received);
  if (options.server_date) d = std::max(d, minus(date->time, *options.server_date));
  q.reset = std::max(d, Duration::zero());
  return true;
}

// RateLimit-Limit / -Remaining / -Reset: one quota, when any of them is read.
void read_separate_fields(const FieldValue& limit_f, const FieldValue& remaining_f, const FieldValue& reset_f,
                          const RateLimitOptions& options, std::vector<QuotaObservation>& quota,
                          std::vector<QuotaObservation>& unnamed, std::vector<std::string>& warnings) {
  if (!limit_f.present() && !remaining_f.present() && !reset_f.present()) return;
  QuotaObservation q;
  QuotaSource form = QuotaSource::kDraft06;
  bool any = false;
  if (limit_f.present() && read_limit_field(limit_f, q, form, unnamed, warnings)) any = true;
  if (remaining_f.present()) {
    std::string why;
    if (auto r = integer_item(remaining_f.value(), why)) {
      q.remaining = *r;
      any = true;
    } else {
      warnings.push_back(ignored(remaining_f.name(), why));
    }
  }
  if (reset_f.present() && read_reset_field(reset_f, options, q, form, warnings)) any = true;
  if (!any) return;
  label_of(options, form).apply(q);
  make_current(q, unnamed);
  if (q.limit && q.remaining && *q.remaining > *q.limit) {
    warnings.push_back("RateLimit-Remaining " + std::to_string(*q.remaining) + " exceeds RateLimit-Limit " +
                       std::to_string(*q.limit));
  }
  quota.push_back(std::move(q));
}

}  // namespace

void read_ratelimit(const HeaderList& headers, std::vector<QuotaObservation>& quota, std::vector<std::string>& warnings,
                    const RateLimitOptions& options) {
  const detail::FieldIndex index(headers);
  detail::read_ratelimit(index, quota, warnings, options);
}

void detail::read_ratelimit(const FieldIndex& index, std::vector<QuotaObservation>& quota,
                            std::vector<std::string>& warnings, const RateLimitOptions& options) {
  const std::size_t first = quota.size();

  FieldValue fields[kSlots];
  Joined joined;
  collect(index, options.prefix, fields, joined);

  // Unnamed (draft-04 to -07) policies wait for the field that says which is current.
  std::vector<QuotaObservation> unnamed;
  PolicyItems policy_items;
  const FieldValue& policy = fields[kSlotPolicy];
  const PolicyKind policy_kind = read_policy_field(policy, options, policy_items, unnamed, warnings);

  const std::size_t from = quota.size();
  if (policy_kind == PolicyKind::kNamed) {
    commit_policies(policy_items, policy_kind, label_of(options, QuotaSource::kDraft08), quota, warnings,
                    policy.name());
  }
  const FieldValue& combined = fields[kSlotRateLimit];
  if (combined.present()) read_combined_field(combined, from, options, quota, unnamed, warnings);

  if (!options.skip_separate_fields) {
    read_separate_fields(fields[kSlotLimit], fields[kSlotRemaining], fields[kSlotReset], options, quota, unnamed,
                         warnings);
  }
  // RateLimit-Partition (provisional draft-12): checked, so that a malformed
  // one is reported; it changes nothing else either way.
  const FieldValue& partition = fields[kSlotPartition];
  if (partition.present()) {
    std::string why;
    if (!valid_partition(partition.value(), why)) warnings.push_back(ignored(partition.name(), why));
  }
  // Policies no field made current: informative limit and window only.
  for (auto& u : unnamed) quota.push_back(std::move(u));
  for (std::size_t i = first; i < quota.size(); ++i) {
    if (quota[i].reset) quota[i].reset_resolution = kWholeSecond;
  }
}

RateLimitReading read_ratelimit(const HeaderList& headers, const RateLimitOptions& options) {
  RateLimitReading r;
  read_ratelimit(headers, r.quota, r.warnings, options);
  return r;
}

std::optional<std::size_t> most_restrictive(std::span<const QuotaObservation> quota) noexcept {
  const bool any_high = std::any_of(quota.begin(), quota.end(),
                                    [](const QuotaObservation& q) { return q.confidence == Confidence::kHigh; });
  // A rank: lower tier is more restrictive; within a tier, a larger key is.
  struct Rank {
    int tier = 4;
    double key = 0;
  };
  auto rank = [](const QuotaObservation& q) -> Rank {
    if (q.remaining && *q.remaining <= 0) {
      if (q.reset) return {0, to_seconds(*q.reset)};
      return {1, 0};
    }
    const std::optional<Duration> time = q.reset ? q.reset : q.window;
    if (q.remaining && time) {
      return {2, to_seconds(*time) / static_cast<double>(*q.remaining)};
    }
    if (q.remaining && q.limit && *q.limit > 0) {
      return {3, -static_cast<double>(*q.remaining) / static_cast<double>(*q.limit)};
    }
    if (q.remaining) return {4, -static_cast<double>(*q.remaining)};
    return {5, 0};
  };
  std::optional<std::size_t> best;
  Rank best_rank;
  for (std::size_t i = 0; i < quota.size(); ++i) {
    if (any_high && quota[i].confidence != Confidence::kHigh) continue;
    const Rank r = rank(quota[i]);
    if (!best || r.tier < best_rank.tier || (r.tier == best_rank.tier && r.key > best_rank.key)) {
      best = i;
      best_rank = r;
    }
  }
  return best;
}

}  // namespace abide
