// HTTP-date (RFC 9110 section 5.6.7) and RFC 3339 parsing and formatting.
//
// The parsers walk the text once with a cursor, never allocate, and validate
// the calendar after the syntax (so that "February 30" is reported at the day).
#include "abide/http_date.h"

#include <array>
#include <cstring>
#include <limits>

#include "always_inline.h"
#include "ascii.h"
#include "decimal.h"

namespace abide {
namespace {

// ---- calendar arithmetic (proleptic Gregorian, days since 1970-01-01) -------
// Through <chrono>'s civil calendar. Every year that reaches these functions
// fits std::chrono::year (-32767..32767): four-digit years are 0..9999, and a
// two-digit year lands within a century of `now`, itself within WallTime's
// 1677..2262. libstdc++ computes these with Neri and Schneider's algorithms
// (32-bit multiplies, no table, no branch on the month), which measure no
// slower than the hand-written Hinnant versions they replace.

namespace cal = std::chrono;

constexpr cal::year to_year(std::int64_t y) noexcept { return cal::year{static_cast<int>(y)}; }

constexpr unsigned days_in_month(std::int64_t y, unsigned m) noexcept {
  return static_cast<unsigned>((to_year(y) / cal::month{m} / cal::last).day());
}

// Days since 1970-01-01 of y-m-d. A day past the month's end (February 30)
// counts on into the next month, as [time.cal.ymd] specifies for a valid year
// and month: the two-digit-year rule compares such dates before the day range
// is checked.
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
  return cal::sys_days{to_year(y) / cal::month{m} / cal::day{d}}.time_since_epoch().count();
}

struct Civil {
  std::int64_t year;
  unsigned month;  // 1..12
  unsigned day;    // 1..31
};

constexpr Civil civil_from_days(std::int64_t z) noexcept {
  const cal::year_month_day ymd{cal::sys_days{cal::days{z}}};
  return {static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day())};
}

// 0 = Sunday.
constexpr unsigned weekday_from_days(std::int64_t z) noexcept {
  return cal::weekday{cal::sys_days{cal::days{z}}}.c_encoding();
}

static_assert(days_from_civil(1970, 1, 1) == 0);
static_assert(days_from_civil(2000, 3, 1) == 11017);
static_assert(days_from_civil(0, 1, 1) == -719528);
static_assert(days_from_civil(9999, 12, 31) == 2932896);
static_assert(days_from_civil(2023, 2, 29) == days_from_civil(2023, 3, 1));
static_assert(days_from_civil(2024, 2, 31) == days_from_civil(2024, 3, 2));
static_assert(weekday_from_days(days_from_civil(1994, 11, 6)) == 0);
static_assert(weekday_from_days(days_from_civil(1969, 12, 31)) == 3);
static_assert(weekday_from_days(days_from_civil(0, 1, 1)) == 6);
static_assert(civil_from_days(11017).year == 2000 && civil_from_days(11017).month == 3);
static_assert(civil_from_days(-719528).year == 0 && civil_from_days(2932896).day == 31);
static_assert(days_in_month(2024, 2) == 29 && days_in_month(2023, 2) == 28 && days_in_month(1900, 2) == 28 &&
              days_in_month(2000, 2) == 29 && days_in_month(2023, 4) == 30 && days_in_month(2023, 12) == 31);

// a / B rounded toward negative infinity. B is a template argument so that the
// division is always by a constant (a multiply), never a hardware divide.
template <std::int64_t B>
constexpr std::int64_t floor_div(std::int64_t a) noexcept {
  static_assert(B > 0);
  const std::int64_t q = a / B;
  return (a % B != 0 && a < 0) ? q - 1 : q;
}

// Whole seconds plus 0..999999999 ns -> WallTime, saturating at its range.
constexpr WallTime to_wall(std::int64_t secs, std::int64_t nanos = 0) noexcept {
  constexpr std::int64_t kMax = Duration::max().count() / 1'000'000'000;  //  9223372036
  constexpr std::int64_t kMin = Duration::min().count() / 1'000'000'000;  // -9223372036
  if (secs > kMax) return WallTime::max();
  if (secs < kMin - 1) return WallTime::min();
  // The second before kMin is only partly representable: count from kMin back.
  if (secs == kMin - 1) return saturating_add(WallTime{std::chrono::seconds{kMin}}, Duration{nanos - 1'000'000'000});
  return saturating_add(WallTime{std::chrono::seconds{secs}}, Duration{nanos});
}

// ---- names ---------------------------------------------------------------

constexpr std::array<const char*, 7> kDayShort = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
// What follows the three-letter abbreviation in the full name.
constexpr std::array<std::string_view, 7> kDayLongTail = {"day", "day", "sday", "nesday", "rsday", "day", "urday"};
constexpr std::array<const char*, 12> kMonth = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

constexpr std::uint32_t pack3(char a, char b, char c) noexcept {
  return (static_cast<std::uint32_t>(static_cast<unsigned char>(a)) << 16) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(b)) << 8) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(c));
}
// OR-ing 0x20 lowercases an ASCII letter and never turns a non-letter into a
// lower-case letter, so matching the folded value against lower-case names is
// exact.
constexpr std::uint32_t kFold = 0x202020;

// Index 0..6 (Sunday first) of a folded three-letter day name, or -1.
constexpr int day_index(std::uint32_t folded) noexcept {
  switch (folded) {
    case pack3('s', 'u', 'n'): return 0;
    case pack3('m', 'o', 'n'): return 1;
    case pack3('t', 'u', 'e'): return 2;
    case pack3('w', 'e', 'd'): return 3;
    case pack3('t', 'h', 'u'): return 4;
    case pack3('f', 'r', 'i'): return 5;
    case pack3('s', 'a', 't'): return 6;
    default: return -1;
  }
}

// Month 1..12 of a folded three-letter month name, or 0.
constexpr unsigned month_index(std::uint32_t folded) noexcept {
  switch (folded) {
    case pack3('j', 'a', 'n'): return 1;
    case pack3('f', 'e', 'b'): return 2;
    case pack3('m', 'a', 'r'): return 3;
    case pack3('a', 'p', 'r'): return 4;
    case pack3('m', 'a', 'y'): return 5;
    case pack3('j', 'u', 'n'): return 6;
    case pack3('j', 'u', 'l'): return 7;
    case pack3('a', 'u', 'g'): return 8;
    case pack3('s', 'e', 'p'): return 9;
    case pack3('o', 'c', 't'): return 10;
    case pack3('n', 'o', 'v'): return 11;
    case pack3('d', 'e', 'c'): return 12;
    default: return 0;
  }
}

constexpr std::uint32_t canonical(const char* name) noexcept { return pack3(name[0], name[1], name[2]); }

using ascii::is_alpha;
using ascii::is_ows;
constexpr unsigned digit(char c) noexcept { return static_cast<unsigned>(static_cast<unsigned char>(c)) - '0'; }
// A date's numbers have at most four digits: none comes near this.
constexpr unsigned kAnyNumber = std::numeric_limits<unsigned>::max();

// ---- the HTTP-date parser ---------------------------------------------------

class DateParser {
 public:
  DateParser(std::string_view s, ParseMode mode) noexcept : s_(s), robust_(mode == ParseMode::kRobust) {}

  Result<HttpDate, DateError> run(WallTime now) noexcept;

 private:
  // Each step returns false after recording the error.
  bool error(DateErrorCode code, std::size_t at, char expected = '\0') noexcept {
    err_ = DateError{code, static_cast<std::uint32_t>(at), expected};
    return false;
  }
  bool at_end() const noexcept { return i_ >= s_.size(); }
  char peek() const noexcept { return i_ < s_.size() ? s_[i_] : '\0'; }

  // One SP (strict) or a run of SP/HTAB (robust, reported when not one SP).
  bool space() noexcept {
    if (at_end()) return error(DateErrorCode::kTruncated, i_);
    if (!robust_) {
      if (s_[i_] != ' ') return error(DateErrorCode::kUnexpectedChar, i_, ' ');
      ++i_;
      return true;
    }
    const std::size_t start = i_;
    bool tab = false;
    while (i_ < s_.size() && is_ows(s_[i_])) tab |= s_[i_++] == '\t';
    if (i_ == start) return error(DateErrorCode::kUnexpectedChar, i_, ' ');
    if (tab || i_ - start > 1) dev_.add(DateDeviation::kExtraSpace);
    return true;
  }

  bool expect(char c) noexcept {
    if (at_end()) return error(DateErrorCode::kTruncated, i_);
    if (s_[i_] != c) return error(DateErrorCode::kUnexpectedChar, i_, c);
    ++i_;
    return true;
  }

  // Exactly N digits.
  template <unsigned N>
  bool digits(unsigned& out, DateErrorCode code) noexcept {
    const std::size_t start = i_;
    const auto r = detail::read_decimal<unsigned, kAnyNumber, N>({s_.data() + i_, s_.size() - i_});
    i_ += r.digits;
    if (r.digits < N) return at_end() ? error(DateErrorCode::kTruncated, i_) : error(code, start);
    out = r.value;
    return true;
  }

  // A run of Min..Max digits; returns how many in `count`. One digit more
  // than Max is read, to tell a run that is too long.
  template <unsigned Min, unsigned Max>
  bool digit_run(unsigned& out, unsigned& count, DateErrorCode code) noexcept {
    const std::size_t start = i_;
    const auto r = detail::read_decimal<unsigned, kAnyNumber, Max + 1>({s_.data() + i_, s_.size() - i_});
    i_ += r.digits;
    const auto k = static_cast<unsigned>(r.digits);
    if (k < Min || k > Max) {
      if (k < Min && at_end()) return error(DateErrorCode::kTruncated, i_);
      return error(code, start);
    }
    out = r.value;
    count = k;
    return true;
  }

  // A three-letter name: returns the folded value and the original in `raw`.
  bool name3(std::uint32_t& folded, std::uint32_t& raw) noexcept {
    if (s_.size() - i_ < 3) return false;
    raw = pack3(s_[i_], s_[i_ + 1], s_[i_ + 2]);
    folded = raw | kFold;
    return true;
  }

  bool month(unsigned& m) noexcept {
    std::uint32_t folded = 0, raw = 0;
    if (!name3(folded, raw)) {
      return at_end() ? error(DateErrorCode::kTruncated, i_) : error(DateErrorCode::kBadMonth, i_);
    }
    m = month_index(folded);
    if (m == 0 || (i_ + 3 < s_.size() && is_alpha(s_[i_ + 3]))) return error(DateErrorCode::kBadMonth, i_);
    if (!case_ok(raw, canonical(kMonth[m - 1]), i_, DateErrorCode::kBadMonth)) return false;
    i_ += 3;
    return true;
  }

  // Strict: the exact case; robust: any case, reported.
  bool case_ok(std::uint32_t raw, std::uint32_t want, std::size_t at, DateErrorCode code) noexcept {
    if (raw == want) return true;
    if (!robust_) return error(code, at);
    dev_.add(DateDeviation::kCase);
    return true;
  }

  bool time_of_day() noexcept {
    hour_at_ = i_;
    if (!digits<2>(hour_, DateErrorCode::kBadHour) || !expect(':')) return false;
    minute_at_ = i_;
    if (!digits<2>(minute_, DateErrorCode::kBadMinute) || !expect(':')) return false;
    second_at_ = i_;
    return digits<2>(second_, DateErrorCode::kBadSecond);
  }

  bool zone() noexcept {
    const std::size_t at = i_;
    if (at_end()) return error(DateErrorCode::kTruncated, i_);
    if (robust_ && s_[i_] == '+') {
      if (s_.substr(i_, 5) != "+0000") return error(DateErrorCode::kBadZone, at);
      dev_.add(DateDeviation::kZoneNumeric);
      i_ += 5;
      return true;
    }
    std::uint32_t folded = 0, raw = 0;
    if (!name3(folded, raw) || (i_ + 3 < s_.size() && is_alpha(s_[i_ + 3]))) {
      return error(DateErrorCode::kBadZone, at);
    }
    if (folded == pack3('g', 'm', 't')) {
      if (!case_ok(raw, pack3('G', 'M', 'T'), at, DateErrorCode::kBadZone)) return false;
    } else if (robust_ && folded == pack3('u', 't', 'c')) {
      dev_.add(DateDeviation::kZoneUtc);
      if (raw != pack3('U', 'T', 'C')) dev_.add(DateDeviation::kCase);
    } else {
      return error(DateErrorCode::kBadZone, at);
    }
    i_ += 3;
    return true;
  }

  // The day of IMF-fixdate / rfc850-date: 2DIGIT (robust: also 1DIGIT).
  bool day2() noexcept {
    day_at_ = i_;
    if (!robust_) return digits<2>(day_, DateErrorCode::kBadDay);
    unsigned count = 0;
    if (!digit_run<1, 2>(day_, count, DateErrorCode::kBadDay)) return false;
    if (count == 1) dev_.add(DateDeviation::kOneDigitDay);
    return true;
  }

  // asctime's date3 day after the month: ( 2DIGIT / ( SP 1DIGIT ) ) after one SP.
  bool asctime_day() noexcept {
    if (!robust_) {
      if (!space()) return false;
      if (peek() == ' ') {
        ++i_;
        day_at_ = i_;
        return digits<1>(day_, DateErrorCode::kBadDay);
      }
      day_at_ = i_;
      return digits<2>(day_, DateErrorCode::kBadDay);
    }
    const std::size_t start = i_;
    bool tab = false;
    while (i_ < s_.size() && is_ows(s_[i_])) tab |= s_[i_++] == '\t';
    const std::size_t spaces = i_ - start;
    if (spaces == 0)
      return at_end() ? error(DateErrorCode::kTruncated, i_) : error(DateErrorCode::kUnexpectedChar, i_, ' ');
    day_at_ = i_;
    unsigned count = 0;
    if (!digit_run<1, 2>(day_, count, DateErrorCode::kBadDay)) return false;
    const std::size_t canonical_spaces = count == 1 ? 2 : 1;
    if (tab || spaces > canonical_spaces) dev_.add(DateDeviation::kExtraSpace);
    if (spaces < canonical_spaces) dev_.add(DateDeviation::kOneDigitDay);
    return true;
  }

  bool imf_rest() noexcept;      // after "Sun," : SP date1 SP time SP GMT
  bool rfc850_rest() noexcept;   // after the day: "-" month "-" year SP time SP GMT
  bool asctime_rest() noexcept;  // after the month: date3 SP time SP year
  bool resolve(WallTime now) noexcept;
  bool canonical_layout() noexcept;  // the fast path, see below
  Result<HttpDate, DateError> finish(WallTime now) noexcept;

  std::string_view s_;
  bool robust_;
  std::size_t i_ = 0;
  DateDeviations dev_;
  DateError err_;
  HttpDateForm form_ = HttpDateForm::kImfFixdate;
  int wday_ = -1;  // -1: no day name
  unsigned day_ = 0, month_ = 0, year_ = 0, hour_ = 0, minute_ = 0, second_ = 0;
  unsigned year_digits_ = 4;
  std::size_t day_at_ = 0, hour_at_ = 0, minute_at_ = 0, second_at_ = 0;
  std::int64_t seconds_ = 0;
};

bool DateParser::imf_rest() noexcept {
  if (!space() || !month(month_) || !space()) return false;
  if (!digits<4>(year_, DateErrorCode::kBadYear)) return false;
  return space() && time_of_day() && space() && zone();
}

bool DateParser::rfc850_rest() noexcept {
  if (!expect('-') || !month(month_) || !expect('-')) return false;
  if (robust_) {
    unsigned count = 0;
    if (!digit_run<2, 4>(year_, count, DateErrorCode::kBadYear)) return false;
    if (count == 3) return error(DateErrorCode::kBadYear, i_ - 3);
    year_digits_ = count;
    if (count == 4) dev_.add(DateDeviation::kFourDigitYear);
  } else {
    if (!digits<2>(year_, DateErrorCode::kBadYear)) return false;
    year_digits_ = 2;
  }
  return space() && time_of_day() && space() && zone();
}

bool DateParser::asctime_rest() noexcept {
  if (!asctime_day() || !space() || !time_of_day() || !space()) return false;
  return digits<4>(year_, DateErrorCode::kBadYear);
}

// The calendar: two-digit year, ranges, weekday; then the instant.
bool DateParser::resolve(WallTime now) noexcept {
  std::int64_t year = year_;
  const std::int64_t sod = std::int64_t{hour_} * 3600 + minute_ * 60 + second_;
  if (day_ < 1 || day_ > 31) return error(DateErrorCode::kDayOutOfRange, day_at_);
  if (year_digits_ == 2) {
    // RFC 9110: a date more than 50 years in the future means the most recent
    // past year with the same last two digits. Read as: the year is the
    // largest Y ending in the two digits such that the same date-time in year
    // Y - 50 is not after now (exactly 50 years ahead is not "more than").
    // Now's year is only estimated (Julian year length, off by at most one
    // near New Year); the three candidates around it cover either case, and
    // each test is exact. This keeps the dependent arithmetic short: the rule
    // runs on every rfc850-date.
    const std::int64_t now_secs = std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count();
    const std::int64_t now_days = floor_div<86400>(now_secs);
    const std::int64_t estimate = 1970 + floor_div<1461>(4 * now_days + 2);
    const std::int64_t y0 = floor_div<100>(estimate) * 100 + year;
    const auto not_after_now = [&](std::int64_t y) {
      return days_from_civil(y - 50, month_, day_) * 86400 + sod <= now_secs;
    };
    year = not_after_now(y0 + 100) ? y0 + 100 : not_after_now(y0) ? y0 : y0 - 100;
  }
  if (day_ > days_in_month(year, month_)) return error(DateErrorCode::kDayOutOfRange, day_at_);
  if (hour_ > 23) return error(DateErrorCode::kHourOutOfRange, hour_at_);
  if (minute_ > 59) return error(DateErrorCode::kMinuteOutOfRange, minute_at_);
  if (second_ > 60) return error(DateErrorCode::kSecondOutOfRange, second_at_);
  const std::int64_t days = days_from_civil(year, month_, day_);
  // A wrong day name is read past, in both modes: the numbers name the
  // instant (what curl, Go and Python do), and the year was settled above
  // without looking at the name.
  if (wday_ >= 0 && weekday_from_days(days) != static_cast<unsigned>(wday_)) {
    dev_.add(DateDeviation::kWeekdayMismatch);
  }
  // Second 60 becomes second 0 of the next minute.
  seconds_ = days * 86400 + sod;
  return true;
}

// Two digits at fixed positions.
inline bool two_digits_at(const char* p, unsigned& v) noexcept {
  const auto r = detail::read_decimal<unsigned, 99, 2>(std::string_view(p, 2));
  v = r.value;
  return r.digits == 2;
}

// hh:mm:ss at p.
inline bool time_at(const char* p, unsigned& h, unsigned& m, unsigned& s) noexcept {
  return two_digits_at(p, h) && p[2] == ':' && two_digits_at(p + 3, m) && p[5] == ':' && two_digits_at(p + 6, s);
}

// The exact-case three-letter day name at p: 0..6, or -1.
inline int exact_day(const char* p) noexcept {
  const std::uint32_t raw = pack3(p[0], p[1], p[2]);
  const int d = day_index(raw | kFold);
  return d >= 0 && raw == canonical(kDayShort[static_cast<std::size_t>(d)]) ? d : -1;
}

// The exact-case month name at p: 1..12, or 0.
inline unsigned exact_month(const char* p) noexcept {
  const std::uint32_t raw = pack3(p[0], p[1], p[2]);
  const unsigned m = month_index(raw | kFold);
  return m != 0 && raw == canonical(kMonth[m - 1]) ? m : 0;
}

// The fast path: a value laid out exactly as the grammar's canonical form
// (what nearly every server sends) is read at fixed offsets. On any mismatch
// it changes nothing and the general parser below takes over, and reports the
// error precisely.
bool DateParser::canonical_layout() noexcept {
  const char* p = s_.data();
  const std::size_t n = s_.size();
  unsigned d = 0, m = 0, y = 0, yy = 0, h = 0, mi = 0, sec = 0;
  if (n == 29) {
    // Sun, 06 Nov 1994 08:49:37 GMT
    const int wd = exact_day(p);
    if (wd < 0 || p[3] != ',' || p[4] != ' ' || !two_digits_at(p + 5, d) || p[7] != ' ' || p[11] != ' ' ||
        !two_digits_at(p + 12, y) || !two_digits_at(p + 14, yy) || p[16] != ' ' || !time_at(p + 17, h, mi, sec) ||
        p[25] != ' ' || p[26] != 'G' || p[27] != 'M' || p[28] != 'T') {
      return false;
    }
    if ((m = exact_month(p + 8)) == 0) return false;
    wday_ = wd;
    form_ = HttpDateForm::kImfFixdate;
    day_at_ = 5;
    hour_at_ = 17;
    year_ = y * 100 + yy;
    year_digits_ = 4;
  } else if (n == 24) {
    // Sun Nov  6 08:49:37 1994
    const int wd = exact_day(p);
    if (wd < 0 || p[3] != ' ' || p[7] != ' ' || p[10] != ' ' || !time_at(p + 11, h, mi, sec) || p[19] != ' ' ||
        !two_digits_at(p + 20, y) || !two_digits_at(p + 22, yy)) {
      return false;
    }
    if (p[8] == ' ') {
      d = digit(p[9]);
      if (d > 9) return false;
    } else if (!two_digits_at(p + 8, d)) {
      return false;
    }
    if ((m = exact_month(p + 4)) == 0) return false;
    wday_ = wd;
    form_ = HttpDateForm::kAsctime;
    day_at_ = p[8] == ' ' ? 9 : 8;
    hour_at_ = 11;
    year_ = y * 100 + yy;
    year_digits_ = 4;
  } else if (n >= 30 && n <= 33) {
    // Sunday, 06-Nov-94 08:49:37 GMT
    const int wd = exact_day(p);
    if (wd < 0) return false;
    const std::string_view tail = kDayLongTail[static_cast<std::size_t>(wd)];
    const std::size_t k = 3 + tail.size();
    if (n != k + 24) return false;
    for (std::size_t j = 0; j < tail.size(); ++j) {
      if (p[3 + j] != tail[j]) return false;
    }
    const char* q = p + k;
    if (q[0] != ',' || q[1] != ' ' || !two_digits_at(q + 2, d) || q[4] != '-' || q[8] != '-' ||
        !two_digits_at(q + 9, y) || q[11] != ' ' || !time_at(q + 12, h, mi, sec) || q[20] != ' ' || q[21] != 'G' ||
        q[22] != 'M' || q[23] != 'T') {
      return false;
    }
    if ((m = exact_month(q + 5)) == 0) return false;
    wday_ = wd;
    form_ = HttpDateForm::kRfc850;
    day_at_ = k + 2;
    hour_at_ = k + 12;
    year_ = y;
    year_digits_ = 2;
  } else {
    return false;
  }
  day_ = d;
  month_ = m;
  hour_ = h;
  minute_ = mi;
  second_ = sec;
  minute_at_ = hour_at_ + 3;
  second_at_ = hour_at_ + 6;
  i_ = n;
  return true;
}

Result<HttpDate, DateError> DateParser::finish(WallTime now) noexcept {
  if (!resolve(now)) return fail(err_);
  HttpDate out;
  out.seconds = std::chrono::sys_seconds{std::chrono::seconds{seconds_}};
  out.time = to_wall(seconds_);
  out.form = form_;
  out.deviations = dev_;
  return out;
}

Result<HttpDate, DateError> DateParser::run(WallTime now) noexcept {
  if (s_.empty()) return fail(DateError{DateErrorCode::kEmpty, 0, '\0'});
  if (canonical_layout()) return finish(now);
  bool ok = false;
  std::uint32_t folded = 0, raw = 0;
  if (name3(folded, raw) && day_index(folded) >= 0) {
    // A day name: short, or long (the short one plus its tail).
    wday_ = day_index(folded);
    bool is_case_exact = raw == canonical(kDayShort[static_cast<std::size_t>(wday_)]);
    i_ = 3;
    bool long_name = false;
    const std::string_view tail = kDayLongTail[static_cast<std::size_t>(wday_)];
    if (s_.size() >= 3 + tail.size() && is_alpha(s_[3])) {
      for (std::size_t k = 0; k < tail.size(); ++k) {
        const char c = s_[3 + k];
        if ((static_cast<unsigned char>(c) | 0x20u) != static_cast<unsigned char>(tail[k])) {
          return fail(DateError{DateErrorCode::kBadDayName, 0, '\0'});
        }
        is_case_exact &= c == tail[k];
      }
      long_name = true;
      i_ = 3 + tail.size();
    }
    if (i_ < s_.size() && is_alpha(s_[i_])) return fail(DateError{DateErrorCode::kBadDayName, 0, '\0'});
    if (!is_case_exact) {
      if (!robust_) return fail(DateError{DateErrorCode::kBadDayName, 0, '\0'});
      dev_.add(DateDeviation::kCase);
    }
    if (peek() == ',') {
      ++i_;
      if (!space()) return fail(err_);
      if (!day2()) return fail(err_);
      // The separator after the day tells IMF-fixdate from rfc850-date. Strict
      // mode wants the form the day name's length announced.
      const bool dash = peek() == '-';
      if (!robust_ && dash != long_name) {
        if (dash) return fail(DateError{DateErrorCode::kUnexpectedChar, static_cast<std::uint32_t>(i_), ' '});
        if (at_end()) return fail(DateError{DateErrorCode::kTruncated, static_cast<std::uint32_t>(i_), '\0'});
        return fail(DateError{DateErrorCode::kUnexpectedChar, static_cast<std::uint32_t>(i_), '-'});
      }
      if (dash != long_name) dev_.add(DateDeviation::kDayNameLength);
      form_ = dash ? HttpDateForm::kRfc850 : HttpDateForm::kImfFixdate;
      ok = dash ? rfc850_rest() : imf_rest();
    } else if (peek() == ' ' || (robust_ && peek() == '\t')) {
      if (long_name) {
        if (!robust_) return fail(DateError{DateErrorCode::kUnexpectedChar, static_cast<std::uint32_t>(i_), ','});
        dev_.add(DateDeviation::kDayNameLength);
      }
      form_ = HttpDateForm::kAsctime;
      ok = space() && month(month_) && asctime_rest();
    } else if (at_end()) {
      return fail(DateError{DateErrorCode::kTruncated, static_cast<std::uint32_t>(i_), '\0'});
    } else {
      return fail(DateError{DateErrorCode::kUnexpectedChar, static_cast<std::uint32_t>(i_), ','});
    }
  } else if (robust_ && digit(s_[0]) <= 9) {
    // No day name: "06 Nov 1994 08:49:37 GMT" or "06-Nov-94 08:49:37 GMT".
    dev_.add(DateDeviation::kMissingDayName);
    if (!day2()) return fail(err_);
    const bool dash = peek() == '-';
    form_ = dash ? HttpDateForm::kRfc850 : HttpDateForm::kImfFixdate;
    ok = dash ? rfc850_rest() : imf_rest();
  } else if (robust_ && name3(folded, raw) && month_index(folded) != 0) {
    // No day name, asctime: "Nov  6 08:49:37 1994".
    dev_.add(DateDeviation::kMissingDayName);
    form_ = HttpDateForm::kAsctime;
    ok = month(month_) && asctime_rest();
  } else {
    return fail(DateError{DateErrorCode::kBadDayName, 0, '\0'});
  }
  if (!ok) return fail(err_);
  if (!at_end()) return fail(DateError{DateErrorCode::kTrailingGarbage, static_cast<std::uint32_t>(i_), '\0'});
  return finish(now);
}

// ---- formatting -----------------------------------------------------------

void put2(char* p, unsigned v) noexcept {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}
void put4(char* p, unsigned v) noexcept {
  put2(p, v / 100);
  put2(p + 2, v % 100);
}

// Years 0000..9999 only: the seconds are clamped into that range.
void write_imf(std::int64_t secs, char* out) noexcept {
  constexpr std::int64_t kFirst = days_from_civil(0, 1, 1) * 86400;
  constexpr std::int64_t kLast = days_from_civil(10000, 1, 1) * 86400 - 1;
  secs = secs < kFirst ? kFirst : secs > kLast ? kLast : secs;
  const std::int64_t days = floor_div<86400>(secs);
  const auto sod = static_cast<unsigned>(secs - days * 86400);
  const Civil c = civil_from_days(days);
  std::memcpy(out, kDayShort[weekday_from_days(days)], 3);
  out[3] = ',';
  out[4] = ' ';
  put2(out + 5, c.day);
  out[7] = ' ';
  std::memcpy(out + 8, kMonth[c.month - 1], 3);
  out[11] = ' ';
  put4(out + 12, static_cast<unsigned>(c.year));
  out[16] = ' ';
  put2(out + 17, sod / 3600);
  out[19] = ':';
  put2(out + 20, sod / 60 % 60);
  out[22] = ':';
  put2(out + 23, sod % 60);
  std::memcpy(out + 25, " GMT", 4);
}

// ---- RFC 3339 ---------------------------------------------------------------

class Rfc3339Parser {
 public:
  explicit Rfc3339Parser(std::string_view s) noexcept : s_(s) {}

  Result<WallTime, DateError> run() noexcept {
    if (s_.empty()) return fail(DateError{DateErrorCode::kEmpty, 0, '\0'});
    unsigned year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
    if (!digits<4>(year, DateErrorCode::kBadYear) || !expect('-')) return fail(err_);
    const std::size_t month_at = i_;
    if (!digits<2>(month, DateErrorCode::kBadMonth) || !expect('-')) return fail(err_);
    const std::size_t day_at = i_;
    if (!digits<2>(day, DateErrorCode::kBadDay)) return fail(err_);
    if (i_ >= s_.size()) return fail(DateError{DateErrorCode::kTruncated, static_cast<std::uint32_t>(i_), '\0'});
    if (s_[i_] != 'T' && s_[i_] != 't' && s_[i_] != ' ') {
      return fail(DateError{DateErrorCode::kUnexpectedChar, static_cast<std::uint32_t>(i_), 'T'});
    }
    ++i_;
    const std::size_t hour_at = i_;
    if (!digits<2>(hour, DateErrorCode::kBadHour) || !expect(':')) return fail(err_);
    const std::size_t minute_at = i_;
    if (!digits<2>(minute, DateErrorCode::kBadMinute) || !expect(':')) return fail(err_);
    const std::size_t second_at = i_;
    if (!digits<2>(second, DateErrorCode::kBadSecond)) return fail(err_);
    std::int64_t nanos = 0;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      const std::size_t start = i_;
      std::int64_t scale = 100'000'000;
      while (i_ < s_.size() && digit(s_[i_]) <= 9) {
        nanos += scale * static_cast<std::int64_t>(digit(s_[i_]));
        scale /= 10;
        ++i_;
      }
      if (i_ == start) return fail(DateError{DateErrorCode::kBadFraction, static_cast<std::uint32_t>(start), '\0'});
    }
    std::int64_t offset = 0;  // seconds east of UTC
    const std::size_t zone_at = i_;
    if (i_ >= s_.size()) return fail(DateError{DateErrorCode::kTruncated, static_cast<std::uint32_t>(i_), '\0'});
    if (s_[i_] == 'Z' || s_[i_] == 'z') {
      ++i_;
    } else if (s_[i_] == '+' || s_[i_] == '-') {
      const bool minus = s_[i_] == '-';
      ++i_;
      unsigned oh = 0, om = 0;
      if (!digits<2>(oh, DateErrorCode::kBadZone) || !expect(':') || !digits<2>(om, DateErrorCode::kBadZone)) {
        return fail(err_);
      }
      if (oh > 23 || om > 59)
        return fail(DateError{DateErrorCode::kOffsetOutOfRange, static_cast<std::uint32_t>(zone_at), '\0'});
      offset = (std::int64_t{oh} * 3600 + om * 60) * (minus ? -1 : 1);
    } else {
      return fail(DateError{DateErrorCode::kBadZone, static_cast<std::uint32_t>(zone_at), '\0'});
    }
    if (i_ != s_.size()) return fail(DateError{DateErrorCode::kTrailingGarbage, static_cast<std::uint32_t>(i_), '\0'});
    if (month < 1 || month > 12)
      return fail(DateError{DateErrorCode::kMonthOutOfRange, static_cast<std::uint32_t>(month_at), '\0'});
    if (day < 1 || day > days_in_month(year, month)) {
      return fail(DateError{DateErrorCode::kDayOutOfRange, static_cast<std::uint32_t>(day_at), '\0'});
    }
    if (hour > 23) return fail(DateError{DateErrorCode::kHourOutOfRange, static_cast<std::uint32_t>(hour_at), '\0'});
    if (minute > 59)
      return fail(DateError{DateErrorCode::kMinuteOutOfRange, static_cast<std::uint32_t>(minute_at), '\0'});
    if (second > 60)
      return fail(DateError{DateErrorCode::kSecondOutOfRange, static_cast<std::uint32_t>(second_at), '\0'});
    const std::int64_t secs = days_from_civil(year, month, day) * 86400 + std::int64_t{hour} * 3600 + minute * 60 +
                              second - offset;
    return to_wall(secs, nanos);
  }

 private:
  // Exactly N digits. Inlined at every call: out of line, its six calls cost
  // a third of the parse.
  template <unsigned N>
  ABIDE_ALWAYS_INLINE bool digits(unsigned& out, DateErrorCode code) noexcept {
    const std::size_t start = i_;
    const auto r = detail::read_decimal<unsigned, kAnyNumber, N>({s_.data() + i_, s_.size() - i_});
    i_ += r.digits;
    if (r.digits < N) {
      err_ = i_ >= s_.size() ? DateError{DateErrorCode::kTruncated, static_cast<std::uint32_t>(i_), '\0'}
                             : DateError{code, static_cast<std::uint32_t>(start), '\0'};
      return false;
    }
    out = r.value;
    return true;
  }
  bool expect(char c) noexcept {
    if (i_ >= s_.size()) {
      err_ = DateError{DateErrorCode::kTruncated, static_cast<std::uint32_t>(i_), '\0'};
      return false;
    }
    if (s_[i_] != c) {
      err_ = DateError{DateErrorCode::kUnexpectedChar, static_cast<std::uint32_t>(i_), c};
      return false;
    }
    ++i_;
    return true;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  DateError err_;
};

}  // namespace

// ---- public functions -----------------------------------------------------

std::string_view to_string(DateDeviation d) noexcept {
  switch (d) {
    case DateDeviation::kCase: return "name or zone not in the grammar's case";
    case DateDeviation::kZoneUtc: return "UTC instead of GMT";
    case DateDeviation::kZoneNumeric: return "+0000 instead of GMT";
    case DateDeviation::kOneDigitDay: return "one-digit day without padding";
    case DateDeviation::kMissingDayName: return "no day name";
    case DateDeviation::kExtraSpace: return "extra whitespace between parts";
    case DateDeviation::kDayNameLength: return "full day name where the abbreviation belongs, or the reverse";
    case DateDeviation::kFourDigitYear: return "four-digit year in an rfc850-date";
    case DateDeviation::kWeekdayMismatch: return "day name does not match the date (the date's numbers are used)";
  }
  return "unknown deviation";
}

std::string to_string(DateDeviations d) {
  std::string out;
  for (const DateDeviation x : kAllDateDeviations) {
    if (!d.has(x)) continue;
    if (!out.empty()) out += "; ";
    out += to_string(x);
  }
  return out;
}

std::string_view to_string(HttpDateForm f) noexcept {
  switch (f) {
    case HttpDateForm::kImfFixdate: return "IMF-fixdate";
    case HttpDateForm::kRfc850: return "rfc850-date";
    case HttpDateForm::kAsctime: return "asctime-date";
  }
  return "unknown form";
}

std::string_view to_string(DateErrorCode c) noexcept {
  switch (c) {
    case DateErrorCode::kEmpty: return "empty value";
    case DateErrorCode::kTruncated: return "value ends before the date is complete";
    case DateErrorCode::kUnexpectedChar: return "unexpected character";
    case DateErrorCode::kBadDayName: return "expected a day name";
    case DateErrorCode::kBadDay: return "expected a two-digit day";
    case DateErrorCode::kBadMonth: return "expected a month";
    case DateErrorCode::kBadYear: return "expected a year";
    case DateErrorCode::kBadHour: return "expected a two-digit hour";
    case DateErrorCode::kBadMinute: return "expected a two-digit minute";
    case DateErrorCode::kBadSecond: return "expected a two-digit second";
    case DateErrorCode::kBadFraction: return "expected a digit after '.'";
    case DateErrorCode::kBadZone: return "expected GMT";
    case DateErrorCode::kTrailingGarbage: return "unexpected text after the date";
    case DateErrorCode::kMonthOutOfRange: return "month out of range";
    case DateErrorCode::kDayOutOfRange: return "day does not exist in that month";
    case DateErrorCode::kHourOutOfRange: return "hour above 23";
    case DateErrorCode::kMinuteOutOfRange: return "minute above 59";
    case DateErrorCode::kSecondOutOfRange: return "second above 60";
    case DateErrorCode::kOffsetOutOfRange: return "time zone offset out of range";
    case DateErrorCode::kWeekdayMismatch: return "day name does not match the date";
  }
  return "invalid date";
}

std::string DateError::message() const {
  std::string out;
  if (code == DateErrorCode::kUnexpectedChar && expected != '\0') {
    out = expected == ' ' ? std::string("expected a space") : std::string("expected '") + expected + "'";
  } else {
    out = to_string(code);
  }
  out += " at byte ";
  out += std::to_string(offset);
  return out;
}

Result<HttpDate, DateError> parse_http_date(std::string_view text, WallTime now, ParseMode mode) noexcept {
  // Offsets are 32-bit; a header value that long is garbage anyway.
  if (text.size() > std::numeric_limits<std::uint32_t>::max()) {
    return fail(DateError{DateErrorCode::kTrailingGarbage, 0, '\0'});
  }
  return DateParser(text, mode).run(now);
}

void format_imf_fixdate(WallTime t, std::span<char, kImfFixdateLength> out) noexcept {
  write_imf(std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count(), out.data());
}

std::string format_imf_fixdate(WallTime t) {
  std::string s(kImfFixdateLength, '\0');
  write_imf(std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count(), s.data());
  return s;
}

std::string format_imf_fixdate(std::chrono::sys_seconds t) {
  std::string s(kImfFixdateLength, '\0');
  write_imf(t.time_since_epoch().count(), s.data());
  return s;
}

Result<WallTime, DateError> parse_rfc3339(std::string_view text) noexcept {
  if (text.size() > std::numeric_limits<std::uint32_t>::max()) {
    return fail(DateError{DateErrorCode::kTrailingGarbage, 0, '\0'});
  }
  return Rfc3339Parser(text).run();
}

std::string format_rfc3339(WallTime t) {
  // Split into whole seconds (toward the past) and 0..999999999 ns without
  // multiplying back (secs * 1e9 overflows near WallTime::min()).
  const std::int64_t count = t.time_since_epoch().count();
  std::int64_t secs = count / 1'000'000'000;
  std::int64_t nanos = count % 1'000'000'000;
  if (nanos < 0) {
    nanos += 1'000'000'000;
    secs -= 1;
  }
  const std::int64_t days = floor_div<86400>(secs);
  const auto sod = static_cast<unsigned>(secs - days * 86400);
  const Civil c = civil_from_days(days);
  char buf[32];
  put4(buf, static_cast<unsigned>(c.year));
  buf[4] = '-';
  put2(buf + 5, c.month);
  buf[7] = '-';
  put2(buf + 8, c.day);
  buf[10] = 'T';
  put2(buf + 11, sod / 3600);
  buf[13] = ':';
  put2(buf + 14, sod / 60 % 60);
  buf[16] = ':';
  put2(buf + 17, sod % 60);
  std::size_t n = 19;
  if (nanos != 0) {
    buf[n++] = '.';
    auto v = static_cast<std::uint32_t>(nanos);
    char frac[9];
    for (int k = 8; k >= 0; --k) {
      frac[k] = static_cast<char>('0' + v % 10);
      v /= 10;
    }
    std::size_t len = 9;
    while (len > 1 && frac[len - 1] == '0') --len;
    std::memcpy(buf + n, frac, len);
    n += len;
  }
  buf[n++] = 'Z';
  return std::string(buf, n);
}

}  // namespace abide
