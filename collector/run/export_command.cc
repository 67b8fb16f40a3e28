#include "export_command.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cuflight/logread/log_reader.h"
#include "perfetto_trace.h"
#include "usage_error.h"

namespace cuflight::run {

ExportCommand::ExportCommand(CLI::App* parent) {
  app_ = parent->add_subcommand(
      "export", "Convert collector logs to another format: a Perfetto (Chrome JSON) trace");
  app_->footer(
      "Examples:\n"
      "  cuflight export --perfetto trace.json cuflight-logs/\n"
      "  cuflight export --perfetto - /var/log/cuflight/2026-01-05 | gzip > trace.json.gz\n"
      "Open the file at https://ui.perfetto.dev (Open trace file).\n"
      "Exit status: 0 when the trace was written; 2 on bad input.");
  app_->add_option("--perfetto", perfetto_,
                   "Write a Chrome trace-event JSON file for the Perfetto UI ('-': standard "
                   "output)")
      ->type_name("FILE")
      ->required();
  app_->add_option("PATH", paths_, "Log files and directories (searched for *.jsonl, *.jsonl.zst)")
      ->required();
}

bool ExportCommand::Selected() const { return app_->parsed(); }

int ExportCommand::Run(std::ostream& out, std::ostream& err) const {
  std::vector<std::filesystem::path> files;
  std::string error;
  if (!logread::ExpandLogPaths(paths_, &files, &error)) throw cli::UsageError(error);
  PerfettoTraceBuilder builder;
  logread::ReadSummary summary;
  for (const std::filesystem::path& file : files) {
    if (!logread::ReadLogFile(
            file, [&builder](const schema::OwnedEvent& e, const logread::Origin&) { builder.Add(e); },
            &summary, &error)) {
      throw cli::UsageError(error);
    }
  }
  const std::string text = builder.Build().dump() + "\n";
  if (perfetto_ == "-") {
    out << text;
    out.flush();
  } else {
    std::ofstream file(perfetto_, std::ios::binary | std::ios::trunc);
    if (!file) {
      throw cli::UsageError("--perfetto " + perfetto_ + ": cannot write: " + std::strerror(errno));
    }
    file << text;
    file.close();
    if (!file) {
      throw cli::UsageError("--perfetto " + perfetto_ + ": write failed: " + std::strerror(errno));
    }
  }
  for (const std::string& note : summary.notes) err << "cuflight export: note: " << note << '\n';
  if (summary.notes_left_out > 0) {
    err << "cuflight export: note: " << summary.notes_left_out << " more lines skipped\n";
  }
  const PerfettoCounts c = builder.counts();
  if (perfetto_ != "-") {
    err << "cuflight export: wrote " << perfetto_ << ": " << c.kernels << " kernels (" << c.timed
        << " timed, " << c.untimed << " without timing) from " << summary.events << " events in "
        << files.size() << " file(s)\n";
  }
  return cli::kExitOk;
}

}  // namespace cuflight::run
