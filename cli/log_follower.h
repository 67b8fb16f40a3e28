// Follows the plain log files under a directory while a collector writes them: new files and the
// complete lines appended to each.
//
// 1. Files are *.jsonl anywhere under the directory, known by (device, inode), and read through a
//    descriptor kept open. So a file the collector rotates (renames to <base>.<N>.jsonl) is read
//    to its end under its new name without being taken for a new file, and the new active file
//    <base>.jsonl is a new file, read from its start. Compressed segments (*.jsonl.zst) hold
//    lines already read from the plain file before it was renamed, and are not read.
// 2. A file is dropped once it is unlinked (the compressed copy replaced it) and read to its end.
// 3. Only complete lines are passed on; a partial last line waits for its '\n'. A file that
//    shrinks (a restarted collector cut a torn last line) is read on from its new end.
#ifndef CUFLIGHT_CLI_LOG_FOLLOWER_H_
#define CUFLIGHT_CLI_LOG_FOLLOWER_H_

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace cuflight::cli {

class LogFollower {
 public:
  // Follows `dir`. The files already there at the first Poll() are read from their end when
  // `from_start` is false (only what is appended later is passed on), from their start when true;
  // files that appear later are always read from their start.
  LogFollower(std::filesystem::path dir, bool from_start);
  ~LogFollower();  // closes the descriptors
  LogFollower(const LogFollower&) = delete;
  LogFollower& operator=(const LogFollower&) = delete;

  // Looks for new files, then reads what was appended to every followed file and calls
  // `on_line(line, file)` for each complete line (without its '\n'), in order within a file.
  // `file` is the path the file had when it was found. Returns the number of lines passed on.
  uint64_t Poll(const std::function<void(std::string_view, const std::filesystem::path&)>& on_line);

  // The lines of the followed file found as `file` (a path on_line was given) before the point
  // it was first followed from (a file present at the first Poll when not from_start), each
  // passed to `on_line`, once per file: a later call for it passes nothing. For a reader that
  // needs what a file said before (the interned configurations a launch names,
  // docs/protocol.md). Returns the number of lines passed on.
  uint64_t ReadSkipped(const std::filesystem::path& file,
                       const std::function<void(std::string_view)>& on_line);

  // Files followed now.
  size_t files() const { return files_.size(); }

 private:
  struct File {
    std::filesystem::path path;
    int fd = -1;
    uint64_t offset = 0;
    uint64_t skipped = 0;  // bytes before the first offset read (ReadSkipped); 0 once read
    std::string partial;  // bytes after the last '\n' read
  };

  void Scan();
  uint64_t Drain(File* file,
                 const std::function<void(std::string_view, const std::filesystem::path&)>& on_line);

  std::filesystem::path dir_;
  bool from_start_;
  bool first_scan_ = true;
  std::map<std::pair<dev_t, ino_t>, File> files_;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_LOG_FOLLOWER_H_
