// `cuflight export --perfetto FILE PATH...`: collector logs -> a trace for the Perfetto UI, in
// Perfetto's protobuf format or as Chrome trace-event JSON (trace_exporter.h has the layout),
// streamed with bounded memory, under the filters `cuflight report` takes.
// `cuflight export --jsonl FILE PATH...`: the same logs as self-contained JSON lines (schema v1),
// for jq and older tools: every launch of an interned configuration written as its whole kernel
// event (docs/protocol.md, "Interned configurations"), no kernel_config line, under the same
// filters.
#ifndef CUFLIGHT_CLI_EXPORT_COMMAND_H_
#define CUFLIGHT_CLI_EXPORT_COMMAND_H_

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "filter_flags.h"

namespace cuflight::cli {

// The trace's format: by --format, else by the file name (".json", ".json.gz", ".json.zst":
// JSON; anything else, e.g. ".pftrace": protobuf; "-": JSON).
enum class TraceFormat { kProto, kJson };

// The format `path` names under `format` ("auto", "proto", "json"); throws cli::UsageError for
// another --format value.
TraceFormat FormatOf(const std::string& path, const std::string& format);

class ExportCommand {
 public:
  // Adds the `export` subcommand and its flags to `parent`. Must outlive parsing; cannot move.
  explicit ExportCommand(CLI::App* parent);
  ExportCommand(const ExportCommand&) = delete;
  ExportCommand& operator=(const ExportCommand&) = delete;

  bool Selected() const;

  // --jsonl: reads the logs and writes each selected event, re-encoded by schema::Encode (the
  // bytes the producer wrote, for lines of this version), to the --jsonl file ("-": `out`), then
  // the read notes and (to a file) one line saying what was written, on `err`. One read.
  // --perfetto: reads the logs and writes the trace to the --perfetto file ("-": `out`), then one line on
  // `err` saying what was written and the read notes (torn or rejected lines), each prefixed
  // "note: ". A progress line on a terminal while a read takes over a second. JSON takes two
  // reads of the logs (the first finds the time base); protobuf one. Returns kExitOk. Throws
  // cli::UsageError (one line) when a flag value is bad, a path is missing or holds no log, a
  // file is not a log, or the output file cannot be written (no file is left behind then), or
  // when neither --perfetto nor --jsonl is given.
  int Run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* app_ = nullptr;
  std::string perfetto_;
  std::string jsonl_;
  std::string format_ = "auto";
  FilterFlags filters_;
  std::vector<std::string> paths_;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_EXPORT_COMMAND_H_
