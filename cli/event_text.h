// One event as one human-readable line, for `cuflight tail`.
#ifndef CUFLIGHT_CLI_EVENT_TEXT_H_
#define CUFLIGHT_CLI_EVENT_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "cuflight/schema/events.h"
#include "cuflight/schema/join_key.h"

namespace cuflight::cli {

// "<HH:MM:SS.mmm local time of ts_ns> pid <pid> <type> <the fields that matter>", without a
// newline, e.g.
//   12:04:31.207 pid 4242 kernel vecadd(float*, int) grid 1024x1x1 block 256x1x1 regs 64
//       smem 9216 occupancy 0.50 (registers) device 0 stream 7 corr 17
// (one line). A stall event says what each listed stream waits on:
//   12:05:13.002 pid 4242 stall STALLED 42.0 s: device 0 stream 14 waits on spin(int volatile*)
//       grid 1x1x1 block 32x1x1 occupancy 0.02 launched 42.0 s ago corr 17 (+2 queued); 1 stream
//       stalled, 0 kernels finished since the last report
// Streams as the report shows them (report::FormatStreamId). Occupancy below 1 names
// its limiting resource; at 1 none limits it. A kernel_time names `launch_stream` when given (the
// stream its kernel event named: LaunchStreams), else its own. Control characters in names are
// shown as '?'. Types this build prints no fields for show their seq. Never throws except
// std::bad_alloc.
std::string EventText(const schema::OwnedEvent& event,
                      std::optional<uint64_t> launch_stream = std::nullopt);

// The streams of the latest kernel events (at most kCapacity, the oldest forgotten first), so
// that the kernel_time line of a launch names the stream its kernel line named, also in logs of
// older producers whose kernel events held a CUstream handle and kernel_time CUPTI's id. Keyed
// by `process`, the caller's number of the sending process (as EventFilter::Accept takes it:
// processes that share a pid have two), and schema::JoinKey.
class LaunchStreams {
 public:
  static constexpr size_t kCapacity = 1 << 16;
  void Remember(uint32_t process, const schema::OwnedKernelEvent& kernel);
  // The stream the kernel event of `time` named, if remembered.
  std::optional<uint64_t> Of(uint32_t process, const schema::OwnedKernelTimeEvent& time) const;

 private:
  using Key = std::pair<uint32_t, schema::JoinKey>;
  std::map<Key, uint64_t> streams_;
  std::deque<Key> order_;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_EVENT_TEXT_H_
