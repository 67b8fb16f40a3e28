#include "collector_process.h"

#include <cstdio>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <thread>

#include "collector_test_util.h"

extern char** environ;

namespace cuflight::collector::testing {

ChildProcess::ChildProcess(const std::string& binary, const std::vector<std::string>& args,
                           const std::filesystem::path& output)
    : output_(output) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  if (posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ) == 0) pid_ = pid;
  posix_spawn_file_actions_destroy(&actions);
}

ChildProcess::~ChildProcess() {
  if (running()) {
    Signal(SIGKILL);
    Wait(std::chrono::seconds(10));
  }
}

void ChildProcess::Signal(int signo) const {
  if (running()) kill(pid_, signo);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (status_ || pid_ <= 0) return status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string ChildProcess::Output() const {
  std::string out;
  if (FILE* f = std::fopen(output_.c_str(), "rb")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

bool ChildProcess::WaitForOutput(const std::string& text, std::chrono::milliseconds timeout) {
  return WaitUntil(
             [&] {
               if (Output().find(text) != std::string::npos) return true;
               return Wait(std::chrono::milliseconds(0)).has_value();
             },
             timeout) &&
         Output().find(text) != std::string::npos;
}

bool WaitForSocket(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  return WaitUntil([&] { return RawClient::Unix(path).connected(); }, timeout);
}

}  // namespace cuflight::collector::testing
