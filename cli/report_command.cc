#include "report_command.h"

#include <fmt/format.h>

#include "cuflight/report/render_html.h"
#include "cuflight/report/run_report.h"
#include "cuflight/report/text_format.h"
#include "usage_error.h"

namespace cuflight::cli {

ReportCommand::ReportCommand(CLI::App* parent) {
  app_ = parent->add_subcommand(
      "report",
      "Summarise collector logs: kernels by GPU time with occupancy, limiter and advice; "
      "processes that did not end normally first.");
  app_->footer(
      "Examples:\n"
      "  cuflight report ~/.local/state/cuflight/logs\n"
      "  cuflight report logs/ --kernel 'gemm|conv' --sort occupancy --top 10\n"
      "  cuflight report logs/2026-11-21 --since 2026-11-21T07:00:00Z --json\n"
      "  cuflight report run.jsonl --retarget h100\n"
      "Exit status: 0 with a report, 2 on bad input (bad flag value, missing path, a file that "
      "is not a cuflight log).");
  app_->add_option("paths", paths_, "Log files (.jsonl, .jsonl.zst) and directories of them")
      ->required()
      ->type_name("PATH...");
  constexpr const char* kFilter = "Filters";
  constexpr const char* kOutput = "Output";
  filters_.Add(app_, kFilter);
  app_->add_option("--limiter", limiter_,
                   "Only signatures limited by this resource: registers (regs), shared_mem "
                   "(smem), warps, blocks, barriers, cluster")
      ->type_name("NAME")
      ->group(kFilter);
  app_->add_option("--top", top_,
                   "Show the first N signatures (default 20 in the table, all in --json/--csv; 0: "
                   "all)")
      ->type_name("N")
      ->check(CLI::Range(0, INT32_MAX))
      ->group(kOutput);
  app_->add_option("--sort", sort_,
                   "Order: time (total GPU time, default), launches, occupancy (lowest first)")
      ->type_name("KEY")
      ->group(kOutput);
  app_->add_option("--retarget", retarget_,
                   "Recompute each signature's occupancy for this GPU (an occupancy preset key, "
                   "see cuflight occupancy --list-devices)")
      ->type_name("DEVICE")
      ->group(kOutput);
  app_->add_option("--review-launches", review_launches_,
                   "Launches listed per stream for processes that did not end normally "
                   "(default 5)")
      ->type_name("N")
      ->check(CLI::Range(0, 1000))
      ->group(kOutput);
  app_->add_flag("--per-process", per_process_,
                 "In the review, every process that did not end normally with its launches "
                 "(default: processes whose reviews say the same are one block)")
      ->group(kOutput);
  app_->add_option("--name-width", name_width_,
                   "Kernel names in at most N columns (0: whole names; default: the room the "
                   "120-column table leaves, at least 20)")
      ->type_name("N")
      ->check(CLI::Range(0, 100000))
      ->group(kOutput);
  app_->add_option("--color", color_,
                   "Colour: auto (a terminal and NO_COLOR unset, default), always, never")
      ->type_name("WHEN")
      ->group(kOutput);
  auto* json = app_->add_flag("--json", json_, "Print one JSON document")->group(kOutput);
  auto* csv = app_->add_flag("--csv", csv_, "Print CSV, one row per signature")->group(kOutput);
  json->excludes(csv);
  auto* html = app_->add_option("--html", html_,
                                "Write one self-contained HTML page with charts to FILE "
                                "('-': standard output)")
                   ->type_name("FILE")
                   ->group(kOutput);
  html->excludes(json);
  html->excludes(csv);
}

bool ReportCommand::Selected() const { return app_->parsed(); }

report::ReportOptions ReportCommand::Options(const std::ostream& out) const {
  report::ReportOptions o;
  o.paths = paths_;
  filters_.Apply(&o);
  o.limiter = limiter_;
  o.top = top_;
  o.review_launches = review_launches_;
  o.per_process = per_process_;
  o.name_width = name_width_;
  o.retarget = retarget_;
  if (sort_ == "time") {
    o.sort = report::SortKey::kTime;
  } else if (sort_ == "launches") {
    o.sort = report::SortKey::kLaunches;
  } else if (sort_ == "occupancy") {
    o.sort = report::SortKey::kOccupancy;
  } else {
    throw cli::UsageError(
        fmt::format("--sort '{}' is not an order: use time, launches or occupancy", sort_));
  }
  o.format = json_  ? report::OutputFormat::kJson
             : csv_ ? report::OutputFormat::kCsv
                    : report::OutputFormat::kTable;
  if (color_ == "auto") {
    o.color = report::ShouldColor(out);
  } else if (color_ == "always") {
    o.color = true;
  } else if (color_ == "never") {
    o.color = false;
  } else {
    throw cli::UsageError(
        fmt::format("--color '{}' is not a choice: use auto, always or never", color_));
  }
  return o;
}

int ReportCommand::Run(std::ostream& out, std::ostream& err) const {
  if (!html_.empty()) return RunHtmlReport(Options(out), html_, out, err);
  return report::RunReport(Options(out), out, err);
}

}  // namespace cuflight::cli
