#include "graph_launches.h"

namespace cuflight::inject {

void GraphLaunchLog::Add(const GraphLaunch& launch) noexcept {
  const uint64_t pos = head_.fetch_add(1, std::memory_order_relaxed);
  Entry& e = entries_[pos % kEntries];
  e.seq.store(2 * pos + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.context.store(launch.context, std::memory_order_relaxed);
  e.stream.store(launch.stream, std::memory_order_relaxed);
  e.correlation_id.store(launch.correlation_id, std::memory_order_relaxed);
  e.graph_exec_id.store(launch.graph_exec_id, std::memory_order_relaxed);
  e.tid.store(launch.tid, std::memory_order_relaxed);
  e.device.store(launch.device, std::memory_order_relaxed);
  e.ts_ns.store(launch.ts_ns, std::memory_order_relaxed);
  e.seq.store(2 * pos + 2, std::memory_order_release);
}

bool GraphLaunchLog::Next(GraphLaunch* out) noexcept {
  const uint64_t head = head_.load(std::memory_order_acquire);
  if (head - next_ > kEntries) {  // overwritten before it was read
    lost_ += head - kEntries - next_;
    next_ = head - kEntries;
  }
  while (next_ < head) {
    const Entry& e = entries_[next_ % kEntries];
    const uint64_t want = 2 * next_ + 2;
    const uint64_t before = e.seq.load(std::memory_order_acquire);
    if (before < want) return false;  // still being written: read it at the next look
    if (before == want) {
      out->context = e.context.load(std::memory_order_relaxed);
      out->stream = e.stream.load(std::memory_order_relaxed);
      out->correlation_id = e.correlation_id.load(std::memory_order_relaxed);
      out->graph_exec_id = e.graph_exec_id.load(std::memory_order_relaxed);
      out->tid = e.tid.load(std::memory_order_relaxed);
      out->device = e.device.load(std::memory_order_relaxed);
      out->ts_ns = e.ts_ns.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (e.seq.load(std::memory_order_relaxed) == want) {
        ++next_;
        return true;
      }
    }
    ++lost_;  // overwritten while being read
    ++next_;
  }
  return false;
}

}  // namespace cuflight::inject
