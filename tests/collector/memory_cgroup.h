// A memory cgroup a test makes for a process it starts (the collector), so that what the kernel
// charges that process (its heap, and the tmpfs pages it makes the kernel allocate) can be read
// and limited: cgroup v2 at /sys/fs/cgroup (memory.max, memory.current, memory.peak,
// memory.events; Documentation/admin-guide/cgroup-v2.rst), else the v1 memory controller at
// /sys/fs/cgroup/memory (memory.limit_in_bytes, memory.usage_in_bytes,
// memory.max_usage_in_bytes, memory.oom_control; Documentation/admin-guide/cgroup-v1/memory.rst).
// Needs root (or a delegated cgroup); skip_reason() says why it could not be made.
#ifndef CUFLIGHT_TESTS_COLLECTOR_MEMORY_CGROUP_H_
#define CUFLIGHT_TESTS_COLLECTOR_MEMORY_CGROUP_H_

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace cuflight::collector::testing {

class MemoryCgroup {
 public:
  // Makes a cgroup of its own with a memory limit of `limit_bytes` and no swap (where the
  // kernel lets it be set).
  explicit MemoryCgroup(uint64_t limit_bytes);
  // SIGKILLs what is still in it and removes it.
  ~MemoryCgroup();
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;

  // "" when made; else why not (a skip reason).
  const std::string& skip_reason() const { return skip_reason_; }
  // "cgroup v2" or "cgroup v1".
  const std::string& kind() const { return kind_; }
  // The file a process writes its pid to in order to join ("echo $$ > procs_file").
  std::filesystem::path procs_file() const { return dir_ / "cgroup.procs"; }

  // Bytes charged now (memory.current; v1 memory.usage_in_bytes).
  uint64_t current() const;
  // The most ever charged (memory.peak, Linux 5.19; v1 memory.max_usage_in_bytes); nullopt
  // when the kernel does not keep it.
  std::optional<uint64_t> peak() const;
  // Processes the OOM killer killed in it (memory.events oom_kill; v1 memory.oom_control
  // oom_kill, Linux 4.13).
  uint64_t oom_kills() const;

 private:
  std::filesystem::path dir_;
  bool v2_ = false;
  std::string kind_;
  std::string skip_reason_;
};

}  // namespace cuflight::collector::testing

#endif  // CUFLIGHT_TESTS_COLLECTOR_MEMORY_CGROUP_H_
