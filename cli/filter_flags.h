// The filter flags `cuflight report` and `cuflight export` share (--kernel, --pid, --since,
// --until, --job, --rank, --pod): one definition of their names, help and parsing, giving the filter fields of
// ReportOptions that LaunchFilter (cuflight/report/launch_filter.h) applies.
#ifndef CUFLIGHT_CLI_FILTER_FLAGS_H_
#define CUFLIGHT_CLI_FILTER_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cuflight/report/report_options.h"

namespace cuflight::cli {

class FilterFlags {
 public:
  // Adds the flags to `app` in option group `group`; `what` names what they keep ("launches").
  // CLI11 keeps pointers into this object: it must outlive parsing.
  void Add(CLI::App* app, const std::string& group);

  // Sets options->kernel_regex, pids, since_ns, until_ns, job, ranks and pod. Throws
  // cli::UsageError (one line naming the flag) for a --since or --until that is not a time, and
  // an empty --job or --pod.
  void Apply(report::ReportOptions* options) const;

 private:
  std::string kernel_;
  std::vector<int32_t> pids_;
  std::string since_;
  std::string until_;
  std::string job_;
  std::vector<int32_t> ranks_;
  std::string pod_;
  CLI::Option* job_option_ = nullptr;
  CLI::Option* pod_option_ = nullptr;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_FILTER_FLAGS_H_
