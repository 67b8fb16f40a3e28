#include "process_facts.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "attribution.h"
#include "cuflight/schema/encoder.h"
#include "mix64.h"

namespace cuflight::inject {
namespace {

// The file's bytes, at most `max_bytes` of them.
std::string ReadFile(const char* path, size_t max_bytes = SIZE_MAX) {
  std::string out;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; out.size() < max_bytes && (n = read(fd, buf, sizeof(buf))) > 0;) {
    out.append(buf, std::min(static_cast<size_t>(n), max_bytes - out.size()));
  }
  close(fd);
  return out;
}

// Process start from /proc/self/stat field 22 (clock ticks after boot) and /proc/stat btime.
int64_t ProcessStartNs() {
  const std::string stat = ReadFile("/proc/self/stat");
  const size_t paren = stat.rfind(')');  // comm may contain spaces and parentheses
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) start_ticks = std::strtoull(field.c_str(), nullptr, 10);
  }
  const std::string proc_stat = ReadFile("/proc/stat");
  const size_t pos = proc_stat.find("\nbtime ");
  if (pos == std::string::npos || start_ticks == 0) return 0;
  const long long btime = std::strtoll(proc_stat.c_str() + pos + 7, nullptr, 10);
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  if (ticks_per_second <= 0) return 0;
  return btime * 1000000000LL +
         static_cast<int64_t>(start_ticks) * (1000000000LL / ticks_per_second);
}

uint64_t PidNamespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

int64_t ClockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// The longest prefix of `s` of at most `max_bytes` bytes that does not end inside a UTF-8
// sequence (the encoder would turn a cut sequence into U+FFFD).
std::string_view Utf8Prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// The same for the end of `s`: a suffix that does not start inside a UTF-8 sequence.
std::string_view Utf8Suffix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t start = s.size() - max_bytes;
  while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) ++start;
  return s.substr(start);
}

// The longest line the facts' process_start can be: the header's numbers at their widest.
size_t EncodedSize(const ProcessFacts& facts, size_t limit) {
  const ProcessStartView view(facts);
  schema::Header header;
  header.ts_ns = std::numeric_limits<int64_t>::max();
  header.pid = std::numeric_limits<int32_t>::min();
  header.seq = std::numeric_limits<uint64_t>::max();
  const schema::ProcessStartEvent event = view.Event(header);
  std::string buf;
  for (size_t cap = limit;; cap *= 4) {
    buf.resize(cap);
    const size_t n = schema::Encode(event, buf.data(), buf.size());
    if (n != 0) return n;
    if (cap > (size_t{1} << 30)) return std::numeric_limits<size_t>::max();
  }
}

size_t RawBytes(const std::vector<std::string>& list) {
  size_t n = 0;
  for (const std::string& s : list) n += s.size();
  return n;
}

// argv cut to `budget` bytes of its strings: whole leading arguments, then the next one cut
// and ending in the marker, the rest dropped.
std::vector<std::string> CutArgv(const std::vector<std::string>& argv, size_t budget) {
  std::vector<std::string> out;
  size_t used = 0;
  for (const std::string& a : argv) {
    if (used + a.size() <= budget) {
      out.push_back(a);
      used += a.size();
      continue;
    }
    std::string cut(Utf8Prefix(a, budget - used));
    cut += schema::kTruncationMarker;
    out.push_back(std::move(cut));
    break;
  }
  return out;
}

// A config value longer than this is cut to it when config must shrink.
constexpr size_t kConfigValueBytes = 256;

}  // namespace

uint64_t NewInstanceId() noexcept {
  uint64_t id = 0;
  if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(id))) id = 0;
  if (id == 0) {
    // No entropy yet (early boot) or no getrandom: clocks, ids and addresses (ASLR), mixed.
    int on_stack = 0;
    id = Mix64(
        static_cast<uint64_t>(ClockNs(CLOCK_REALTIME)) ^
        Mix64(static_cast<uint64_t>(ClockNs(CLOCK_MONOTONIC))) ^
        Mix64((static_cast<uint64_t>(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&on_stack)) ^
        Mix64(reinterpret_cast<uintptr_t>(&NewInstanceId)));
  }
  return id != 0 ? id : 1;
}

ProcessStartView::ProcessStartView(const ProcessFacts& facts) noexcept : facts_(facts) {
  try {
    argv_.assign(facts.argv.begin(), facts.argv.end());
    config_.reserve(facts.config.size());
    for (const auto& [k, v] : facts.config) config_.emplace_back(k, v);
    attribution_.reserve(facts.attribution.size());
    for (const auto& [k, v] : facts.attribution) attribution_.emplace_back(k, v);
    truncated_.assign(facts.truncated.begin(), facts.truncated.end());
  } catch (...) {
    argv_.clear();
    config_.clear();
    attribution_.clear();
    truncated_.clear();
  }
}

schema::ProcessStartEvent ProcessStartView::Event(const schema::Header& header) const noexcept {
  schema::ProcessStartEvent event;
  event.header = header;
  event.exe = facts_.exe;
  event.argv = argv_;
  event.hostname = facts_.hostname;
  event.start_ns = facts_.start_ns;
  event.cuflight_version = CUFLIGHT_VERSION;
  event.cuda_driver_version = facts_.cuda_driver_version;
  event.cupti_version = facts_.cupti_version;
  if (facts_.cupti_activity_api != nullptr) event.cupti_activity_api = facts_.cupti_activity_api;
  event.ppid = facts_.ppid;
  event.uid = facts_.uid;
  event.config = config_;
  event.instance_id = facts_.instance_id;
  event.pid_ns = facts_.pid_ns;
  event.attribution = attribution_;
  event.truncated = truncated_;
  return event;
}

namespace {

// JSON text of one member of an object of strings: "k":"v", with its ',' (the values are
// SafeAttributionValue's: only '"' and '\\' take an escape).
size_t MemberJsonBytes(std::string_view k, std::string_view v) {
  size_t n = k.size() + v.size() + 6;
  for (std::string_view s : {k, v}) {
    for (char c : s) n += c == '"' || c == '\\' ? 1 : 0;
  }
  return n;
}

// `,"truncated":["attribution"]`: room kept for the name when ReadAttribution cut.
constexpr size_t kAttributionNameRoom = 32;

void BoundFacts(ProcessFacts* facts, size_t max_line_bytes) {
  const auto fits = [&] { return EncodedSize(*facts, max_line_bytes) <= max_line_bytes; };
  if (fits()) return;
  // Each cut names its field in `truncated`, which the line then carries too.
  facts->truncated.clear();
  // The largest `keep` in [0, most] for which `apply(keep)` fits: the line grows with `keep`.
  // About log2(most) encodings of at most max_line_bytes each, once per process.
  const auto largest_fitting = [&](size_t most, const auto& apply) {
    size_t lo = 0;
    size_t hi = most;
    apply(lo);
    if (!fits()) return false;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo + 1) / 2;
      apply(mid);
      if (fits()) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    apply(lo);
    return true;
  };

  if (!facts->argv.empty()) {
    const std::vector<std::string> original = std::move(facts->argv);
    facts->truncated.emplace_back("argv");
    if (largest_fitting(RawBytes(original),
                        [&](size_t keep) { facts->argv = CutArgv(original, keep); })) {
      return;
    }
  }

  if (!facts->exe.empty()) {
    const std::string original = std::move(facts->exe);
    facts->truncated.emplace_back("exe");
    const auto keep_end = [&](size_t keep) {
      // The end of the path is kept: its file name names the log.
      facts->exe.assign(schema::kTruncationMarker);
      facts->exe += Utf8Suffix(original, keep);
    };
    if (largest_fitting(original.size(), keep_end)) return;
  }

  bool cut_config = false;
  for (auto& [name, value] : facts->config) {
    if (value.size() <= kConfigValueBytes) continue;
    value =
        std::string(Utf8Prefix(value, kConfigValueBytes)) + std::string(schema::kTruncationMarker);
    cut_config = true;
  }
  if (cut_config) facts->truncated.emplace_back("config");
  if (fits() || facts->attribution.empty()) return;

  // The attribution's entries from the end: the environment variables, then derived fields.
  const std::vector<std::pair<std::string, std::string>> original =
      std::move(facts->attribution);
  facts->truncated.emplace_back("attribution");
  largest_fitting(original.size(), [&](size_t keep) {
    facts->attribution.assign(original.begin(), original.begin() + static_cast<ptrdiff_t>(keep));
  });
}

}  // namespace

void BoundProcessFacts(ProcessFacts* facts, size_t max_line_bytes) {
  if (!facts->attribution_cut) return BoundFacts(facts, max_line_bytes);
  BoundFacts(facts, max_line_bytes - std::min(max_line_bytes, kAttributionNameRoom));
  if (facts->truncated.empty() || facts->truncated.back() != "attribution") {
    facts->truncated.emplace_back("attribution");
  }
}

void ReadAttribution(ProcessFacts* facts, const std::vector<std::string>& extra_names) noexcept {
  try {
    const CgroupIds ids = ParseCgroupIds(ReadFile("/proc/self/cgroup", kMaxCgroupFileBytes));
    facts->attribution = MakeAttribution([](const char* name) { return getenv(name); },
                                         extra_names, ids);
    size_t bytes = 2;  // {}
    size_t keep = 0;
    for (const auto& [k, v] : facts->attribution) {
      bytes += MemberJsonBytes(k, v);
      if (bytes > kMaxAttributionJsonBytes) break;
      ++keep;
    }
    facts->attribution_cut = keep < facts->attribution.size();
    facts->attribution.resize(keep);
  } catch (...) {
    facts->attribution.clear();
  }
}

ProcessFacts ReadProcessFacts() {
  ProcessFacts facts;
  facts.pid = static_cast<int32_t>(getpid());
  facts.ppid = static_cast<int32_t>(getppid());
  facts.uid = static_cast<int64_t>(getuid());
  char exe[PATH_MAX + 1] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, PATH_MAX);
  if (n > 0) facts.exe.assign(exe, static_cast<size_t>(n));
  const std::string cmdline = ReadFile("/proc/self/cmdline");
  size_t start = 0;
  while (start < cmdline.size()) {
    size_t end = cmdline.find('\0', start);
    if (end == std::string::npos) end = cmdline.size();
    facts.argv.emplace_back(cmdline, start, end - start);
    start = end + 1;
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) facts.hostname = host;
  facts.start_ns = ProcessStartNs();
  facts.instance_id = NewInstanceId();
  facts.pid_ns = PidNamespace();
  return facts;
}

}  // namespace cuflight::inject
