#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;

namespace cuflight::testing {
namespace {

class Pipe {
 public:
  Pipe() {
    if (pipe2(fds_.data(), O_CLOEXEC) != 0) fds_ = {-1, -1};
  }
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;

  bool Ok() const { return fds_[0] >= 0; }
  int ReadEnd() const { return fds_[0]; }
  int WriteEnd() const { return fds_[1]; }
  void CloseRead() { Close(&fds_[0]); }
  void CloseWrite() { Close(&fds_[1]); }

 private:
  static void Close(int* fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  std::array<int, 2> fds_{-1, -1};
};

}  // namespace

ProcessResult RunProcess(const std::string& path, const std::vector<std::string>& args) {
  ProcessResult result;
  Pipe out;
  Pipe err;
  if (!out.Ok() || !err.Ok()) return result;

  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.WriteEnd(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.WriteEnd(), STDERR_FILENO);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  out.CloseWrite();
  err.CloseWrite();
  if (spawned != 0) return result;

  std::array<pollfd, 2> fds = {pollfd{out.ReadEnd(), POLLIN, 0},
                               pollfd{err.ReadEnd(), POLLIN, 0}};
  std::array<std::string*, 2> sinks = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // the Pipe closes it
        --open_fds;
      }
    }
  }

  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return result;
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

std::string PathFromEnv(const char* variable, const char* built_in) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? std::string(value) : std::string(built_in);
}

std::string FindProgram(const std::string& name) {
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): read-only here
  const std::string dirs = path != nullptr && *path != '\0' ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

std::vector<std::string> StraceInject(const std::string& syscall, const std::string& action,
                                      std::string* strace, std::string* why) {
  *strace = FindProgram("strace");
  if (strace->empty()) {
    *why = "strace is not installed (Debian package strace)";
    return {};
  }
  std::vector<std::string> args = {
      "-f", "--seccomp-bpf",    "-o", "/dev/null",
      "-e", "trace=" + syscall, "-e", "inject=" + syscall + ":" + action};
  std::vector<std::string> probe = args;
  probe.push_back("--");
  probe.push_back("/bin/true");
  const ProcessResult r = RunProcess(*strace, probe);
  if (r.exit_code != 0) {
    *why = "strace cannot trace here: " + r.err;
    return {};
  }
  return args;
}

}  // namespace cuflight::testing
