// Logs -> the report model: reads every file, joins kernel_time to kernel by process and
// correlation_id, graph node and device (cuflight/schema/join_key.h: the kernel nodes of one
// graph launch, and the devices of one multi-device cooperative launch, share a correlation_id),
// aggregates launches per kernel signature, classifies how each process ended, and adds the
// advice and (with --retarget) the recomputed occupancy.
#ifndef CUFLIGHT_REPORT_BUILD_REPORT_H_
#define CUFLIGHT_REPORT_BUILD_REPORT_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cuflight/report/report_model.h"
#include "cuflight/report/report_options.h"
#include "cuflight/schema/events.h"

namespace cuflight::report {

// Checks the option values a caller may have got wrong: the kernel regex compiles, the limiter
// names a resource, the retarget key names a preset, top >= -1, review_launches >= 0, since <=
// until. False with *error, one line naming the flag (e.g. "--limiter 'reg' is not a resource:
// use one of registers, shared_mem, warps, blocks, barriers, cluster").
bool CheckReportOptions(const ReportOptions& options, std::string* error);

// Builds the model of `files` (read in the order given) under `options` (already checked).
// False with *error, one line naming the file, when a file cannot be read or is not a log; a
// torn or rejected line is not an error (it is counted in report->read).
bool BuildReport(const ReportOptions& options, const std::vector<std::filesystem::path>& files,
                 Report* report, std::string* error);

// The key a log file's name states (pid and start_ns; instance id and owner for names that have
// them: the layout of cuflight/schema/log_layout.h); nullopt for a name of another form.
std::optional<ProcessKey> ProcessKeyOfLogFile(const std::filesystem::path& file);

// Which process an event belongs to, as the report model tells processes apart: the key its log
// file's name states, for every event of the file whose pid is the name's; else the key of the
// latest process_start of its pid read where no file name stated it (pid, start_ns,
// instance_id); else its pid alone. The report's model and `cuflight export` both use it.
class ProcessKeys {
 public:
  // The file the next events come from, its name parsed once (nullptr: no file, as for events
  // given one by one).
  void SetFile(const std::filesystem::path* file);
  // Whether the current file's name states the process of `pid`: then every event of `pid` in
  // the file has the same key.
  bool FromFile(int32_t pid) const { return file_key_ && file_key_->pid == pid; }
  // A process_start read: the key of its pid's later events where no file name states it.
  void Note(const schema::OwnedProcessStartEvent& start);
  // The key of the process of `pid` that sends the current file's events.
  const ProcessKey& KeyOf(int32_t pid);

 private:
  std::optional<ProcessKey> file_key_;
  std::map<int32_t, ProcessKey> start_of_pid_;  // from the latest process_start of each pid
  ProcessKey pid_only_;
};

// Sorts signatures as `key` says, ties broken by launches (most first), then by name.
void SortSignatures(SortKey key, std::vector<Signature>* signatures);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_BUILD_REPORT_H_
