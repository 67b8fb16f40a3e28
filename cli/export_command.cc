#include "export_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "chrome_json_writer.h"
#include "cuflight/logread/log_reader.h"
#include "cuflight/logread/progress_line.h"
#include "cuflight/report/build_report.h"
#include "cuflight/report/launch_filter.h"
#include "output_file.h"
#include "perfetto_proto_writer.h"
#include "trace_exporter.h"
#include "usage_error.h"

namespace cuflight::cli {
namespace {

using trace::ChromeJsonWriter;
using trace::EarliestTimestamp;
using trace::ExportCounts;
using trace::ExportLimits;
using trace::OutputFile;
using trace::PerfettoProtoWriter;
using trace::TraceExporter;
using trace::TraceWriter;

constexpr const char* kPrefix = "cuflight export";

std::string Size(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GB", static_cast<double>(bytes) / (1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MB", static_cast<double>(bytes) / (1 << 20));
  return fmt::format("{} KB", (bytes + 1023) / 1024);
}

// One read of the logs through an exporter into `writer`.
ExportCounts Export(const std::vector<std::filesystem::path>& files,
                    const report::ReportOptions& filters, TraceWriter* writer,
                    logread::ReadSummary* summary, logread::ProgressLine* progress) {
  report::LaunchFilter filter(filters);
  TraceExporter exporter(&filter, writer);
  logread::ReadOptions read;
  read.on_unknown = [&](const logread::UnknownEvent& e, const logread::Origin&) {
    exporter.AddUnknown(e);
  };
  read.on_progress = progress->Callback();
  std::string error;
  const bool ok = logread::ReadLogFiles(
      files, [&](const schema::OwnedEvent& e, const logread::Origin&) { exporter.Add(e); }, read,
      summary, &error);
  progress->Done();
  if (!ok) throw cli::UsageError(error);
  if (!exporter.Finish(&error)) throw cli::UsageError(error);
  return exporter.counts();
}

}  // namespace

TraceFormat FormatOf(const std::string& path, const std::string& format) {
  if (format == "proto") return TraceFormat::kProto;
  if (format == "json") return TraceFormat::kJson;
  if (format != "auto") {
    throw cli::UsageError(
        fmt::format("--format '{}' is not a format: use auto, proto or json", format));
  }
  if (path == "-") return TraceFormat::kJson;
  std::string_view name = path;
  if (name.ends_with(".gz")) name.remove_suffix(3);
  if (name.ends_with(".zst")) name.remove_suffix(4);
  return name.ends_with(".json") ? TraceFormat::kJson : TraceFormat::kProto;
}

ExportCommand::ExportCommand(CLI::App* parent) {
  app_ = parent->add_subcommand(
      "export",
      "Convert collector logs to a trace for the Perfetto UI (protobuf, or Chrome JSON)");
  app_->footer(
      "Examples:\n"
      "  cuflight export --perfetto trace.pftrace cuflight-logs/\n"
      "  cuflight export --perfetto trace.json.gz logs/ --pid 4242 --kernel 'gemm|attn'\n"
      "  cuflight export --perfetto trace.pftrace logs/ --since 2026-11-21T07:00:00Z "
      "--until 2026-11-21T07:01:00Z\n"
      "The format follows the name: .json, .json.gz or .json.zst for JSON, anything else "
      "(.pftrace) for Perfetto's protobuf format; a final .gz or .zst compresses. Open the file "
      "at https://ui.perfetto.dev (Open trace file).\n"
      "Exit status: 0 when the trace was written; 2 on bad input.");
  app_->add_option("--perfetto", perfetto_,
                   "Write the trace to FILE ('-': JSON on standard output)")
      ->type_name("FILE")
      ->required();
  app_->add_option("--format", format_,
                   "auto (by the file name, default), proto (Perfetto protobuf) or json (Chrome "
                   "trace-event JSON)")
      ->type_name("FORMAT");
  filters_.Add(app_, "Filters");
  app_->add_option("PATH", paths_, "Log files and directories (searched for *.jsonl, *.jsonl.zst)")
      ->required();
}

bool ExportCommand::Selected() const { return app_->parsed(); }

int ExportCommand::Run(std::ostream& out, std::ostream& err) const {
  const TraceFormat format = FormatOf(perfetto_, format_);
  report::ReportOptions filters;
  filters_.Apply(&filters);
  std::string error;
  if (!report::CheckReportOptions(filters, &error)) throw cli::UsageError(error);
  std::vector<std::filesystem::path> files;
  if (!logread::ExpandLogPaths(paths_, &files, &error)) throw cli::UsageError(error);
  logread::ProgressLine progress(kPrefix, err);
  logread::ReadSummary summary;
  ExportCounts counts;
  OutputFile file;
  if (format == TraceFormat::kJson) {
    // JSON timestamps are microseconds from a base at or before the earliest event: a first
    // read finds it.
    EarliestTimestamp earliest;
    logread::ReadSummary first;
    Export(files, filters, &earliest, &first, &progress);
    if (!file.Open(perfetto_, out, &error)) throw cli::UsageError(error);
    ChromeJsonWriter writer(&file, earliest.base_ns());
    counts = Export(files, filters, &writer, &summary, &progress);
  } else {
    if (!file.Open(perfetto_, out, &error)) throw cli::UsageError(error);
    PerfettoProtoWriter writer(&file);
    counts = Export(files, filters, &writer, &summary, &progress);
  }

  for (const std::string& note : summary.notes) err << kPrefix << ": note: " << note << '\n';
  if (summary.notes_left_out > 0) {
    err << kPrefix << ": note: " << summary.notes_left_out << " more lines skipped\n";
  }
  if (counts.launches_given_up > 0) {
    err << kPrefix << ": note: " << counts.launches_given_up
        << " kernels shown untimed: their kernel_time came more than "
        << ExportLimits{}.max_pending_launches << " kernels later\n";
  }
  if (counts.times_given_up > 0) {
    err << kPrefix << ": note: " << counts.times_given_up
        << " kernel_time events dropped: their kernel came more than "
        << ExportLimits{}.max_pending_times << " kernel_time events later\n";
  }
  if (perfetto_ != "-") {
    err << kPrefix << ": wrote " << perfetto_ << ": " << counts.kernels << " kernels ("
        << counts.timed << " timed, " << counts.untimed << " without timing) from "
        << summary.events << " events in " << files.size() << " file(s); " << counts.markers
        << " markers; " << Size(file.bytes_out()) << " of "
        << (format == TraceFormat::kJson ? "JSON" : "Perfetto protobuf") << '\n';
  }
  return cli::kExitOk;
}

}  // namespace cuflight::cli
