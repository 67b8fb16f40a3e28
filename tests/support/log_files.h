// Readers of the collector's log files: what the collector stored, as the tests check it.
#ifndef CUFLIGHT_TESTS_SUPPORT_LOG_FILES_H_
#define CUFLIGHT_TESTS_SUPPORT_LOG_FILES_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/schema/events.h"

namespace cuflight::test_support {

// One line of a log file, parsed.
struct LoggedLine {
  std::string type;
  int64_t pid = 0;
  uint64_t seq = 0;
  std::string text;  // the line without its '\n'
};

// Every *.jsonl file under `log_dir` (recursively), sorted by path.
std::vector<std::filesystem::path> LogFiles(const std::filesystem::path& log_dir);

// The complete lines of one log file, parsed with nlohmann_json (fails the test on a line that is
// not a JSON object with type, pid and seq). A last line still being written (no '\n' yet: the
// collector may be appending while a test polls) is left out, as by StoredLines and DecodeLog.
std::vector<LoggedLine> ReadLog(const std::filesystem::path& file);

// The log file of the process with this exe basename and pid; empty path if there is not
// exactly one.
std::filesystem::path FindLog(const std::filesystem::path& log_dir, std::string_view exe_base,
                              int32_t pid);

// The complete lines (without '\n') of every log file under `log_dir`, file by file in LogFiles
// order, each file's in the order stored. Unparsed; a last line still being written is left out.
std::vector<std::string> StoredLines(const std::filesystem::path& log_dir);

// The seqs stored for process `pid` under `log_dir`, in the order stored, with the lines the
// collector itself wrote (process_lost) left out.
std::vector<uint64_t> StoredSeqs(const std::filesystem::path& log_dir, int64_t pid);
// The seqs of `lines` (one log file's, ReadLog) in order, process_lost left out.
std::vector<uint64_t> StoredSeqs(const std::vector<LoggedLine>& lines);

// The seqs first to last, both included: a stream stored whole, for comparing with StoredSeqs.
std::vector<uint64_t> Range(uint64_t first, uint64_t last);

// Every complete line of `file` decoded with the schema's decoder, in order (fails the test on a
// line that does not decode, and leaves it out). A last line still being written (no '\n' yet:
// the collector may be appending while a test polls) is left out, as by StoredLines. As every
// reader does, the file is read as one sequence of interned configurations: its kernel_config
// events are remembered (and left out) and its launches given as the kernel events they stand for
// (schema::ConfigExpander; a refused one fails the test).
std::vector<schema::OwnedEvent> DecodeLog(const std::filesystem::path& file);
// DecodeLog of each of LogFiles(log_dir), one file after the other.
std::vector<schema::OwnedEvent> DecodeLogs(const std::filesystem::path& log_dir);

// StoredLines(log_dir) as a reader gives them (docs/protocol.md, "Interned configurations"):
// each file read as one sequence, its kernel_config lines left out and each launch line replaced
// by the kernel event it stands for, encoded (as `cuflight export --jsonl` writes it); every other
// line as stored. For tests that look into the lines themselves; a launch that does not expand
// fails the test, as in DecodeLog.
std::vector<std::string> ExpandedLines(const std::filesystem::path& log_dir);

}  // namespace cuflight::test_support

#endif  // CUFLIGHT_TESTS_SUPPORT_LOG_FILES_H_
