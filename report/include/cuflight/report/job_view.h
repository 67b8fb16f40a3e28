// The job view: the processes of one job (process_start's attribution "job") as ranks, with how
// each ended and in which order, and the first to fail. What `cuflight report --job` shows first,
// and every report of logs whose processes name a job.
//
// 1. Identity comes from the attribution alone (job, rank, local_rank, world_size, pod_uid,
//    pod_name, pod_namespace: schema/v1/process_start.schema.json); the host from process_start,
//    the GPU from the device events' uuid. What the log does not say is said unknown.
// 2. Times are each host's CLOCK_REALTIME (the events' ts_ns): the order of ranks on different
//    hosts is as good as the hosts' clock agreement (NTP: milliseconds; PTP: microseconds).
// 3. A failure is every ending but finished and running; its time is the event that shows it
//    (RankRow::failed_ns). The first to fail has the smallest such time.
#ifndef CUFLIGHT_REPORT_JOB_VIEW_H_
#define CUFLIGHT_REPORT_JOB_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cuflight/report/report_model.h"

namespace cuflight::report {

// The jobs of `processes` by job id (bytewise), each process with a "job" in its attribution in
// its job's view; *without_job counts the others.
std::vector<JobView> BuildJobViews(const std::vector<ProcessSummary>& processes,
                                   uint64_t* without_job);

// "07:00:05.123" (UTC, milliseconds) for ns since the epoch; "-" for ns <= 0.
std::string FormatClockMs(int64_t ns);

// One line on the job: "job 4242: 8 ranks (world size 8) on 2 hosts; 2 crashed, 1 lost, 1
// stalled, 4 finished; first to fail: rank 5 (crashed at 07:00:05.123 UTC on node-b)".
std::string JobHeadline(const JobView& job, const std::vector<ProcessSummary>& processes);

// The jobs as terminal text: per job its headline, a table of ranks (RANK, HOST, GPU, ENDED,
// ORDER, AT, LAST KERNEL) in at most `width` columns, the order in which ranks ended, and what is
// unknown (missing ranks, processes without a rank). "" when `jobs` is empty.
std::string RenderJobsText(const Report& report, bool color, int width);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_JOB_VIEW_H_
