#include "arg_parse.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <limits>
#include <system_error>

#include "usage_error.h"

namespace cuflight::cli {
namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

enum class IntParse { kOk, kNotInteger, kOverflow };

IntParse ToInt64(std::string_view text, int64_t* value) {
  text = Trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return IntParse::kNotInteger;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  if (ec == std::errc::result_out_of_range) return IntParse::kOverflow;
  if (ec != std::errc() || end != text.data() + text.size()) return IntParse::kNotInteger;
  return IntParse::kOk;
}

int64_t CheckedInteger(std::string_view flag, std::string_view text, std::string_view digits,
                       int64_t multiplier, const Allowed& allowed) {
  int64_t value = 0;
  switch (ToInt64(digits, &value)) {
    case IntParse::kNotInteger:
      throw UsageError(fmt::format("{} {} is not an integer: {}", flag, text, Describe(allowed)));
    case IntParse::kOverflow:
      ThrowOutOfRange(flag, text, Describe(allowed));
    case IntParse::kOk:
      break;
  }
  if (value > std::numeric_limits<int64_t>::max() / multiplier ||
      value < std::numeric_limits<int64_t>::min() / multiplier) {
    ThrowOutOfRange(flag, text, Describe(allowed));
  }
  value *= multiplier;
  if (value < allowed.min || value > allowed.max) ThrowOutOfRange(flag, text, Describe(allowed));
  return value;
}

}  // namespace

std::string Describe(const Allowed& allowed) {
  return fmt::format("{} {}..{} {}", allowed.owner, allowed.min, allowed.max, allowed.unit);
}

void ThrowOutOfRange(std::string_view flag, std::string_view text, std::string_view allowed) {
  throw UsageError(fmt::format("{} {} is out of range: {}", flag, text, allowed));
}

int64_t ParseInteger(std::string_view flag, std::string_view text, const Allowed& allowed) {
  return CheckedInteger(flag, text, text, 1, allowed);
}

int64_t ParseBytes(std::string_view flag, std::string_view text, const Allowed& allowed) {
  std::string_view digits = Trim(text);
  // The unit: letters at the end, any case, after optional spaces.
  size_t unit_start = digits.size();
  while (unit_start > 0 && std::isalpha(static_cast<unsigned char>(digits[unit_start - 1]))) {
    --unit_start;
  }
  std::string unit(digits.substr(unit_start));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  digits = Trim(digits.substr(0, unit_start));
  int64_t multiplier = 1;
  // KB and MB are binary, as the CUDA documentation uses them ("48 KB of shared memory").
  if (unit.empty() || unit == "b") {
    multiplier = 1;
  } else if (unit == "k" || unit == "kb" || unit == "kib") {
    multiplier = 1024;
  } else if (unit == "m" || unit == "mb" || unit == "mib") {
    multiplier = 1024 * 1024;
  } else {
    throw UsageError(
        fmt::format("{} {} is not a byte count: use bytes, or K/KB/KiB or M/MB/MiB "
                    "(1024-based, as in the CUDA documentation), e.g. 98304, 96K, "
                    "96KB, 96 KiB",
                    flag, text));
  }
  if (digits.empty()) {
    throw UsageError(
        fmt::format("{} {} is not a byte count: a number is missing, e.g. 96K", flag, text));
  }
  return CheckedInteger(flag, text, digits, multiplier, allowed);
}

std::array<int64_t, 3> ParseTriple(std::string_view flag, std::string_view text,
                                   std::string_view expected) {
  std::array<int64_t, 3> parts{1, 1, 1};
  std::string_view rest = text;
  for (size_t i = 0;; ++i) {
    const size_t comma = rest.find_first_of(",xX");
    const std::string_view part = rest.substr(0, comma);
    if (i == parts.size()) {
      throw UsageError(
          fmt::format("{} {} has more than 3 parts: expected {}", flag, text, expected));
    }
    switch (ToInt64(part, &parts[i])) {
      case IntParse::kNotInteger:
        throw UsageError(
            fmt::format("{} {} is not a list of integers: expected {}", flag, text, expected));
      case IntParse::kOverflow:
        ThrowOutOfRange(flag, text, expected);
      case IntParse::kOk:
        break;
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return parts;
}

ComputeCapability ParseComputeCapability(std::string_view flag, std::string_view text) {
  const std::string_view trimmed = Trim(text);
  const size_t dot = trimmed.find('.');
  int64_t major = 0;
  int64_t minor = 0;
  const bool ok = dot != std::string_view::npos &&
                  ToInt64(trimmed.substr(0, dot), &major) == IntParse::kOk &&
                  ToInt64(trimmed.substr(dot + 1), &minor) == IntParse::kOk;
  if (!ok || trimmed.substr(dot + 1).size() != 1 || major < 1 || major > 99 || minor < 0 ||
      minor > 9) {
    throw UsageError(fmt::format(
        "{} {} is not a compute capability: expected MAJOR.MINOR such as 8.0 or 9.0", flag, text));
  }
  return {static_cast<int>(major), static_cast<int>(minor)};
}

}  // namespace cuflight::cli
