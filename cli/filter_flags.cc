#include "filter_flags.h"

#include <fmt/format.h>

#include <optional>

#include "cuflight/report/text_format.h"
#include "usage_error.h"

namespace cuflight::cli {
namespace {

std::optional<int64_t> TimeFlag(const char* flag, const std::string& text) {
  if (text.empty()) return std::nullopt;
  const std::optional<int64_t> ns = report::ParseTimeBound(text);
  if (!ns) {
    throw cli::UsageError(fmt::format(
        "{} '{}' is not a time: use RFC 3339 (2026-11-21T07:00:00Z) or seconds since the epoch",
        flag, text));
  }
  return ns;
}

}  // namespace

void FilterFlags::Add(CLI::App* app, const std::string& group) {
  app->add_option("--kernel", kernel_,
                  "Only kernels whose demangled or mangled name matches this ECMAScript regex")
      ->type_name("REGEX")
      ->group(group);
  app->add_option("--pid", pids_, "Only this process (repeatable)")
      ->type_name("PID")
      ->check(CLI::Range(1, INT32_MAX))
      ->group(group);
  app->add_option("--since", since_,
                  "Only launches at or after this time: RFC 3339 (2026-11-21T07:00:00Z) or "
                  "seconds since the epoch")
      ->type_name("TIME")
      ->group(group);
  app->add_option("--until", until_, "Only launches at or before this time (as --since)")
      ->type_name("TIME")
      ->group(group);
  job_option_ = app->add_option("--job", job_,
                                "Only processes of this job (attribution job: SLURM_JOB_ID, "
                                "TORCHELASTIC_RUN_ID); the report shows its ranks first")
                    ->type_name("ID")
                    ->group(group);
  app->add_option("--rank", ranks_, "Only processes of this rank (attribution rank; repeatable)")
      ->type_name("N")
      ->check(CLI::Range(0, INT32_MAX))
      ->group(group);
  pod_option_ = app->add_option("--pod", pod_,
                                "Only processes of this pod: its name, NAMESPACE/NAME or UID")
                    ->type_name("POD")
                    ->group(group);
}

void FilterFlags::Apply(report::ReportOptions* options) const {
  options->kernel_regex = kernel_;
  options->pids = pids_;
  options->since_ns = TimeFlag("--since", since_);
  options->until_ns = TimeFlag("--until", until_);
  if (job_option_ != nullptr && job_option_->count() > 0 && job_.empty()) {
    throw cli::UsageError("--job '' is empty: give the job id the processes' attribution names");
  }
  if (pod_option_ != nullptr && pod_option_->count() > 0 && pod_.empty()) {
    throw cli::UsageError("--pod '' is empty: give a pod name, NAMESPACE/NAME or UID");
  }
  options->job = job_;
  options->ranks = ranks_;
  options->pod = pod_;
}

}  // namespace cuflight::cli
