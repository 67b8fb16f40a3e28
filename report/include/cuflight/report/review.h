// The review section: processes that did not end normally, first in every report. For each, how
// it ended and, per stream, the last kernels launched and whether each finished (a kernel_time
// joined it). Its own function so every renderer shares it.
#ifndef CUFLIGHT_REPORT_REVIEW_H_
#define CUFLIGHT_REPORT_REVIEW_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

// When the process failed (its host's clock, ns): the failed call's ts for kApiError, the
// crash's, the process_lost's, the process_end's for an exit code other than 0, and when its
// stall began (the stall event's ts - stalled_ms) for kStalled. nullopt for a process that did
// not fail (ended with exit code 0 or none, or running), even one whose stall resolved.
std::optional<int64_t> FailedAt(const ProcessSummary& p);

// True when `api` (an api_error's call) launches kernels: cuLaunchKernel, cuLaunchKernelEx,
// cuLaunchCooperativeKernel(MultiDevice), cuLaunch, cuLaunchGrid(Async) and cuGraphLaunch, and
// the "_ptsz"/"_ptds" forms CUPTI names for per-thread default streams (cuda.h's launch entry
// points; the injector's launch callbacks, libinject/src/driver_queries.h kRecorderCalls, and
// cuGraphLaunch). A launch that fails runs nothing.
bool IsLaunchCall(std::string_view api);

// The processes of `review` (indices into `processes`) grouped by what their reviews say
// (ReviewGroup::says): the ending; for a crash the signal, code, address and whether the
// application's handler ran; a failed last call (api, error, message); a loss's reason; for a
// stall going on the kernel the first stalled stream waits on; the kernels of launches a sticky
// error stopped (NO (failed)). Not compared: pids, threads, seqs, counts, times, the launches
// that finished. Each group's members the first to fail first (FailedAt; those that did not fail
// after, in `review`'s order); groups by their first member, the same way.
std::vector<ReviewGroup> GroupReview(const std::vector<ProcessSummary>& processes,
                                     const std::vector<size_t>& review);

// Numbers as a short list, runs of consecutive ones as ranges: {4, 1, 2, 3, 9} -> "1-4, 9".
// Sorted, duplicates once.
std::string CompactList(std::vector<int64_t> numbers);

// The seq of the launch a stall event names by (device, stream, correlation id), when the
// process's review holds it among that stream's last launches (the latest, for a graph's nodes,
// which share their launch's correlation id); nullopt otherwise.
std::optional<uint64_t> SeqOfStalledLaunch(const ProcessSummary& p, int32_t device,
                                           uint64_t stream, uint64_t correlation_id);

// How the review section lists processes.
struct ReviewTextOptions {
  bool color = false;
  int width = 120;      // lines at most this many columns
  int name_width = -1;  // as ReportOptions::name_width
  // Every reviewed process with its launches; false: per group the first to fail with its
  // launches and "x N more, the same: pids ..." for the others.
  bool per_process = false;
};

// The review section as terminal text: per group (Report::review_groups) the first member's
// ending line (wrapped, never cut), its stall and its streams' last launches (kernel names
// shortened), then the other members' pids; every member in full under `per_process`. ANSI
// colour when `color`. "" when nothing is reviewed.
std::string RenderReviewText(const Report& report, const ReviewTextOptions& options);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_REVIEW_H_
