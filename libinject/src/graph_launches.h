// The CUDA graph launches the application made (cuGraphLaunch), for stall detection only: no
// launch callback sees a graph's kernel nodes (their kernel events come from activity records),
// so without this a hang inside a graph (torch.compile mode="reduce-overhead", vLLM) would name
// the next eager kernel on the stream, or nothing (stall_tracker.h, point 11).
//
// 1. What is kept: the launch's stream and context (CUPTI's ids), its correlation id (the one
//    CUPTI gives the records of the graph's kernel nodes: cupti_activity.h, CUpti_ActivityKernel10
//    .correlationId "identical to the correlation ID in the driver or runtime API activity record
//    that launched the kernel"; CUpti_ActivityGraphTrace2.correlationId: "The correlation ID of the
//    graph launch"), CUPTI's id of the executable graph (cuptiGetGraphExecId; 0 when CUPTI could
//    not say), the thread and the time. A graph launched into a stream being captured does not
//    run; it is not logged.
// 2. A ring of kEntries entries written by the launching threads (a fetch_add for the position, a
//    per-entry sequence number: 2 x position + 1 while written, + 2 once written) and read by the
//    sender thread in order. A reader that fell more than kEntries behind skips what was
//    overwritten (lost()). No allocation, no lock; a graph launch is not the kernel launch hot
//    path (one per training step with CUDA graphs), but it costs no more than a few stores.
// 3. Not through the launch ring: a graph launch makes no event of its own, and the launch ring's
//    drops are seq numbers the collector counts lost.
#ifndef CUFLIGHT_LIBINJECT_SRC_GRAPH_LAUNCHES_H_
#define CUFLIGHT_LIBINJECT_SRC_GRAPH_LAUNCHES_H_

#include <atomic>
#include <cstdint>

namespace cuflight::inject {

struct GraphLaunch {
  uint64_t context = 0;  // CUPTI's ids, as in kernel events
  uint64_t stream = 0;
  uint32_t correlation_id = 0;  // CUPTI's (32 bits, wrapping)
  uint32_t graph_exec_id = 0;   // cuptiGetGraphExecId; 0: unknown
  int32_t tid = 0;
  int32_t device = -1;
  int64_t ts_ns = 0;  // CLOCK_REALTIME at the launch's exit callback
};

class GraphLaunchLog {
 public:
  static constexpr uint64_t kEntries = 256;

  GraphLaunchLog() = default;
  GraphLaunchLog(const GraphLaunchLog&) = delete;
  GraphLaunchLog& operator=(const GraphLaunchLog&) = delete;

  // A launching thread. Never blocks.
  void Add(const GraphLaunch& launch) noexcept;
  // The sender thread: the next launch not read yet; false when there is none (or the next one is
  // still being written).
  bool Next(GraphLaunch* out) noexcept;
  uint64_t lost() const { return lost_; }

 private:
  struct Entry {
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> context{0};
    std::atomic<uint64_t> stream{0};
    std::atomic<uint32_t> correlation_id{0};
    std::atomic<uint32_t> graph_exec_id{0};
    std::atomic<int32_t> tid{0};
    std::atomic<int32_t> device{-1};
    std::atomic<int64_t> ts_ns{0};
  };
  std::atomic<uint64_t> head_{0};
  Entry entries_[kEntries];
  uint64_t next_ = 0;  // sender thread's
  uint64_t lost_ = 0;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_GRAPH_LAUNCHES_H_
