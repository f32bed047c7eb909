#include "base/clock.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace tmcra {

namespace {

// Howard Hinnant's days_from_civil / civil_from_days.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void CivilFromDays(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}

bool Digits(std::string_view s, size_t pos, size_t count, int& out) {
  if (pos + count > s.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + count; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

bool IsLeap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

}  // namespace

double NowSeconds() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) /
         1e6;
}

namespace {

struct Fields {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  int64_t micros = 0;
  int offset_minutes = 0;
  bool has_zone = false;
};

std::optional<Fields> ParseFields(std::string_view s) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!Digits(s, 0, 4, year) || s.size() < 10 || s[4] != '-' || !Digits(s, 5, 2, month) ||
      s[7] != '-' || !Digits(s, 8, 2, day)) {
    return std::nullopt;
  }
  size_t pos = 10;
  double fraction = 0;
  if (pos < s.size()) {
    if (s[pos] != 'T' && s[pos] != 't' && s[pos] != ' ') return std::nullopt;
    if (!Digits(s, pos + 1, 2, hour) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !Digits(s, pos + 4, 2, minute)) {
      return std::nullopt;
    }
    pos += 6;
    if (pos < s.size() && s[pos] == ':') {
      if (!Digits(s, pos + 1, 2, second)) return std::nullopt;
      pos += 3;
      if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
        size_t end = pos + 1;
        double scale = 0.1;
        while (end < s.size() && s[end] >= '0' && s[end] <= '9') {
          fraction += (s[end] - '0') * scale;
          scale /= 10;
          ++end;
        }
        if (end == pos + 1) return std::nullopt;
        pos = end;
      }
    }
  }
  int offset_minutes = 0;
  bool has_zone = false;
  if (pos < s.size()) {
    has_zone = true;
    if (s[pos] == 'Z' || s[pos] == 'z') {
      ++pos;
    } else if (s[pos] == '+' || s[pos] == '-') {
      const int sign = s[pos] == '-' ? -1 : 1;
      int oh = 0, om = 0;
      if (!Digits(s, pos + 1, 2, oh)) return std::nullopt;
      size_t next = pos + 3;
      if (next < s.size() && s[next] == ':') ++next;
      if (next < s.size()) {
        if (!Digits(s, next, 2, om)) return std::nullopt;
        next += 2;
      }
      if (oh > 23 || om > 59) return std::nullopt;
      offset_minutes = sign * (oh * 60 + om);
      pos = next;
    }
  }
  if (pos != s.size()) return std::nullopt;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  const int max_day = kDays[month - 1] + (month == 2 && IsLeap(year) ? 1 : 0);
  if (day > max_day) return std::nullopt;
  Fields f;
  f.year = year;
  f.month = month;
  f.day = day;
  f.hour = hour;
  f.minute = minute;
  f.second = second;
  f.micros = static_cast<int64_t>(std::llround(fraction * 1e6));
  if (f.micros >= 1000000) f.micros = 999999;
  f.offset_minutes = offset_minutes;
  f.has_zone = has_zone;
  return f;
}

}  // namespace

std::optional<double> ParseIsoTimestamp(std::string_view s) {
  auto f = ParseFields(s);
  if (!f) return std::nullopt;
  const int64_t days =
      DaysFromCivil(f->year, static_cast<unsigned>(f->month), static_cast<unsigned>(f->day));
  const double seconds = static_cast<double>(days * 86400 + f->hour * 3600 + f->minute * 60 +
                                             f->second - f->offset_minutes * 60);
  return seconds + static_cast<double>(f->micros) / 1e6;
}

std::optional<std::string> PydanticTimestamp(std::string_view s) {
  auto f = ParseFields(s);
  if (!f) return std::nullopt;
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", f->year, f->month, f->day,
                        f->hour, f->minute, f->second);
  std::string out(buf, static_cast<size_t>(n));
  if (f->micros != 0) {
    n = std::snprintf(buf, sizeof buf, ".%06lld", static_cast<long long>(f->micros));
    out.append(buf, static_cast<size_t>(n));
  }
  if (f->has_zone) {
    if (f->offset_minutes == 0) {
      out.push_back('Z');
    } else {
      const int abs = f->offset_minutes < 0 ? -f->offset_minutes : f->offset_minutes;
      n = std::snprintf(buf, sizeof buf, "%c%02d:%02d", f->offset_minutes < 0 ? '-' : '+', abs / 60,
                        abs % 60);
      out.append(buf, static_cast<size_t>(n));
    }
  }
  return out;
}

std::string FormatIsoUtc(double epoch_seconds) {
  const double whole = std::floor(epoch_seconds);
  auto micros = static_cast<int64_t>(std::llround((epoch_seconds - whole) * 1e6));
  auto secs = static_cast<int64_t>(whole);
  if (micros >= 1000000) {
    secs += 1;
    micros -= 1000000;
  }
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    days -= 1;
  }
  int64_t y = 0;
  unsigned m = 0, d = 0;
  CivilFromDays(days, y, m, d);
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld",
                        static_cast<long long>(y), m, d, static_cast<long long>(rem / 3600),
                        static_cast<long long>(rem % 3600 / 60), static_cast<long long>(rem % 60));
  std::string out(buf, static_cast<size_t>(n));
  if (micros != 0) {
    n = std::snprintf(buf, sizeof buf, ".%06lld", static_cast<long long>(micros));
    out.append(buf, static_cast<size_t>(n));
  }
  out.push_back('Z');
  return out;
}

}  // namespace tmcra
