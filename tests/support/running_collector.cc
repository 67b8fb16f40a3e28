#include "running_collector.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "log_files.h"
#include "wait_until.h"

namespace cuflight::test_support {

collector::CollectorOptions TestOptions(const std::filesystem::path& dir) {
  collector::CollectorOptions o;
  o.socket = dir / "run" / "collector.sock";
  o.log_dir = dir / "logs";
  o.rotate_bytes = 1ull << 40;
  o.reconnect_grace = std::chrono::milliseconds(0);
  return o;
}

class StringSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    text_.append(formatted.data(), formatted.size());
  }
  void flush_() override {}

 private:
  std::string text_;
};

CapturedLog::CapturedLog() : sink_(std::make_shared<StringSink>()) {
  sink_->set_pattern("%l %v");
  logger_ = std::make_shared<spdlog::logger>("test-collector", sink_);
  logger_->set_level(spdlog::level::debug);
}

std::string CapturedLog::text() const { return sink_->text(); }

RunningCollector::RunningCollector(const collector::CollectorOptions& options,
                                   collector::Metrics* metrics,
                                   std::shared_ptr<spdlog::logger> logger) {
  if (!logger) {
    logger = std::make_shared<spdlog::logger>("quiet");
    logger->set_level(spdlog::level::off);
  }
  collector::StartupError error;
  collector_ = collector::Collector::Create(options, metrics, std::move(logger), &error);
  if (!collector_) {
    ADD_FAILURE() << "Collector::Create failed (" << error.exit_code << "): " << error.line;
    return;
  }
  running_ = true;
  thread_ = std::thread([this] { status_ = collector_->Run(); });
}

RunningCollector::~RunningCollector() { Stop(); }

int RunningCollector::Stop() {
  if (!running_) return -1;
  collector_->RequestStop();
  thread_.join();
  running_ = false;
  return status_;
}

StoringCollector::StoringCollector(const std::string& socket_path,
                                   std::chrono::milliseconds reconnect_grace)
    : StoringCollector(socket_path, std::filesystem::path(), reconnect_grace) {}

StoringCollector::StoringCollector(const std::string& socket_path,
                                   const std::filesystem::path& log_dir,
                                   std::chrono::milliseconds reconnect_grace) {
  collector::CollectorOptions options = TestOptions(dir_.path());
  options.socket = socket_path;
  if (!log_dir.empty()) options.log_dir = log_dir;
  options.reconnect_grace = reconnect_grace;
  log_dir_ = options.log_dir;
  running_ = std::make_unique<RunningCollector>(options);
}

std::vector<std::string> StoringCollector::Lines() const { return StoredLines(log_dir_); }

std::vector<std::string> StoringCollector::ExpandedLines() const {
  return test_support::ExpandedLines(log_dir_);
}

bool StoringCollector::WaitFor(
    const std::function<bool(const std::vector<std::string>&)>& predicate,
    std::chrono::milliseconds timeout) const {
  return WaitUntil([&] { return predicate(Lines()); }, timeout, std::chrono::milliseconds(2));
}

std::vector<schema::OwnedEvent> StoringCollector::Events() const { return DecodeLogs(log_dir_); }

std::vector<uint64_t> StoringCollector::StoredSeqs(int64_t pid) const {
  return test_support::StoredSeqs(log_dir_, pid);
}

bool HasProcessEnd(const std::vector<std::string>& lines) {
  return std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("\"type\":\"process_end\"") != std::string::npos;
  });
}

}  // namespace cuflight::test_support
