#include "yield_command.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "arg_parse.h"
#include "collector_options.h"
#include "cuflight/base/scoped_fd.h"
#include "cuflight/schema/control.h"
#include "usage_error.h"

namespace cuflight::cli {
namespace {

// How long the collector's answer is waited for.
constexpr int kReplyWaitMs = 5000;
// The longest answer read (64 processes listed at most: a few KiB).
constexpr size_t kMaxReplyBytes = 1 << 20;

// The pid namespace of /proc/<pid> and the pid the process has in it (its last NSpid, Linux
// 4.1+; the pid itself when the line is absent). False when /proc/<pid> does not exist; a
// namespace that cannot be read (another user's process) is 0.
bool ResolvePid(int32_t pid, int32_t* inner_pid, uint64_t* pid_ns) {
  const std::string dir = "/proc/" + std::to_string(pid);
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return false;
  *inner_pid = pid;
  *pid_ns = stat((dir + "/ns/pid").c_str(), &st) == 0 ? st.st_ino : 0;
  std::ifstream status(dir + "/status");
  for (std::string line; std::getline(status, line);) {
    if (!line.starts_with("NSpid:")) continue;
    std::istringstream fields(line.substr(6));
    for (int32_t v = 0; fields >> v;) *inner_pid = v;
  }
  return true;
}

std::string Seconds(uint64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

}  // namespace

uint64_t ParseYieldDuration(std::string_view flag, std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, n);
  const std::string_view unit = text.substr(digits);
  uint64_t scale = 0;
  if (unit.empty() || unit == "s") scale = 1000;
  if (unit == "ms") scale = 1;
  if (unit == "m") scale = 60'000;
  if (unit == "h") scale = 3'600'000;
  const std::string expected =
      "a duration such as 500ms, 90s, 10m or 2h (a bare number is seconds), from 1 ms to 24 h";
  if (digits == 0 || ec != std::errc() || end != text.data() + digits || scale == 0) {
    throw UsageError(std::string(flag) + " '" + std::string(text) + "' is not " + expected);
  }
  if (n == 0 || n > schema::kMaxYieldMs / scale) {
    ThrowOutOfRange(flag, text, expected);
  }
  return n * scale;
}

YieldCommand::YieldCommand(CLI::App* parent) {
  app_ = parent->add_subcommand(
      "yield",
      "Make a recorded process hand CUPTI over for a while, so another CUPTI tool "
      "(torch.profiler) can profile it on CUDA before 13.3 (docs/profilers.md)");
  app_->add_option("--pid", pid_, "The process (as this shell sees it)")->type_name("PID");
  app_->add_option("--job", job_,
                   "Every recorded process of this job (its attribution's job: the SLURM job id, "
                   "TORCHELASTIC_RUN_ID, ...)")
      ->type_name("JOB");
  app_->add_option("--for", for_,
                   "Stay off CUPTI at least this long, then take it back once it is free "
                   "(500ms, 90s, 10m, 2h; default 60s)")
      ->type_name("DURATION");
  app_->add_flag("--resume", resume_, "End a yield now: take CUPTI back as soon as it is free");
  app_->add_option("--socket", socket_,
                   "The collector's socket (default: $CUFLIGHT_COLLECTOR, else the per-user "
                   "default path)")
      ->type_name("PATH");
}

bool YieldCommand::Selected() const { return app_->parsed(); }

int YieldCommand::Run(std::ostream& out, std::ostream& err) const {
  if (pid_.empty() == job_.empty()) {
    throw UsageError("give exactly one of --pid PID and --job JOB");
  }
  if (resume_ && app_->count("--for") > 0) {
    throw UsageError("--for and --resume do not go together (--resume ends a yield now)");
  }
  const uint64_t for_ms = resume_ ? 0 : ParseYieldDuration("--for", for_);
  // Ordered: the type first, as the collector recognises a request (control.h).
  nlohmann::ordered_json request = {{"type", std::string(schema::kYieldRequestType)},
                                    {"version", 1},
                                    {"for_ms", for_ms}};
  std::string what;
  if (!pid_.empty()) {
    const auto pid = static_cast<int32_t>(
        ParseInteger("--pid", pid_, Allowed{1, 2147483647, "", "a process id is"}));
    int32_t inner = 0;
    uint64_t ns = 0;
    if (!ResolvePid(pid, &inner, &ns)) {
      throw UsageError("--pid " + pid_ + ": no such process");
    }
    request["pid"] = inner;
    if (ns != 0) request["pid_ns"] = ns;
    what = "--pid " + pid_;
  } else {
    if (job_.size() > 256) throw UsageError("--job: longer than 256 bytes");
    request["job"] = job_;
    what = "--job " + job_;
  }
  const std::string path =
      socket_.empty() ? collector::DefaultSocketPath().string() : socket_;
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    throw UsageError("--socket: longer than " + std::to_string(sizeof(addr.sun_path) - 1) +
                     " bytes");
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  base::ScopedFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.Get() < 0 ||
      connect(fd.Get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    err << "cuflight yield: cannot reach the collector at " << path << ": "
        << std::strerror(errno) << " (is it running? give its socket with --socket)\n";
    return kExitFailure;
  }
  const std::string line = request.dump() + "\n";
  for (size_t sent = 0; sent < line.size();) {
    const ssize_t n = send(fd.Get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err << "cuflight yield: cannot send to the collector at " << path << ": "
          << std::strerror(errno) << "\n";
      return kExitFailure;
    }
    sent += static_cast<size_t>(n);
  }
  std::string reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kReplyWaitMs);
  while (reply.find('\n') == std::string::npos && reply.size() < kMaxReplyBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd.Get(), POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[4096];
    const ssize_t n = recv(fd.Get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  const nlohmann::json j = nlohmann::json::parse(reply.substr(0, reply.find('\n')), nullptr,
                                                 /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("type") || j["type"] != std::string(schema::kYieldReplyType)) {
    err << "cuflight yield: no answer from the collector at " << path
        << " (a collector older than yield requests closes such a connection)\n";
    return kExitFailure;
  }
  if (j.contains("error")) {
    err << "cuflight yield: the collector refused the request: " << j["error"].get<std::string>()
        << "\n";
    return kExitFailure;
  }
  const uint64_t asked = j.value("asked", uint64_t{0});
  const std::string action = for_ms == 0 ? "take CUPTI back now"
                                         : "yield CUPTI for at least " + Seconds(for_ms);
  for (const nlohmann::json& p : j.value("processes", nlohmann::json::array())) {
    out << "pid " << p.value("pid", 0) << " (" << p.value("exe", std::string()) << "): "
        << (p.value("asked", false) ? "asked to " + action
                                    : "refused: " + p.value("why", std::string()))
        << "\n";
  }
  if (asked == 0) {
    err << "cuflight yield: " << (j.value("matched", uint64_t{0}) == 0
                                      ? "no process recorded by the collector at " + path +
                                            " matches " + what
                                      : std::string("no process was asked (see above)"))
        << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace cuflight::cli
