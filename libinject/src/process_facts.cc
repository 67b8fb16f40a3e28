#include "process_facts.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>

namespace cuflight::inject {
namespace {

std::string ReadFile(const char* path) {
  std::string out;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

// Process start from /proc/self/stat field 22 (clock ticks after boot) and /proc/stat btime.
int64_t ProcessStartNs() {
  const std::string stat = ReadFile("/proc/self/stat");
  const size_t paren = stat.rfind(')');  // comm may contain spaces and parentheses
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) start_ticks = std::strtoull(field.c_str(), nullptr, 10);
  }
  const std::string proc_stat = ReadFile("/proc/stat");
  const size_t pos = proc_stat.find("\nbtime ");
  if (pos == std::string::npos || start_ticks == 0) return 0;
  const long long btime = std::strtoll(proc_stat.c_str() + pos + 7, nullptr, 10);
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  if (ticks_per_second <= 0) return 0;
  return btime * 1000000000LL +
         static_cast<int64_t>(start_ticks) * (1000000000LL / ticks_per_second);
}

}  // namespace

ProcessFacts ReadProcessFacts() {
  ProcessFacts facts;
  facts.pid = static_cast<int32_t>(getpid());
  facts.ppid = static_cast<int32_t>(getppid());
  facts.uid = static_cast<int64_t>(getuid());
  char exe[PATH_MAX + 1] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, PATH_MAX);
  if (n > 0) facts.exe.assign(exe, static_cast<size_t>(n));
  const std::string cmdline = ReadFile("/proc/self/cmdline");
  size_t start = 0;
  while (start < cmdline.size()) {
    size_t end = cmdline.find('\0', start);
    if (end == std::string::npos) end = cmdline.size();
    facts.argv.emplace_back(cmdline, start, end - start);
    start = end + 1;
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) facts.hostname = host;
  facts.start_ns = ProcessStartNs();
  return facts;
}

}  // namespace cuflight::inject
