#include "log_dir_locator.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "collector_options.h"
#include "log_sink.h"

namespace cuflight::cli {
namespace {

namespace fs = std::filesystem;

const char* EnvOrNull(const char* name) {
  const char* value = getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

// The system collector's directory (collector::DefaultLogDir() for root).
constexpr char kSystemLogDir[] = "/var/log/cuflight";

}  // namespace

fs::path LastRunFile() {
  if (const char* state = EnvOrNull("XDG_STATE_HOME")) {
    return fs::path(state) / "cuflight" / "last-run";
  }
  if (const char* home = EnvOrNull("HOME")) {
    return fs::path(home) / ".local" / "state" / "cuflight" / "last-run";
  }
  return {};
}

bool RememberLastRun(const fs::path& log_dir) {
  const fs::path file = LastRunFile();
  if (file.empty()) return false;
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) return false;
  const fs::path dir = fs::absolute(log_dir, ec);
  if (ec) return false;
  const fs::path tmp = file.string() + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << dir.string() << '\n';
    if (!out.good()) {
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

fs::path LastRunDir() {
  const fs::path file = LastRunFile();
  if (file.empty()) return {};
  std::ifstream in(file);
  std::string line;
  if (!std::getline(in, line) || line.empty()) return {};
  return fs::path(line);
}

bool LogDirInUse(const fs::path& dir) {
  struct stat st {};
  if (::stat((dir / collector::kLogDirLockFileName).c_str(), &st) != 0) return false;
  std::ifstream locks("/proc/locks");
  // Lines as fs/locks.c writes them: "1: FLOCK  ADVISORY  WRITE 4242 fe:00:10953556 0 EOF", a
  // waiter's with "->" after the number. The file is named by "major:minor:inode" (hex, hex,
  // decimal).
  for (std::string line; std::getline(locks, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.size() < 6 || (w[1] != "FLOCK" && !(w[1] == "->" && w[2] == "FLOCK"))) continue;
    for (const std::string& word : w) {
      unsigned major_id = 0;
      unsigned minor_id = 0;
      unsigned long long inode = 0;
      char tail = 0;
      if (std::sscanf(word.c_str(), "%x:%x:%llu%c", &major_id, &minor_id, &inode, &tail) != 3) {
        continue;
      }
      if (inode == static_cast<unsigned long long>(st.st_ino) && major_id == major(st.st_dev) &&
          minor_id == minor(st.st_dev)) {
        return true;
      }
    }
  }
  return false;
}

LocatedLogDir LocateLogDir() {
  struct Candidate {
    fs::path dir;
    std::string why;
  };
  std::vector<Candidate> candidates;
  if (const fs::path last = LastRunDir(); !last.empty()) {
    candidates.push_back({last, "the latest cuflight run's output"});
  }
  const fs::path local = collector::DefaultLogDir();
  candidates.push_back({local, "the local collector's default log directory"});
  if (local != kSystemLogDir)
    candidates.push_back({kSystemLogDir, "the system collector's log directory"});

  for (const Candidate& c : candidates) {
    if (LogDirInUse(c.dir)) return {c.dir, c.why + ", a collector is writing it now"};
  }
  std::error_code ec;
  for (const Candidate& c : candidates) {
    if (fs::is_directory(c.dir, ec)) return {c.dir, c.why};
  }
  std::string looked;
  for (const Candidate& c : candidates) {
    if (!looked.empty()) looked += ", ";
    looked += c.dir.string();
  }
  return {{},
          "no log directory to follow: no cuflight run recorded here and none of " + looked +
              " exists; name one with --log-dir DIR (a cuflight run --out directory or a "
              "collector's --log-dir), or start cuflight run or cuflight collect"};
}

}  // namespace cuflight::cli
