#include "export_command.h"

#include <fmt/format.h>

#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "chrome_json_writer.h"
#include "cuflight/logread/log_reader.h"
#include "cuflight/logread/progress_line.h"
#include "cuflight/report/build_report.h"
#include "cuflight/report/launch_filter.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/join_key.h"
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

void PrintNotes(const logread::ReadSummary& summary, std::ostream& err) {
  for (const std::string& note : summary.notes) err << kPrefix << ": note: " << note << '\n';
  if (summary.notes_left_out > 0) {
    err << kPrefix << ": note: " << summary.notes_left_out << " more lines skipped\n";
  }
}

// One read of the logs through an exporter into `writer`.
ExportCounts Export(const std::vector<std::filesystem::path>& files,
                    const report::ReportOptions& filters, TraceWriter* writer,
                    logread::ReadSummary* summary, logread::ProgressLine* progress) {
  report::LaunchFilter filter(filters);
  TraceExporter exporter(&filter, writer);
  logread::ReadOptions read;
  read.on_unknown = [&](const logread::UnknownEvent& e, const logread::Origin& origin) {
    exporter.AddUnknown(e, origin.file);
  };
  read.on_progress = progress->Callback();
  std::string error;
  const bool ok = logread::ReadLogFiles(
      files,
      [&](const schema::OwnedEvent& e, const logread::Origin& origin) {
        exporter.Add(e, origin.file);
      },
      read, summary, &error);
  progress->Done();
  if (!ok) throw cli::UsageError(error);
  if (!exporter.Finish(&error)) throw cli::UsageError(error);
  return exporter.counts();
}

// --jsonl: which events are written. The process filters (--pid, --job, --rank, --pod) select
// processes; --kernel and --since/--until select kernel events (LaunchFilter::Launch), and a
// kernel_time goes with its kernel (joined by process and JoinKey, the last kMaxKept kernels
// remembered; processes told apart as the report's model does, report::ProcessKeys, so two
// processes sharing a pid never take each other's times); --since/--until also select every
// other event by its own time.
class JsonlFilter {
 public:
  JsonlFilter(report::LaunchFilter* filter, const report::ReportOptions& options)
      : filter_(filter),
        launches_filtered_(!options.kernel_regex.empty() || options.since_ns || options.until_ns) {}

  // `file`: the log file the event was read from (logread::Origin::file).
  bool Accept(const schema::OwnedEvent& event, const std::filesystem::path* file) {
    const schema::Header& h = schema::HeaderOf(event);
    if (!filter_->Pid(h.pid)) return false;
    if (file != file_) {
      file_ = file;
      keys_.SetFile(file);
    }
    const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&event);
    if (start != nullptr) keys_.Note(*start);
    const auto [index, added] =
        process_index_.try_emplace(keys_.KeyOf(h.pid), static_cast<uint32_t>(selected_.size()));
    if (added) selected_.emplace_back();
    if (filter_->filters_attribution()) {
      // A process is in when its process_start matched, as in the trace export.
      std::optional<bool>& selected = selected_[index->second];
      if (start != nullptr) selected = filter_->Attribution(start->attribution);
      if (!selected.value_or(false)) return false;
    }
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&event)) {
      if (!filter_->Launch(*k)) return false;
      if (!launches_filtered_) return true;
      const Key key{index->second, schema::JoinKeyOf(*k)};
      if (kept_.insert(key).second) {
        order_.push_back(key);
        if (order_.size() > kMaxKept) {
          kept_.erase(order_.front());
          order_.pop_front();
        }
      }
      return true;
    }
    if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&event)) {
      return !launches_filtered_ || kept_.count(Key{index->second, schema::JoinKeyOf(*t)}) > 0;
    }
    return filter_->InWindow(h.ts_ns);
  }

 private:
  static constexpr size_t kMaxKept = 1 << 16;
  struct Key {
    uint32_t process;  // index into selected_
    schema::JoinKey join;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return schema::JoinKeyHash()(k.join) ^
             (static_cast<size_t>(k.process) * 0x9E3779B97F4A7C15ull);
    }
  };
  report::LaunchFilter* filter_;
  const bool launches_filtered_;  // --kernel, --since or --until: kernel_times follow kernels
  report::ProcessKeys keys_;
  const std::filesystem::path* file_ = nullptr;
  std::map<report::ProcessKey, uint32_t> process_index_;
  std::vector<std::optional<bool>> selected_;  // by process: its process_start matched
  std::unordered_set<Key, KeyHash> kept_;
  std::deque<Key> order_;
};

// The self-contained events of the logs to `file`, one JSON line each (the log reader has
// expanded every launch); returns the lines written.
uint64_t ExportJsonl(const std::vector<std::filesystem::path>& files,
                     const report::ReportOptions& filters, OutputFile* file,
                     logread::ReadSummary* summary, logread::ProgressLine* progress) {
  report::LaunchFilter launch_filter(filters);
  JsonlFilter filter(&launch_filter, filters);
  logread::ReadOptions read;
  read.on_progress = progress->Callback();
  std::string line(64 << 10, '\0');
  uint64_t written = 0;
  std::string error;
  const bool ok = logread::ReadLogFiles(
      files,
      [&](const schema::OwnedEvent& e, const logread::Origin& origin) {
        if (!filter.Accept(e, origin.file)) return;
        size_t n = schema::Encode(e, line.data(), line.size());
        if (n == 0) {  // longer than the buffer: the collector's lines go to 16 MiB
          line.resize(size_t{32} << 20);
          n = schema::Encode(e, line.data(), line.size());
          if (n == 0) return;
        }
        file->Write(std::string_view(line.data(), n));
        ++written;
      },
      read, summary, &error);
  progress->Done();
  if (!ok) throw cli::UsageError(error);
  if (!file->Close(&error)) throw cli::UsageError(error);
  return written;
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
      "Convert collector logs to a trace for the Perfetto UI (protobuf, or Chrome JSON), or to "
      "self-contained JSON lines (--jsonl)");
  app_->footer(
      "Examples:\n"
      "  cuflight export --perfetto trace.pftrace cuflight-logs/\n"
      "  cuflight export --perfetto trace.json.gz logs/ --pid 4242 --kernel 'gemm|attn'\n"
      "  cuflight export --perfetto trace.pftrace logs/ --since 2026-11-21T07:00:00Z "
      "--until 2026-11-21T07:01:00Z\n"
      "  cuflight export --jsonl - logs/ --kernel gemm | jq -c 'select(.type==\"kernel\")'\n"
      "The format follows the name: .json, .json.gz or .json.zst for JSON, anything else "
      "(.pftrace) for Perfetto's protobuf format; a final .gz or .zst compresses. Open the file "
      "at https://ui.perfetto.dev (Open trace file).\n"
      "--jsonl writes one event per line, as the schema (schema/v1) describes it, in the order "
      "read: each launch of an interned configuration as the whole kernel event it stands for, "
      "and no kernel_config line, so every line reads alone. --pid, --job, --rank and --pod "
      "select processes; --kernel and --since/--until select kernels, each kernel_time going "
      "with its kernel; --since/--until select the other events by their time too. Lines of "
      "event types this build does not know are left out.\n"
      "Exit status: 0 when the trace (or the lines) was written; 2 on bad input.");
  auto* perfetto = app_->add_option("--perfetto", perfetto_,
                                    "Write the trace to FILE ('-': JSON on standard output)")
                       ->type_name("FILE");
  auto* jsonl = app_->add_option(
                        "--jsonl", jsonl_,
                        "Write the events as self-contained JSON lines to FILE ('-': standard "
                        "output; .gz or .zst compresses), for jq and tools that read kernel "
                        "events: every launch written as its whole kernel event, kernel_config "
                        "lines left out")
                    ->type_name("FILE");
  perfetto->excludes(jsonl);
  auto* format = app_->add_option("--format", format_,
                                  "auto (by the file name, default), proto (Perfetto protobuf) "
                                  "or json (Chrome trace-event JSON); --perfetto only")
                     ->type_name("FORMAT");
  format->excludes(jsonl);
  filters_.Add(app_, "Filters");
  app_->add_option("PATH", paths_, "Log files and directories (searched for *.jsonl, *.jsonl.zst)")
      ->required();
}

bool ExportCommand::Selected() const { return app_->parsed(); }

int ExportCommand::Run(std::ostream& out, std::ostream& err) const {
  if (perfetto_.empty() && jsonl_.empty()) {
    throw cli::UsageError("give --perfetto FILE (a trace) or --jsonl FILE (JSON lines)");
  }
  report::ReportOptions filters;
  filters_.Apply(&filters);
  std::string error;
  if (!report::CheckReportOptions(filters, &error)) throw cli::UsageError(error);
  std::vector<std::filesystem::path> files;
  if (!logread::ExpandLogPaths(paths_, &files, &error)) throw cli::UsageError(error);
  logread::ProgressLine progress(kPrefix, err);
  logread::ReadSummary summary;
  if (!jsonl_.empty()) {
    OutputFile file;
    if (!file.Open(jsonl_, out, &error)) throw cli::UsageError(error);
    const uint64_t lines = ExportJsonl(files, filters, &file, &summary, &progress);
    PrintNotes(summary, err);
    if (jsonl_ != "-") {
      err << kPrefix << ": wrote " << jsonl_ << ": " << lines << " events of " << summary.events
          << " in " << files.size() << " file(s); " << Size(file.bytes_out()) << '\n';
    }
    return cli::kExitOk;
  }
  const TraceFormat format = FormatOf(perfetto_, format_);
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

  PrintNotes(summary, err);
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
