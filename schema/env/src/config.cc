#include "cuflight/env/config.h"

#include <array>
#include <bit>
#include <charconv>
#include <cstdint>
#include <exception>
#include <optional>
#include <regex>
#include <string>
#include <system_error>

#include "cuflight/env/attribution.h"

namespace cuflight::env {
namespace {

constexpr size_t kMaxQuotedValue = 120;  // longer values are cut in warnings

constexpr std::string_view kCollector = "CUFLIGHT_COLLECTOR";
constexpr std::string_view kCollectorUid = "CUFLIGHT_COLLECTOR_UID";
constexpr std::string_view kTiming = "CUFLIGHT_TIMING";
constexpr std::string_view kTimingWindowMs = "CUFLIGHT_TIMING_WINDOW_MS";
constexpr std::string_view kTimingPeriodMs = "CUFLIGHT_TIMING_PERIOD_MS";
constexpr std::string_view kTimingNewConfigs = "CUFLIGHT_TIMING_NEW_CONFIGS";
constexpr std::string_view kRingSize = "CUFLIGHT_RING_SIZE";
constexpr std::string_view kOnFull = "CUFLIGHT_ON_FULL";
constexpr std::string_view kFlushMs = "CUFLIGHT_FLUSH_MS";
constexpr std::string_view kStatsMs = "CUFLIGHT_STATS_MS";
constexpr std::string_view kBufferBytes = "CUFLIGHT_BUFFER_BYTES";
constexpr std::string_view kInclude = "CUFLIGHT_INCLUDE";
constexpr std::string_view kExclude = "CUFLIGHT_EXCLUDE";
constexpr std::string_view kSample = "CUFLIGHT_SAMPLE";
constexpr std::string_view kLogLevel = "CUFLIGHT_LOG_LEVEL";
constexpr std::string_view kSpillDir = "CUFLIGHT_SPILL_DIR";
constexpr std::string_view kSpillRotateBytes = "CUFLIGHT_SPILL_ROTATE_BYTES";
constexpr std::string_view kSpillMaxBytes = "CUFLIGHT_SPILL_MAX_BYTES";
constexpr std::string_view kApiErrors = "CUFLIGHT_API_ERRORS";
constexpr std::string_view kApiErrorHistory = "CUFLIGHT_API_ERROR_HISTORY";
constexpr std::string_view kCrashHandler = "CUFLIGHT_CRASH_HANDLER";
constexpr std::string_view kStallMs = "CUFLIGHT_STALL_MS";
constexpr std::string_view kBlackbox = "CUFLIGHT_BLACKBOX";
constexpr std::string_view kAttributionEnv = "CUFLIGHT_ATTRIBUTION_ENV";
constexpr std::string_view kYield = "CUFLIGHT_YIELD";
constexpr std::string_view kYieldMs = "CUFLIGHT_YIELD_MS";
constexpr std::string_view kInternConfigs = "CUFLIGHT_INTERN_CONFIGS";

constexpr std::array<std::string_view, 6> kLogLevelNames = {"trace", "debug", "info",
                                                            "warn",  "error", "off"};

bool IsBlank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

// The boolean spellings every on/off variable takes, in any case: 1/true/on/yes and
// 0/false/off/no; nothing else. The variables that became settings (CUFLIGHT_TIMING,
// CUFLIGHT_API_ERRORS) still take them, after their settings' names.
std::optional<bool> BooleanWord(std::string_view value) {
  for (std::string_view yes : {"1", "true", "on", "yes"}) {
    if (EqualsNoCase(value, yes)) return true;
  }
  for (std::string_view no : {"0", "false", "off", "no"}) {
    if (EqualsNoCase(value, no)) return false;
  }
  return std::nullopt;
}

// The value as a warning shows it: in single quotes, control characters as '?', cut after
// kMaxQuotedValue characters.
std::string Quoted(std::string_view value) {
  std::string out = "'";
  for (size_t i = 0; i < value.size() && i < kMaxQuotedValue; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    out += c < 0x20 || c == 0x7f ? '?' : value[i];
  }
  if (value.size() > kMaxQuotedValue) out += "...";
  out += "'";
  return out;
}

// "NAME='value' <problem>; using the default <fallback>"
std::string Rejected(std::string_view name, std::string_view value, std::string_view problem,
                     std::string_view fallback) {
  std::string out(name);
  out += '=';
  out += Quoted(value);
  out += ' ';
  out += problem;
  out += "; using the default ";
  out += fallback;
  return out;
}

std::string Range(uint64_t lo, uint64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// A whole decimal number, digits only; one beyond uint64_t reads as UINT64_MAX (out of any range).
bool ParseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out, 10);
  if (ptr != end) return false;
  if (ec == std::errc::result_out_of_range) *out = UINT64_MAX;
  return ec == std::errc() || ec == std::errc::result_out_of_range;
}

class Parser {
 public:
  Parser(const std::function<const char*(const char*)>& getenv_fn,
         std::vector<std::string>* warnings)
      : getenv_fn_(getenv_fn), warnings_(warnings) {}

  // The trimmed value, or false when unset or blank.
  bool Get(std::string_view name, std::string_view* value) const {
    const std::string key(name);
    const char* raw = getenv_fn_(key.c_str());
    if (raw == nullptr) return false;
    *value = Trim(raw);
    return !value->empty();
  }

  void ReadString(std::string_view name, std::string* field) const {
    std::string_view value;
    if (Get(name, &value)) field->assign(value);
  }

  void ReadBool(std::string_view name, bool* field) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    if (const std::optional<bool> b = BooleanWord(value)) {
      *field = *b;
      return;
    }
    warnings_->push_back(Rejected(name, value, "is not one of 1/0, true/false, on/off, yes/no",
                                  *field ? "true" : "false"));
  }

  // all, sampled or off; the boolean spellings of earlier versions: 1/true/on/yes (all),
  // 0/false/no (off).
  void ReadTiming(std::string_view name, TimingPolicy* field) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    for (const TimingPolicy p : {TimingPolicy::kAll, TimingPolicy::kSampled, TimingPolicy::kOff}) {
      if (EqualsNoCase(value, schema::TimingPolicyName(p))) {
        *field = p;
        return;
      }
    }
    if (const std::optional<bool> b = BooleanWord(value)) {
      *field = *b ? TimingPolicy::kAll : TimingPolicy::kOff;
      return;
    }
    warnings_->push_back(Rejected(name, value, "is not one of all, sampled, off (or 1/0)",
                                  schema::TimingPolicyName(*field)));
  }

  // The sampled policy's window and period: each in its range, the window at most half the
  // period (else both take their defaults).
  void ReadTimingWindows(uint32_t* window_ms, uint32_t* period_ms) const {
    ReadNumber(kTimingWindowMs, window_ms, kMinTimingWindowMs, kMaxTimingWindowMs);
    ReadNumber(kTimingPeriodMs, period_ms, kMinTimingPeriodMs, kMaxTimingPeriodMs);
    if (uint64_t{*window_ms} * 2 <= *period_ms) return;
    std::string line(kTimingWindowMs);
    line += '=';
    line += std::to_string(*window_ms);
    line += " is more than half of ";
    line += kTimingPeriodMs;
    line += '=';
    line += std::to_string(*period_ms);
    line += "; using the defaults ";
    line += std::to_string(kDefaultTimingWindowMs);
    line += " and ";
    line += std::to_string(kDefaultTimingPeriodMs);
    warnings_->push_back(std::move(line));
    *window_ms = kDefaultTimingWindowMs;
    *period_ms = kDefaultTimingPeriodMs;
  }

  // Names separated by commas or blanks (IsAttributionName each, at most
  // kMaxAttributionExtraNames new ones); default names and repeats are left out.
  void ReadAttributionNames(std::string_view name, std::vector<std::string>* field) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    std::vector<std::string> names;
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t end = rest.find_first_of(", \t\n\r\v\f");
      const std::string_view one = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      if (one.empty()) continue;
      if (!IsAttributionName(one)) {
        warnings_->push_back(Rejected(
            name, value,
            "holds a name that is not 1.." + std::to_string(kMaxAttributionNameBytes) +
                " characters of A-Z, 0-9 and _ (not starting with a digit)",
            "(no names added)"));
        return;
      }
      bool known = false;
      for (std::string_view d : kAttributionVariables) known = known || d == one;
      for (const std::string& n : names) known = known || n == one;
      if (!known) names.emplace_back(one);
    }
    if (names.size() > kMaxAttributionExtraNames) {
      warnings_->push_back(Rejected(
          name, value, "adds more than " + std::to_string(kMaxAttributionExtraNames) + " names",
          "(no names added)"));
      return;
    }
    *field = std::move(names);
  }

  // A whole number in [lo, hi].
  template <typename U>
  void ReadNumber(std::string_view name, U* field, uint64_t lo, uint64_t hi) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    uint64_t n = 0;
    if (!ParseDecimal(value, &n)) {
      warnings_->push_back(Rejected(name, value, "is not a whole number in " + Range(lo, hi),
                                    std::to_string(*field)));
    } else if (n < lo || n > hi) {
      warnings_->push_back(
          Rejected(name, value, "is out of range " + Range(lo, hi), std::to_string(*field)));
    } else {
      *field = static_cast<U>(n);
    }
  }

  // 0 (off) or a whole number of ms in [kMinStallMs, kMaxStallMs]. With kernel timing off stalls
  // are still seen, from the application's synchronising calls (docs/crash.md, "Stalls").
  void ReadStallMs(std::string_view name, uint32_t* field) const {
    std::string_view value;
    const bool given = Get(name, &value);
    if (given) {
      uint64_t n = 0;
      if (!ParseDecimal(value, &n)) {
        warnings_->push_back(
            Rejected(name, value,
                     "is not 0 (off) or a whole number of ms in " + Range(kMinStallMs, kMaxStallMs),
                     std::to_string(*field)));
      } else if (n != 0 && (n < kMinStallMs || n > kMaxStallMs)) {
        warnings_->push_back(Rejected(name, value,
                                      "is not 0 (off) or in " + Range(kMinStallMs, kMaxStallMs),
                                      std::to_string(*field)));
      } else {
        *field = static_cast<uint32_t>(n);
      }
    }
  }

  // A uid in [0, kMaxCollectorUid]; unset: -1 (none).
  void ReadUid(std::string_view name, int64_t* field) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    uint64_t n = 0;
    if (!ParseDecimal(value, &n) || n > kMaxCollectorUid) {
      warnings_->push_back(Rejected(name, value,
                                    "is not a numeric uid in " + Range(0, kMaxCollectorUid),
                                    "(none: only collectors of this user or root are trusted)"));
      return;
    }
    *field = static_cast<int64_t>(n);
  }

  // A power of two in [kMinRingSlots, kMaxRingSlots]; any other number in range is rounded up.
  void ReadRingSize(std::string_view name, uint32_t* field) const {
    const uint32_t before = *field;
    ReadNumber(name, field, kMinRingSlots, kMaxRingSlots);
    if (*field == before || std::has_single_bit(*field)) return;
    std::string_view value;
    Get(name, &value);
    const uint32_t rounded = std::bit_ceil(*field);
    *field = rounded;
    std::string line(name);
    line += '=';
    line += Quoted(value);
    line += " is not a power of two; using " + std::to_string(rounded) + " (rounded up)";
    warnings_->push_back(std::move(line));
  }

  // Bytes with an optional binary suffix: K, M or G (also written KB/KiB, MB/MiB, GB/GiB, any
  // case; all mean powers of 1024) or B; blanks may separate the number and the suffix.
  void ReadBytes(std::string_view name, uint64_t* field, uint64_t lo, uint64_t hi) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    size_t digits = 0;
    while (digits < value.size() && value[digits] >= '0' && value[digits] <= '9') ++digits;
    const std::string_view suffix = Trim(value.substr(digits));
    uint64_t n = 0;
    int shift = -1;
    if (ParseDecimal(value.substr(0, digits), &n)) {
      if (suffix.empty() || EqualsNoCase(suffix, "b")) {
        shift = 0;
      } else {
        constexpr std::array<std::pair<char, int>, 3> kUnits = {{{'k', 10}, {'m', 20}, {'g', 30}}};
        for (const auto& [letter, bits] : kUnits) {
          const std::string unit(1, letter);
          if (EqualsNoCase(suffix, unit) || EqualsNoCase(suffix, unit + "b") ||
              EqualsNoCase(suffix, unit + "i") || EqualsNoCase(suffix, unit + "ib")) {
            shift = bits;
          }
        }
      }
    }
    const std::string fallback = std::to_string(*field);
    if (shift < 0) {
      warnings_->push_back(
          Rejected(name, value,
                   "is not a byte count (a whole number, optionally followed by K, M or G) in " +
                       Range(lo, hi),
                   fallback));
      return;
    }
    if (n > (hi >> shift) || (n << shift) < lo) {
      warnings_->push_back(Rejected(name, value, "is out of range " + Range(lo, hi), fallback));
      return;
    }
    *field = n << shift;
  }

  void ReadOnFull(std::string_view name, OnFull* field) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    for (OnFull policy : {OnFull::kDrop, OnFull::kBlock}) {
      if (EqualsNoCase(value, OnFullName(policy))) {
        *field = policy;
        return;
      }
    }
    warnings_->push_back(Rejected(name, value, "is not one of drop, block", OnFullName(*field)));
  }

  // A setting's name, or a boolean as the variable took before it had settings: true is the
  // default setting, false is off.
  void ReadApiErrors(std::string_view name, ApiErrors* field) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    for (ApiErrors mode :
         {ApiErrors::kOff, ApiErrors::kLaunches, ApiErrors::kDefault, ApiErrors::kAll}) {
      if (EqualsNoCase(value, ApiErrorsName(mode))) {
        *field = mode;
        return;
      }
    }
    if (const std::optional<bool> b = BooleanWord(value)) {
      *field = *b ? ApiErrors::kDefault : ApiErrors::kOff;
      return;
    }
    warnings_->push_back(Rejected(name, value,
                                  "is not one of off, launches, default, all (or 1/0, true/false, "
                                  "on, yes/no)",
                                  ApiErrorsName(*field)));
  }

  void ReadLogLevel(std::string_view name, LogLevel* field) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    for (size_t i = 0; i < kLogLevelNames.size(); ++i) {
      if (EqualsNoCase(value, kLogLevelNames[i])) {
        *field = static_cast<LogLevel>(i);
        return;
      }
    }
    warnings_->push_back(Rejected(name, value, "is not one of trace, debug, info, warn, error, off",
                                  LogLevelName(*field)));
  }

  // A pattern that compiles; otherwise the field is cleared (no filter).
  void ReadPattern(std::string_view name, std::string* field) const;

  // An absolute path; otherwise the field stays empty (no spill).
  void ReadSpillDir(std::string_view name, std::string* field) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    if (value.front() != '/') {
      warnings_->push_back(Rejected(name, value, "is not an absolute path", "(no spill)"));
      return;
    }
    field->assign(value);
  }

  // off (empty), start, or an absolute path (a trigger file).
  void ReadYield(std::string_view name, std::string* field) const {
    std::string_view value;
    if (!Get(name, &value)) return;
    if (EqualsNoCase(value, "off") || BooleanWord(value) == false) {
      field->clear();
    } else if (EqualsNoCase(value, "start")) {
      field->assign("start");
    } else if (value.front() == '/') {
      field->assign(value);
    } else {
      warnings_->push_back(
          Rejected(name, value, "is not off, start or an absolute path (a trigger file)", "off"));
    }
  }

  // Bytes as ReadBytes, and at least `rotate`. The default is raised to `rotate` when that is
  // larger; a bad value, or one below `rotate`, falls back to it with a warning.
  void ReadSpillMaxBytes(std::string_view name, uint64_t* field, uint64_t rotate) const {
    if (*field < rotate) *field = rotate;
    const uint64_t fallback = *field;
    ReadBytes(name, field, kMinSpillMaxBytes, kMaxSpillMaxBytes);
    if (*field >= rotate) return;
    std::string_view value;
    Get(name, &value);
    warnings_->push_back(Rejected(
        name, value, "is below CUFLIGHT_SPILL_ROTATE_BYTES (" + std::to_string(rotate) + ")",
        std::to_string(fallback)));
    *field = fallback;
  }

 private:
  const std::function<const char*(const char*)>& getenv_fn_;
  std::vector<std::string>* warnings_;
};

// ECMAScript, no back-references, and with libstdc++ the breadth-first matcher (linear time in the
// subject, no recursion per character: the depth-first one overflows the stack on a
// 100,000-character name and takes quadratic time on patterns such as ".*a.*b").
std::regex::flag_type PatternFlags() {
  std::regex::flag_type flags = std::regex::ECMAScript | std::regex::optimize;
#if defined(__GLIBCXX__)
  flags |= std::regex_constants::__polynomial;
#endif
  return flags;
}

// Empty when `pattern` compiles; otherwise why not.
std::string PatternError(const std::string& pattern) {
  try {
    const std::regex re(pattern, PatternFlags());
    return {};
  } catch (const std::regex_error& e) {
    std::string why = e.what();
    return why.empty() ? "invalid" : why;
  }
}

std::string RejectedPattern(std::string_view name, std::string_view value, std::string_view why) {
  std::string problem = "is not a valid ECMAScript regular expression (";
  problem += why;
  problem += ")";
  return Rejected(name, value, problem,
                  name == kInclude ? "(no include filter)" : "(no exclude filter)");
}

void Parser::ReadPattern(std::string_view name, std::string* field) const {
  std::string_view value;
  if (!Get(name, &value)) return;
  const std::string pattern(value);
  const std::string why = PatternError(pattern);
  if (why.empty()) {
    *field = pattern;
  } else {
    field->clear();
    warnings_->push_back(RejectedPattern(name, value, why));
  }
}

}  // namespace

std::string_view LogLevelName(LogLevel level) noexcept {
  const auto i = static_cast<size_t>(level);
  return i < kLogLevelNames.size() ? kLogLevelNames[i] : "?";
}

std::string_view OnFullName(OnFull on_full) noexcept {
  return on_full == OnFull::kBlock ? "block" : "drop";
}

std::string_view ApiErrorsName(ApiErrors api_errors) noexcept {
  switch (api_errors) {
    case ApiErrors::kOff:
      return "off";
    case ApiErrors::kLaunches:
      return "launches";
    case ApiErrors::kDefault:
      return "default";
    case ApiErrors::kAll:
      return "all";
  }
  return "?";
}

ParsedConfig ParseConfig(const std::function<const char*(const char*)>& getenv_fn,
                         std::string default_collector_path) noexcept {
  ParsedConfig parsed;
  try {
    Config& c = parsed.config;
    c.collector_path = default_collector_path;
    const Parser p(getenv_fn, &parsed.warnings);
    p.ReadString(kCollector, &c.collector_path);
    p.ReadUid(kCollectorUid, &c.collector_uid);
    p.ReadTiming(kTiming, &c.timing);
    p.ReadTimingWindows(&c.timing_window_ms, &c.timing_period_ms);
    p.ReadBool(kTimingNewConfigs, &c.timing_new_configs);
    p.ReadRingSize(kRingSize, &c.ring_slots);
    p.ReadOnFull(kOnFull, &c.on_full);
    p.ReadNumber(kFlushMs, &c.flush_ms, kMinFlushMs, kMaxFlushMs);
    p.ReadNumber(kStatsMs, &c.stats_ms, kMinStatsMs, kMaxStatsMs);
    p.ReadBytes(kBufferBytes, &c.buffer_bytes, kMinBufferBytes, kMaxBufferBytes);
    p.ReadPattern(kInclude, &c.include_regex);
    p.ReadPattern(kExclude, &c.exclude_regex);
    p.ReadNumber(kSample, &c.sample_every, kMinSampleEvery, kMaxSampleEvery);
    p.ReadLogLevel(kLogLevel, &c.log_level);
    p.ReadSpillDir(kSpillDir, &c.spill_dir);
    p.ReadBytes(kSpillRotateBytes, &c.spill_rotate_bytes, kMinSpillRotateBytes,
                kMaxSpillRotateBytes);
    p.ReadSpillMaxBytes(kSpillMaxBytes, &c.spill_max_bytes, c.spill_rotate_bytes);
    p.ReadApiErrors(kApiErrors, &c.api_errors);
    p.ReadNumber(kApiErrorHistory, &c.api_error_history, uint32_t{0}, kMaxApiErrorHistory);
    p.ReadBool(kCrashHandler, &c.crash_handler);
    p.ReadStallMs(kStallMs, &c.stall_ms);
    p.ReadBool(kBlackbox, &c.blackbox);
    p.ReadAttributionNames(kAttributionEnv, &c.attribution_env);
    p.ReadYield(kYield, &c.yield);
    p.ReadNumber(kYieldMs, &c.yield_ms, uint32_t{0}, kMaxYieldMs);
    p.ReadBool(kInternConfigs, &c.intern_configs);
    return parsed;
  } catch (...) {
    // Out of memory (or a throwing getenv_fn): the defaults, all of them.
    ParsedConfig fallback;
    fallback.config.collector_path = std::move(default_collector_path);
    try {
      fallback.warnings.emplace_back(
          "cannot read the CUFLIGHT_* configuration (out of memory); using the defaults");
    } catch (...) {
    }
    return fallback;
  }
}

namespace {
std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ',';
    out += n;
  }
  return out;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> Describe(const Config& config) noexcept {
  try {
    return {
        {"collector", config.collector_path},
        {"collector_uid",
         config.collector_uid < 0 ? std::string() : std::to_string(config.collector_uid)},
        {"timing", std::string(schema::TimingPolicyName(config.timing))},
        {"timing_window_ms", std::to_string(config.timing_window_ms)},
        {"timing_period_ms", std::to_string(config.timing_period_ms)},
        {"timing_new_configs", config.timing_new_configs ? "true" : "false"},
        {"ring_size", std::to_string(config.ring_slots)},
        {"on_full", std::string(OnFullName(config.on_full))},
        {"flush_ms", std::to_string(config.flush_ms)},
        {"stats_ms", std::to_string(config.stats_ms)},
        {"buffer_bytes", std::to_string(config.buffer_bytes)},
        {"include", config.include_regex},
        {"exclude", config.exclude_regex},
        {"sample", std::to_string(config.sample_every)},
        {"log_level", std::string(LogLevelName(config.log_level))},
        {"spill_dir", config.spill_dir},
        {"spill_rotate_bytes", std::to_string(config.spill_rotate_bytes)},
        {"spill_max_bytes", std::to_string(config.spill_max_bytes)},
        {"api_errors", std::string(ApiErrorsName(config.api_errors))},
        {"api_error_history", std::to_string(config.api_error_history)},
        {"crash_handler", config.crash_handler ? "true" : "false"},
        {"stall_ms", std::to_string(config.stall_ms)},
        {"blackbox", config.blackbox ? "true" : "false"},
        {"attribution_env", JoinNames(config.attribution_env)},
        {"yield", config.yield.empty() ? std::string("off") : config.yield},
        {"yield_ms", std::to_string(config.yield_ms)},
        {"intern_configs", config.intern_configs ? "true" : "false"},
    };
  } catch (...) {
    return {};
  }
}

struct NameFilter::Pattern {
  // The user's pattern P as the whole-subject pattern "[\s\S]*(?:P)[\s\S]*": a search for P, run
  // by regex_match, which the breadth-first matcher does in one pass over the subject.
  std::regex search;
};

NameFilter NameFilter::Make(const Config& config, std::vector<std::string>* warnings) noexcept {
  NameFilter filter;
  const auto compile = [&](std::string_view name, const std::string& pattern,
                           std::shared_ptr<const Pattern>* out) {
    if (pattern.empty()) return;
    try {
      const std::string why = PatternError(pattern);
      if (!why.empty()) {
        if (warnings != nullptr) warnings->push_back(RejectedPattern(name, pattern, why));
        return;
      }
      auto compiled = std::make_shared<Pattern>();
      compiled->search = std::regex("[\\s\\S]*(?:" + pattern + ")[\\s\\S]*", PatternFlags());
      *out = std::move(compiled);
    } catch (...) {
      try {
        if (warnings != nullptr) {
          warnings->push_back(std::string(name) +
                              ": cannot compile the pattern (out of memory); no filter");
        }
      } catch (...) {
      }
    }
  };
  compile(kInclude, config.include_regex, &filter.include_);
  compile(kExclude, config.exclude_regex, &filter.exclude_);
  return filter;
}

bool NameFilter::Accept(std::string_view demangled, std::string_view mangled) const noexcept {
  const std::string_view name = demangled.empty() ? mangled : demangled;
  try {
    const char* first = name.data();
    const char* last = name.data() + name.size();
    if (include_ != nullptr && !std::regex_match(first, last, include_->search)) return false;
    if (exclude_ != nullptr && std::regex_match(first, last, exclude_->search)) return false;
    return true;
  } catch (...) {
    return true;
  }
}

}  // namespace cuflight::env
