#include "cuflight/schema/log_layout.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <system_error>
#include <utility>

namespace cuflight::schema {
namespace {

constexpr std::string_view kActiveSuffix = ".jsonl";
constexpr std::string_view kCompressedSuffix = ".jsonl.zst";
constexpr std::string_view kTempSuffix = ".jsonl.zst.tmp";

bool IsKeptByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '+' || c == '-';
}

// Splits "<base>.<digits>" into base and a segment number >= 1; false if `stem` is not of
// that form.
bool SplitSegmentStem(std::string_view stem, std::string_view* base, uint64_t* index) {
  const size_t dot = stem.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const std::string_view digits = stem.substr(dot + 1);
  if (digits.empty() || digits.size() > 20) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || value == 0) return false;
  *base = stem.substr(0, dot);
  *index = value;
  return true;
}

}  // namespace

std::string SanitizeNameComponent(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() < kMaxNameComponentBytes ? raw.size() : kMaxNameComponentBytes);
  for (char c : raw) {
    if (out.size() == kMaxNameComponentBytes) break;
    out.push_back(IsKeptByte(static_cast<unsigned char>(c)) ? c : '_');
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '-')) out[0] = '_';
  if (out.empty()) out = "unknown";
  return out;
}

std::string_view ExeBaseName(std::string_view exe) {
  while (!exe.empty() && exe.back() == '/') exe.remove_suffix(1);
  const size_t slash = exe.rfind('/');
  return slash == std::string_view::npos ? exe : exe.substr(slash + 1);
}

std::string StartDate(int64_t start_ns) {
  using std::chrono::days;
  using std::chrono::nanoseconds;
  if (start_ns < 0) start_ns = 0;
  const std::chrono::sys_days day =
      std::chrono::floor<days>(std::chrono::sys_time<nanoseconds>(nanoseconds(start_ns)));
  const std::chrono::year_month_day ymd(day);
  char buf[32];
  (void)std::snprintf(buf, sizeof(buf), "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                      static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  return buf;
}

std::string StreamBaseName(std::string_view host, std::string_view exe, int32_t pid,
                           int64_t start_ns) {
  std::string base = SanitizeNameComponent(host);
  base += '-';
  base += SanitizeNameComponent(ExeBaseName(exe));
  base += '-';
  base += std::to_string(pid);
  base += '-';
  base += std::to_string(start_ns);
  return base;
}

std::string StreamBaseName(std::string_view host, std::string_view exe, int32_t pid,
                           int64_t start_ns, uint64_t instance_id, std::string_view owner) {
  std::string base = StreamBaseName(host, exe, pid, start_ns);
  base += '-';
  base += std::to_string(instance_id);
  base += '-';
  base += SanitizeNameComponent(owner);
  return base;
}

bool ParseStreamBaseName(std::string_view base, StreamNameParts* out) {
  // The last components, from the right (host and exe before them may contain '-').
  std::string_view parts[4];
  int found = 0;
  std::string_view rest = base;
  while (found < 4) {
    const size_t dash = rest.rfind('-');
    if (dash == std::string_view::npos) break;
    parts[found++] = rest.substr(dash + 1);
    rest = rest.substr(0, dash);
  }
  const auto number = [](std::string_view text, auto* value) {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
    return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
  };
  StreamNameParts parsed;
  const bool owned =
      found >= 1 && !parts[0].empty() &&
      ((parts[0][0] >= 'a' && parts[0][0] <= 'z') || (parts[0][0] >= 'A' && parts[0][0] <= 'Z'));
  if (owned) {
    // <pid>-<start_ns>-<instance_id>-<owner>, with host and exe before (found == 4 needs a '-'
    // left of pid, which the exe component provides).
    if (found < 4 || !number(parts[1], &parsed.instance_id) ||
        !number(parts[2], &parsed.start_ns) || !number(parts[3], &parsed.pid)) {
      return false;
    }
    parsed.owner = std::string(parts[0]);
  } else if (found < 2 || !number(parts[0], &parsed.start_ns) || !number(parts[1], &parsed.pid)) {
    return false;
  }
  *out = std::move(parsed);
  return true;
}

std::string ActiveFileName(std::string_view base) {
  std::string name(base);
  name += kActiveSuffix;
  return name;
}

std::string SegmentFileName(std::string_view base, uint64_t index, bool compressed) {
  char digits[32];
  (void)std::snprintf(digits, sizeof(digits), ".%06llu", static_cast<unsigned long long>(index));
  std::string name(base);
  name += digits;
  name += compressed ? kCompressedSuffix : kActiveSuffix;
  return name;
}

bool IsDateDirName(std::string_view name) {
  if (name.size() != 10) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool dash = i == 4 || i == 7;
    if (dash ? name[i] != '-' : (name[i] < '0' || name[i] > '9')) return false;
  }
  return true;
}

ParsedLogFileName ParseLogFileName(std::string_view name) {
  ParsedLogFileName parsed;
  std::string_view base;
  uint64_t index = 0;
  if (name.ends_with(kTempSuffix)) {
    if (SplitSegmentStem(name.substr(0, name.size() - kTempSuffix.size()), &base, &index)) {
      parsed.kind = LogFileKind::kTemp;
    }
  } else if (name.ends_with(kCompressedSuffix)) {
    if (SplitSegmentStem(name.substr(0, name.size() - kCompressedSuffix.size()), &base, &index)) {
      parsed.kind = LogFileKind::kCompressedSegment;
    }
  } else if (name.ends_with(kActiveSuffix)) {
    const std::string_view stem = name.substr(0, name.size() - kActiveSuffix.size());
    if (SplitSegmentStem(stem, &base, &index)) {
      parsed.kind = LogFileKind::kPlainSegment;
    } else if (!stem.empty()) {
      parsed.kind = LogFileKind::kActive;
      base = stem;
    }
  }
  if (parsed.kind != LogFileKind::kOther) {
    parsed.base = std::string(base);
    parsed.index = index;
  }
  return parsed;
}

}  // namespace cuflight::schema
