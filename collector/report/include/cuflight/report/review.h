// The review section: processes that did not end normally, first in every report. For each, how
// it ended and, per stream, the last kernels launched and whether each finished (a kernel_time
// joined it). Its own function so every renderer shares it.
#ifndef CUFLIGHT_REPORT_REVIEW_H_
#define CUFLIGHT_REPORT_REVIEW_H_

#include <cstddef>
#include <string>
#include <vector>

#include "cuflight/report/report_model.h"

namespace cuflight::report {

// True for the endings the review lists: kLost, kApiError, kCrash.
bool NeedsReview(Ending ending);

// Indices of the processes to review, in the order given.
std::vector<size_t> SelectForReview(const std::vector<ProcessSummary>& processes);

// The review section as terminal text, lines at most `width` columns (kernel names shortened),
// ANSI colour when `color`. "" when `review` is empty.
std::string RenderReviewText(const std::vector<ProcessSummary>& processes,
                             const std::vector<size_t>& review, bool color, int width);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_REVIEW_H_
