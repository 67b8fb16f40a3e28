// The processes of a collector's log directory that are stalled now, as the ends of their active
// log files say: `cuflight tail` lists them before it follows.
#ifndef CUFLIGHT_CLI_STALLED_NOW_H_
#define CUFLIGHT_CLI_STALLED_NOW_H_

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "cuflight/schema/events.h"

namespace cuflight::cli {

struct StalledProcess {
  std::filesystem::path file;     // the active log file it was found in
  std::string line;               // its latest stall event, as stored
  schema::OwnedStallEvent event;  // the same, decoded
};

// Reads the last `tail_bytes` of every plain log file (*.jsonl, the active ones) under `dir` and
// returns the processes whose latest event there among stall, process_end, process_lost and
// process_crash (by seq) is a stall event with state stalled, the longest stalled first. A stalled
// producer repeats its stall event at least every minute, so the end of its file holds one unless
// it wrote more than `tail_bytes` since. Files that cannot be read are skipped. Throws only
// std::bad_alloc.
std::vector<StalledProcess> FindStalledNow(const std::filesystem::path& dir,
                                           size_t tail_bytes = size_t{4} << 20);

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_STALLED_NOW_H_
