// Runs a program to completion and captures what it wrote, for tests that drive the real
// `cuflight` binary.
#ifndef CUFLIGHT_TESTS_CLI_SUBPROCESS_H_
#define CUFLIGHT_TESTS_CLI_SUBPROCESS_H_

#include <string>
#include <vector>

namespace cuflight::testing {

struct ProcessResult {
  int exit_code = -1;  // exit status, or 128 + signal number when killed by a signal
  std::string out;
  std::string err;
};

// Runs `path` with `args` (argv[1..]) with an empty stdin and the test's environment, reading
// stdout and stderr concurrently so neither pipe can fill and block the child. Returns
// exit_code -1 when the program cannot be started.
ProcessResult RunProcess(const std::string& path, const std::vector<std::string>& args);

// The value of environment variable `variable` when set and non-empty, else `built_in`: lets a
// test built here run from a copy of the binaries elsewhere (scripts/gpu_check/pack), where the
// paths compiled in do not exist.
std::string PathFromEnv(const char* variable, const char* built_in);

// The path of program `name` found on $PATH (else in /usr/bin, /bin), or "" when there is none.
std::string FindProgram(const std::string& name);

// `strace` options that inject `action` (e.g. "delay_enter=100000", "delay_exit=150000") at every
// call of `syscall` in every thread and child of the tracee, and stop it only at those calls
// (--seccomp-bpf); put "--", the program and its arguments after them. Returns {} with *why set
// when strace is missing or cannot trace here (no ptrace permission in a container, say); *strace
// is its path.
std::vector<std::string> StraceInject(const std::string& syscall, const std::string& action,
                                      std::string* strace, std::string* why);

}  // namespace cuflight::testing

#endif  // CUFLIGHT_TESTS_CLI_SUBPROCESS_H_
