// The review section: processes that did not end normally, first in every report. For each, how
// it ended and, per stream, the last kernels launched and whether each finished (a kernel_time
// joined it). Its own function so every renderer shares it.
#ifndef CUFLIGHT_REPORT_REVIEW_H_
#define CUFLIGHT_REPORT_REVIEW_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuflight/report/report_model.h"

namespace cuflight::report {

// What a process's log says about whether its launches without a kernel_time finished.
struct CompletionEvidence {
  // Its timing policy (process_start's config): under sampled a launch outside a timing window
  // gets no kernel_time, under off none does, so only kAll lets a missing one mean "not finished".
  TimingPolicy timing = TimingPolicy::kAll;
  // A process_end was read: the library's exit flush (a forced CUPTI flush) reported every
  // kernel record, the records of kernels that had not completed counted in timing_dropped.
  bool ended = false;
  uint64_t timing_dropped = 0;  // from process_end, else its latest stats
  // seq of its first sticky api_error: the library flushed CUPTI's completed records after it.
  std::optional<uint64_t> sticky_error_seq;
  std::optional<uint64_t> last_kernel_time_seq;  // highest seq of its kernel_time events
};

// Whether the launch with seq `launch_seq` finished: kFinished when `timed`. kNotFinished only
// when the log shows that every kernel that had completed got its kernel_time after the launch,
// and none was lost (timing policy all, timing_dropped 0): the process ended normally, or a sticky error
// came after the launch and a kernel_time after the error shows the flush that follows one ran.
// kUnknown otherwise: after a crash or a kill CUPTI's records are never flushed.
// `timing_window`: the kernel event's (set only under sampled timing): true makes the launch one
// whose kernel_time was expected, as under all; false one that gets none (kUnknown).
Completion CompletionOf(const CompletionEvidence& evidence, uint64_t launch_seq, bool timed,
                        std::optional<bool> timing_window = std::nullopt);

// Sets s->ending and s->ending_detail from s->end, lost, crash, last_api_error and dropped;
// `api_error_last`: the process's last CUDA activity (by seq) is s->last_api_error. The detail
// says what the log knows of what was lost: the events stored and the gaps before the last one
// (exact, from process_lost), and that what came after the last stored seq is unknown unless a
// process_crash (sent after everything before it) closes the stream.
void DescribeEnding(bool api_error_last, ProcessSummary* s);

// The FINISHED cell of a launch: "yes 5.00us", "NO", "NO (failed)" or "unknown".
std::string FinishedText(const LaunchSummary& launch);

// True for the endings the review lists: kLost, kApiError, kCrash.
bool NeedsReview(Ending ending);

// Indices of the processes to review, in the order given.
std::vector<size_t> SelectForReview(const std::vector<ProcessSummary>& processes);

// The review section as terminal text, lines at most `width` columns (kernel names shortened,
// the ending line wrapped, never cut), ANSI colour when `color`. "" when `review` is empty.
// `name_width` as ReportOptions::name_width.
std::string RenderReviewText(const std::vector<ProcessSummary>& processes,
                             const std::vector<size_t>& review, bool color, int width,
                             int name_width = -1);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_REVIEW_H_
