#include "timing_watch.h"

namespace cuflight::inject {

void TimingWatch::SetUnavailable() noexcept {
  stop_.store(static_cast<uint8_t>(TimingStop::kUnavailable), std::memory_order_relaxed);
}

void TimingWatch::OnLaunch(int64_t now_ns) noexcept {
  switch (stop()) {
    case TimingStop::kUnavailable:
    case TimingStop::kRecordsStopped:
      stopped_launches_.fetch_add(1, std::memory_order_relaxed);
      return;
    case TimingStop::kNone:
      if (waiting_launches_++ == 0) first_waiting_launch_ns_ = now_ns;
      return;
  }
}

bool TimingWatch::OnRecord() noexcept {
  waiting_launches_ = 0;
  if (stop() != TimingStop::kRecordsStopped) return false;
  stop_.store(static_cast<uint8_t>(TimingStop::kNone), std::memory_order_relaxed);
  stopped_launches_.store(0, std::memory_order_relaxed);
  return true;
}

bool TimingWatch::Check(int64_t now_ns) noexcept {
  if (stop() != TimingStop::kNone || waiting_launches_ < options_.min_launches) return false;
  // Silence counts from the first launch after the last record: its kernel had all that time.
  if (now_ns - first_waiting_launch_ns_ < options_.silence_ns) return false;
  silence_at_stop_ns_ = now_ns - first_waiting_launch_ns_;
  stopped_launches_.store(waiting_launches_, std::memory_order_relaxed);
  waiting_launches_ = 0;
  stop_.store(static_cast<uint8_t>(TimingStop::kRecordsStopped), std::memory_order_relaxed);
  return true;
}

}  // namespace cuflight::inject
