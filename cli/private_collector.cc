#include "private_collector.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "collector_options.h"

namespace cuflight::cli {
namespace {

// Room left for "/collector.sock" inside sun_path (108 bytes with its NUL).
constexpr size_t kMaxSocketDirLength = 80;
// How often the counters are looked at while waiting. The collector publishes them at the end of
// every loop turn and at least every 100 ms.
constexpr std::chrono::milliseconds kPollInterval{10};

std::filesystem::path MakeSocketDir(std::string* error) {
  std::string base = "/tmp";
  if (const char* tmpdir = getenv("TMPDIR");
      tmpdir != nullptr && tmpdir[0] == '/' && std::strlen(tmpdir) < kMaxSocketDirLength - 20) {
    base = tmpdir;
  }
  std::string templ = base + "/cuflight-run-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {  // mode 0700
    *error = "cannot create a socket directory in " + base + ": " + std::strerror(errno);
    return {};
  }
  return templ;
}

std::shared_ptr<spdlog::logger> MakeLogger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("cuflight run collector", sink);
  logger->set_pattern("cuflight run: collector: %l: %v");
  logger->set_level(spdlog::level::warn);
  return logger;
}

}  // namespace

std::unique_ptr<PrivateCollector> PrivateCollector::Start(const std::filesystem::path& log_dir,
                                                          collector::StartupError* error) {
  std::unique_ptr<PrivateCollector> self(new PrivateCollector());
  self->socket_dir_ = MakeSocketDir(&error->line);
  if (self->socket_dir_.empty()) {
    error->exit_code = 1;
    return nullptr;
  }
  collector::CollectorOptions options;
  options.socket = self->socket_dir_ / "collector.sock";
  options.log_dir = log_dir;
  options.log_level = "warn";
  // Every producer of a run is the user's own: no share to keep for other users.
  options.max_connections_per_uid = options.max_connections;
  self->collector_ = collector::Collector::Create(options, nullptr, MakeLogger(), error);
  if (!self->collector_) {
    std::error_code ec;
    std::filesystem::remove_all(self->socket_dir_, ec);
    return nullptr;
  }
  self->socket_path_ = self->collector_->socket_path();
  collector::Collector* c = self->collector_.get();
  self->thread_ = std::thread([self_ptr = self.get(), c] { self_ptr->status_ = c->Run(); });
  return self;
}

PrivateCollector::~PrivateCollector() { Stop(); }

bool PrivateCollector::WaitForProducers(
    std::chrono::milliseconds timeout,
    const std::function<bool(std::chrono::milliseconds)>& pause) {
  if (!collector_ || !thread_.joinable()) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
  };
  // A loop turn that begins after this point takes every connection already queued on the
  // listening socket (epoll is level-triggered). A reopen request is the one request that is
  // answered at the end of such a turn with a visible count; reopening the run's few log files
  // changes nothing in them.
  const uint64_t reopens = collector_->stats().reopens;
  collector_->RequestReopen();
  while (collector_->stats().reopens == reopens) {
    if (left().count() <= 0 || !pause(std::min(kPollInterval, left()))) return false;
  }
  while (collector_->stats().connections_open != 0) {
    if (left().count() <= 0 || !pause(std::min(kPollInterval, left()))) return false;
  }
  return true;
}

int PrivateCollector::Stop() {
  if (thread_.joinable()) {
    collector_->RequestStop();
    thread_.join();
  }
  if (!socket_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(socket_dir_, ec);
    socket_dir_.clear();
  }
  return status_;
}

collector::IngestStats PrivateCollector::stats() const {
  return collector_ ? collector_->stats() : collector::IngestStats{};
}

}  // namespace cuflight::cli
