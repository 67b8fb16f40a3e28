#include "cuflight/report/text_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "cuflight/report/kernel_names.h"

namespace cuflight::report {
namespace {

// Three significant digits of value (>= 1) followed by `unit`.
std::string ThreeDigits(double value, std::string_view unit) {
  if (value >= 100) return fmt::format("{:.0f}{}", value, unit);
  if (value >= 10) return fmt::format("{:.1f}{}", value, unit);
  return fmt::format("{:.2f}{}", value, unit);
}

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  // Howard Hinnant's days_from_civil.
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool Digits(std::string_view s, size_t pos, size_t n, int64_t* value) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *value = v;
  return true;
}

std::optional<int64_t> ParseRfc3339(std::string_view s) {
  int64_t year, month, day, hour, minute, second;
  if (!Digits(s, 0, 4, &year) || s.size() < 20 || s[4] != '-' || !Digits(s, 5, 2, &month) ||
      s[7] != '-' || !Digits(s, 8, 2, &day) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      !Digits(s, 11, 2, &hour) || s[13] != ':' || !Digits(s, 14, 2, &minute) || s[16] != ':' ||
      !Digits(s, 17, 2, &second)) {
    return std::nullopt;
  }
  static constexpr std::array<int, 12> kDays = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDays[static_cast<size_t>(month - 1)] ||
      hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  size_t pos = 19;
  int64_t frac_ns = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 9) frac_ns = frac_ns * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (int i = digits; i < 9; ++i) frac_ns *= 10;
  }
  int64_t offset_s = 0;
  const std::string_view zone = s.substr(pos);
  if (zone == "Z" || zone == "z") {
    offset_s = 0;
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    int64_t oh, om;
    if (!Digits(zone, 1, 2, &oh) || !Digits(zone, 4, 2, &om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_s = (oh * 3600 + om * 60) * (zone[0] == '+' ? 1 : -1);
  } else {
    return std::nullopt;
  }
  const int64_t days = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  constexpr int64_t kMaxSecs = std::numeric_limits<int64_t>::max() / 1000000000 - 1;
  if (secs < -kMaxSecs || secs > kMaxSecs) return std::nullopt;
  return secs * 1000000000 + frac_ns;
}

std::optional<int64_t> ParseEpochSeconds(std::string_view s) {
  if (s.empty()) return std::nullopt;
  size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  if (whole.empty()) return std::nullopt;
  int64_t secs = 0;
  const auto [ptr, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), secs);
  if (ec != std::errc() || ptr != whole.data() + whole.size() || secs < 0 ||
      secs > std::numeric_limits<int64_t>::max() / 1000000000 - 1) {
    return std::nullopt;
  }
  int64_t frac_ns = 0;
  if (dot != std::string_view::npos) {
    const std::string_view frac = s.substr(dot + 1);
    if (frac.empty() || frac.size() > 9) return std::nullopt;
    int64_t v = 0;
    if (!Digits(frac, 0, frac.size(), &v)) return std::nullopt;
    frac_ns = v;
    for (size_t i = frac.size(); i < 9; ++i) frac_ns *= 10;
  }
  return secs * 1000000000 + frac_ns;
}

}  // namespace

std::string Plural(int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, PluralWord(n, one, many));
}

std::string FormatDuration(uint64_t ns) {
  const double v = static_cast<double>(ns);
  if (ns < 1000) return fmt::format("{}ns", ns);
  // Rounding to three digits can carry into the next unit (999.6us -> "1000us"): step up then.
  if (v < 999.5e3) return ThreeDigits(v / 1e3, "us");
  if (v < 999.5e6) return ThreeDigits(v / 1e6, "ms");
  return ThreeDigits(v / 1e9, "s");
}

std::string FormatPercent(double fraction) {
  const double pct = std::floor(fraction * 100.0 + 0.5);
  return fmt::format("{:.0f}%", pct);
}

std::string FormatShare(double fraction) {
  const double pct = fraction * 100.0;
  if (pct <= 0) return "0%";
  if (pct >= 10) return fmt::format("{:.0f}%", pct);
  // Two significant digits: 1 decimal from 1%, 2 from 0.1%, ...
  int decimals = 1;
  for (double p = pct; p < 1 && decimals < 6; p *= 10) ++decimals;
  return fmt::format("{:.{}f}%", pct, decimals);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes % 1024 == 0) return fmt::format("{} KiB", bytes / 1024);
  const int64_t tenths = bytes * 10 / 1024;  // floored
  if (tenths % 10 == 0) return fmt::format("{} KiB", tenths / 10);
  return fmt::format("{}.{} KiB", tenths / 10, tenths % 10);
}

std::string_view LimiterLabel(const schema::OccupancyFields& f) {
  if (!Limited(f)) return "none";
  switch (f.limiting_resource) {
    case schema::Resource::kRegisters:
      return "regs";
    case schema::Resource::kSharedMem:
      return "smem";
    default:
      return schema::ResourceName(f.limiting_resource);
  }
}

std::string FormatDim3(const schema::Dim3& d) {
  if (d.y == 1 && d.z == 1) return fmt::format("{}", d.x);
  if (d.z == 1) return fmt::format("{}x{}", d.x, d.y);
  return fmt::format("{}x{}x{}", d.x, d.y, d.z);
}

std::string FormatStreamId(uint64_t stream) {
  if (stream == 0xffffffffu) return "?";
  if (stream > 0xffffffffu) return fmt::format("{:#x}", stream);
  return fmt::format("{}", stream);
}

std::string ShortenKernelName(std::string_view name, size_t width) {
  return ShortenKernelNames({std::string(name)}, width).names.front();
}

std::vector<std::string> WrapWords(std::string_view text, size_t width, std::string_view first,
                                   std::string_view rest) {
  std::vector<std::string> lines;
  std::string line(first);
  bool empty = true;  // no word on `line` yet
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t space = text.find(' ', pos);
    const std::string_view word =
        text.substr(pos, space == std::string_view::npos ? std::string_view::npos : space - pos);
    pos = space == std::string_view::npos ? text.size() : space + 1;
    if (word.empty()) continue;
    if (!empty && line.size() + 1 + word.size() > width) {
      lines.push_back(std::move(line));
      line = std::string(rest);
      empty = true;
    }
    if (!empty) line += ' ';
    line += word;
    empty = false;
  }
  lines.push_back(std::move(line));
  return lines;
}

std::string DidYouMean(std::string_view input, const std::vector<std::string>& names) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  // Optimal string alignment distance (Damerau-Levenshtein without repeated edits of a substring).
  auto distance = [&](std::string_view a, std::string_view b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
            lower(a[i - 2]) == lower(b[j - 1])) {
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.size()][b.size()];
  };
  constexpr size_t kMaxEdits = 2;
  // Fewer edits first; between equals, a name with the same first letter (typos rarely hit it).
  size_t best = 2 * (kMaxEdits + 1);
  size_t best_edits = 0;
  const std::string* best_name = nullptr;
  for (const std::string& name : names) {
    const size_t d = distance(input, name);
    const bool same_start = !input.empty() && !name.empty() && lower(input[0]) == lower(name[0]);
    const size_t score = 2 * d + (same_start ? 0 : 1);
    if (d <= kMaxEdits && score < best) {
      best = score;
      best_edits = d;
      best_name = &name;
    }
  }
  if (best_name == nullptr || best_edits == 0 || 2 * best_edits >= input.size()) return "";
  return "; did you mean " + *best_name + "?";
}

std::optional<int64_t> ParseTimeBound(std::string_view text) {
  if (text.find('-') != std::string_view::npos || text.find('T') != std::string_view::npos) {
    return ParseRfc3339(text);
  }
  return ParseEpochSeconds(text);
}

std::string CsvField(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (const char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace cuflight::report
