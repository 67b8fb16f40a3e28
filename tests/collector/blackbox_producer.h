// Producer processes for the black box tests: forked from the test, which prepares every byte
// first (the children make only system calls: the test has threads), they connect to the
// collector's Unix socket, pass descriptors with their first bytes and send them, then die or
// linger.
#ifndef CUFLIGHT_TESTS_COLLECTOR_BLACKBOX_PRODUCER_H_
#define CUFLIGHT_TESTS_COLLECTOR_BLACKBOX_PRODUCER_H_

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace cuflight::collector::testing {

// How a producer ends after sending its bytes.
enum class End {
  kKill,    // SIGKILLs itself at once
  kLinger,  // closes its connection and waits for the test's SIGKILL
  kHold,    // keeps its connection open and waits for the test's SIGKILL (dies with it open)
};

// What a producer passes of itself after `fds`, as the injected library does
// (cuflight/transport/sender.h, design point 11): nothing, a pidfd of itself (pidfd_open, Linux
// 5.3), or its /proc directory (opened O_PATH, any kernel).
enum class Self { kNothing, kPidfd, kProcDir };

// A producer process: connects to `socket`, passes `fds` (and what `self` says; at most 4 in
// all) with the first bytes, sends `bytes` (far below the socket's buffer: one sendmsg), then
// ends as `end` says.
pid_t SpawnProducer(const std::filesystem::path& socket, const std::string& bytes,
                    std::vector<int> fds, End end, Self self = Self::kNothing);

// Waits for `pid` (SIGKILLed first when `kill_first`) and expects it to have died of SIGKILL.
void Reap(pid_t pid, bool kill_first);

}  // namespace cuflight::collector::testing

#endif  // CUFLIGHT_TESTS_COLLECTOR_BLACKBOX_PRODUCER_H_
