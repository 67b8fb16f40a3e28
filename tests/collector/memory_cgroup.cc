#include "memory_cgroup.h"

#include <linux/magic.h>
#include <signal.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace cuflight::collector::testing {
namespace {

namespace fs = std::filesystem;

bool WriteFile(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

std::string ReadFile(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value after "key " in a flat-keyed file (memory.events, memory.oom_control).
uint64_t KeyedValue(const fs::path& file, const std::string& key) {
  std::istringstream in(ReadFile(file));
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

uint64_t Number(const fs::path& file) {
  const std::string text = ReadFile(file);
  return text.empty() ? 0 : std::stoull(text);
}

bool IsFs(const fs::path& dir, int64_t magic) {
  struct statfs s {};
  return statfs(dir.c_str(), &s) == 0 && static_cast<int64_t>(s.f_type) == magic;
}

std::string Name() {
  static int made = 0;
  return "cuflight-test-" + std::to_string(getpid()) + "-" + std::to_string(++made);
}

}  // namespace

MemoryCgroup::MemoryCgroup(uint64_t limit_bytes) {
  const fs::path root = "/sys/fs/cgroup";
  std::error_code ec;
  if (IsFs(root, CGROUP2_SUPER_MAGIC) &&
      ReadFile(root / "cgroup.controllers").find("memory") != std::string::npos) {
    v2_ = true;
    kind_ = "cgroup v2";
    // The root's children get the memory controller only when it is enabled for them.
    if (ReadFile(root / "cgroup.subtree_control").find("memory") == std::string::npos &&
        !WriteFile(root / "cgroup.subtree_control", "+memory")) {
      skip_reason_ = "cannot enable the memory controller in /sys/fs/cgroup (needs root)";
      return;
    }
    dir_ = root / Name();
  } else if (IsFs(root / "memory", CGROUP_SUPER_MAGIC) &&
             fs::exists(root / "memory" / "memory.limit_in_bytes")) {
    kind_ = "cgroup v1";
    dir_ = root / "memory" / Name();
  } else {
    skip_reason_ =
        "no memory cgroup controller: neither cgroup v2 with memory at /sys/fs/cgroup nor the "
        "v1 memory controller at /sys/fs/cgroup/memory";
    return;
  }
  if (!fs::create_directory(dir_, ec)) {
    skip_reason_ = "cannot make the cgroup " + dir_.string() + " (needs root): " + ec.message();
    dir_.clear();
    return;
  }
  const std::string limit = std::to_string(limit_bytes);
  if (v2_) {
    if (!WriteFile(dir_ / "memory.max", limit)) skip_reason_ = "cannot set memory.max";
    WriteFile(dir_ / "memory.swap.max", "0");  // absent without swap accounting
  } else {
    if (!WriteFile(dir_ / "memory.limit_in_bytes", limit)) {
      skip_reason_ = "cannot set memory.limit_in_bytes";
    }
    WriteFile(dir_ / "memory.memsw.limit_in_bytes", limit);  // absent without swap accounting
  }
}

MemoryCgroup::~MemoryCgroup() {
  if (dir_.empty()) return;
  // Bounded: what is left is killed, and a killed process leaves within a few seconds.
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::istringstream procs(ReadFile(procs_file()));
    pid_t pid = 0;
    bool any = false;
    while (procs >> pid) {
      kill(pid, SIGKILL);
      any = true;
    }
    if (!any && rmdir(dir_.c_str()) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

uint64_t MemoryCgroup::current() const {
  return Number(dir_ / (v2_ ? "memory.current" : "memory.usage_in_bytes"));
}

std::optional<uint64_t> MemoryCgroup::peak() const {
  const fs::path file = dir_ / (v2_ ? "memory.peak" : "memory.max_usage_in_bytes");
  if (!fs::exists(file)) return std::nullopt;
  return Number(file);
}

uint64_t MemoryCgroup::oom_kills() const {
  return v2_ ? KeyedValue(dir_ / "memory.events", "oom_kill")
             : KeyedValue(dir_ / "memory.oom_control", "oom_kill");
}

}  // namespace cuflight::collector::testing
