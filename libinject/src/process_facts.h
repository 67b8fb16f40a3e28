// Facts about the process for its process_start event, read once from /proc and libc, bounded
// to what one process_start line may hold, and the event made from them.
#ifndef CUFLIGHT_LIBINJECT_SRC_PROCESS_FACTS_H_
#define CUFLIGHT_LIBINJECT_SRC_PROCESS_FACTS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuflight/schema/events.h"

namespace cuflight::inject {

struct ProcessFacts {
  int32_t pid = 0;  // getpid(): the pid in the process's own pid namespace
  int32_t ppid = 0;
  int64_t uid = 0;
  std::string exe;  // /proc/self/exe, or "" when unreadable
  std::vector<std::string> argv;
  std::string hostname;
  int64_t start_ns = 0;  // process start, CLOCK_REALTIME ns (from /proc/self/stat and btime)
  int32_t cuda_driver_version = 0;
  int32_t cupti_version = 0;
  // kActivityApiSubscriber or kActivityApiGlobal (cupti_api.h); nullptr: unknown (not written).
  const char* cupti_activity_api = nullptr;
  std::vector<std::pair<std::string, std::string>> config;
  // Random and never 0 (getrandom(2); a mix of clocks, pid and addresses when it fails): a new
  // one for every process image, since the library is loaded again after exec() and a fork()ed
  // child reads its own facts.
  uint64_t instance_id = 0;
  uint64_t pid_ns = 0;  // st_ino of /proc/self/ns/pid; 0 when unreadable
  // Who the process is to a scheduler (attribution.h): derived fields, then the allow-listed
  // environment variables.
  std::vector<std::pair<std::string, std::string>> attribution;
  // ReadAttribution dropped entries to keep the attribution within kMaxAttributionJsonBytes
  // (BoundProcessFacts then names "attribution" in `truncated`).
  bool attribution_cut = false;
  // Fields BoundProcessFacts shortened, in the schema's order ("argv", "exe", "config",
  // "attribution").
  std::vector<std::string> truncated;
};

// pid, ppid, uid, exe, argv, hostname, start_ns, instance_id and pid_ns of the calling process.
// Never throws except std::bad_alloc.
ProcessFacts ReadProcessFacts();

// facts->attribution from the environment (getenv) and /proc/self/cgroup, with `extra_names`
// (Config::attribution_env) after the default variables. Never throws: should anything fail
// (memory), the attribution is left empty.
// Entries are dropped from the end (environment variables before derived fields) while their
// JSON text would pass kMaxAttributionJsonBytes.
void ReadAttribution(ProcessFacts* facts, const std::vector<std::string>& extra_names) noexcept;

// The most JSON text the attribution's members may take in a process_start line: half of it, so
// that a hostile environment never crowds out exe and argv.
inline constexpr size_t kMaxAttributionJsonBytes = 8 * 1024;

// A fresh random instance id, never 0. Never throws.
uint64_t NewInstanceId() noexcept;

// The process_start event of `facts`. The event points into `facts` and into this object: both
// must outlive its use. Never throws: if memory runs out, the event has no argv, config or
// truncated (the process is still identified).
class ProcessStartView {
 public:
  explicit ProcessStartView(const ProcessFacts& facts) noexcept;
  schema::ProcessStartEvent Event(const schema::Header& header) const noexcept;

 private:
  const ProcessFacts& facts_;
  std::vector<std::string_view> argv_;
  std::vector<std::pair<std::string_view, std::string_view>> config_;
  std::vector<std::pair<std::string_view, std::string_view>> attribution_;
  std::vector<std::string_view> truncated_;
};

// Shortens the facts so that their process_start line (with any header) takes at most
// `max_line_bytes` bytes, '\n' included: first argv (leading arguments kept, the cut one ending
// in schema::kTruncationMarker, the rest dropped), then exe (its end kept, after the marker),
// then the config values (each cut to a few hundred bytes, ending in the marker), then the
// attribution (its last entries dropped: environment variables before derived fields). Each field cut
// is named in facts->truncated. Facts that fit are left as they are. May throw std::bad_alloc.
void BoundProcessFacts(ProcessFacts* facts, size_t max_line_bytes = schema::kMaxProcessStartBytes);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_PROCESS_FACTS_H_
