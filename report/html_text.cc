#include "html_text.h"

#include <fmt/format.h>

#include <array>
#include <ctime>

#include "cuflight/report/text_format.h"

namespace cuflight::report::html {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3Fu);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not valid.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

}  // namespace

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
            out += kReplacement;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    const size_t n = Utf8Length(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string FormatUtc(int64_t ns) {
  if (ns <= 0) return "-";
  const std::time_t seconds = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  if (gmtime_r(&seconds, &tm) == nullptr) return "-";
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string FormatUtcSpan(int64_t first_ns, int64_t last_ns) {
  if (first_ns <= 0 || last_ns <= 0) return FormatUtc(first_ns) + " to " + FormatUtc(last_ns);
  auto parts = [](int64_t ns, std::tm* tm) {
    const std::time_t seconds = static_cast<std::time_t>(ns / 1000000000);
    return gmtime_r(&seconds, tm) != nullptr;
  };
  std::tm a{};
  std::tm b{};
  if (!parts(first_ns, &a) || !parts(last_ns, &b)) return "-";
  auto ms = [](int64_t ns) { return (ns % 1000000000) / 1000000; };
  const std::string date =
      fmt::format("{:04}-{:02}-{:02}", a.tm_year + 1900, a.tm_mon + 1, a.tm_mday);
  const std::string end_date =
      fmt::format("{:04}-{:02}-{:02}", b.tm_year + 1900, b.tm_mon + 1, b.tm_mday);
  const std::string from =
      fmt::format("{} {:02}:{:02}:{:02}.{:03}", date, a.tm_hour, a.tm_min, a.tm_sec, ms(first_ns));
  const std::string to = fmt::format("{}{:02}:{:02}:{:02}.{:03}",
                                     end_date == date ? std::string() : end_date + " ", b.tm_hour,
                                     b.tm_min, b.tm_sec, ms(last_ns));
  const uint64_t span = last_ns > first_ns ? static_cast<uint64_t>(last_ns - first_ns) : 0;
  return fmt::format("{} to {} UTC ({})", from, to, FormatDuration(span));
}

std::string FormatCount(uint64_t n) {
  std::string digits = fmt::format("{}", n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Coord(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string_view ResourceColor(schema::Resource r) {
  switch (r) {
    case schema::Resource::kRegisters:
      return kBlue;
    case schema::Resource::kSharedMem:
      return kOrange;
    case schema::Resource::kWarps:
      return kGreen;
    case schema::Resource::kBlocks:
      return kPurple;
    case schema::Resource::kBarriers:
      return kSky;
    case schema::Resource::kCluster:
      return kVermillion;
    case schema::Resource::kOther:
      return kGrey;
  }
  return kGrey;
}

std::string_view KernelColor(int rank) {
  static constexpr std::array<std::string_view, kKernelColorCount> kColors = {
      kBlue, kOrange, kGreen, kPurple, kSky, kVermillion, kYellow};
  if (rank < 0 || rank >= kKernelColorCount) return kGrey;
  return kColors[static_cast<size_t>(rank)];
}

}  // namespace cuflight::report::html
