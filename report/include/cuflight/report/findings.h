// The findings: what a reader needs first, at the top of every report.
//
// 1. What died or hung: the review's groups (review.h: GroupReview), the first to fail first,
//    each with where (host, time) and in which kernel its first member was, and the pids of the
//    others that failed alike.
// 2. Failed launches: a launch call that returned an error ran nothing, and the program that
//    goes on without its results is wrong: a correctness bug, said as one. Then the other failed
//    calls. Each (call, error) once, with its count over every process and its first instance.
// 3. The kernels that take the GPU time, with occupancy, limiter and the one action worth
//    trying (advice.h: Advice, as the kernel table shows it).
// Built from the report model only, so the terminal, the page and the JSON say the same.
#ifndef CUFLIGHT_REPORT_FINDINGS_H_
#define CUFLIGHT_REPORT_FINDINGS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuflight/report/report_model.h"

namespace cuflight::report {

// One (call, error code) over every process.
struct FailedCallFinding {
  uint64_t count = 0;       // in every process
  size_t processes = 0;     // processes that had it
  size_t first_process = 0;  // index into Report::processes of the first instance
  schema::OwnedApiErrorEvent first;  // the earliest instance (ts, then process order)
  bool launch = false;      // IsLaunchCall(first.api)
};

struct Findings {
  // Failed launches and other failed calls, each by its first instance (earliest first).
  std::vector<FailedCallFinding> failed_launches;
  std::vector<FailedCallFinding> failed_calls;
  uint64_t failed_launch_count = 0;    // failed launches in all
  size_t failed_launch_processes = 0;  // processes with one
  // Failed calls of kinds a process did not keep (ProcessSummary::failed_calls_left_out).
  uint64_t failed_calls_left_out = 0;
  // The signatures that take the most GPU time (indices into Report::signatures), most first;
  // by launches when no launch was timed (`by_launches`).
  std::vector<size_t> top_kernels;
  std::vector<uint64_t> top_weights;  // each one's GPU time (ns) or launches
  bool by_launches = false;
  // Under sampled timing (Report::sampled_launches > 0) the GPU times are estimates
  // (EstimatedGpuNs; a signature whose sampled launches none was timed is left out).
  bool estimated = false;
  // GPU time of every signature (saturating): measured, or under sampled timing the estimate.
  uint64_t gpu_ns = 0;
  uint64_t top_total = 0;  // the weights of every ranked signature: what SHARE divides by
};

// Kernels the findings name.
inline constexpr size_t kFindingsTopKernels = 3;

Findings BuildFindings(const Report& report, size_t top_kernels = kFindingsTopKernels);

// "cuLaunchKernel returned CUDA_ERROR_INVALID_VALUE (1)".
std::string FailedCallText(const schema::OwnedApiErrorEvent& e);

// "pid 4000 python3.11 on node1" (ProcessName and the host).
std::string ProcessWho(const ProcessSummary& p);

// Where a reviewed process was when it failed, in one phrase: "at 04:40:00.021 UTC; its last
// kernel launched: NAME (device 0, stream 10, seq 1002): finished 125us" (kernel names
// shortened to `name_width` bytes).
std::string WhereItFailed(const ProcessSummary& p, size_t name_width);

struct FindingsTextOptions {
  bool color = false;
  int width = 120;
  int name_width = -1;  // as ReportOptions::name_width
};

// The findings as terminal text, lines at most `width` columns; "" when there is nothing to say
// (no process to review, no failed call and no kernel).
std::string RenderFindingsText(const Report& report, const Findings& findings,
                               const FindingsTextOptions& options);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_FINDINGS_H_
