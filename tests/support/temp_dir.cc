#include "temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>

namespace cuflight::test_support {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/cuflight-test-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return;
  }
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

ReadableCopies::ReadableCopies(const std::vector<std::string>& files) {
  std::string templ = "/tmp/cuflight-bin-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return;
  }
  dir_ = templ;
  ::chmod(dir_.c_str(), 0755);
  for (const std::string& file : files) {
    const std::filesystem::path to = dir_ / std::filesystem::path(file).filename();
    std::error_code ec;
    std::filesystem::copy_file(file, to, std::filesystem::copy_options::overwrite_existing, ec);
    EXPECT_FALSE(ec) << "copy " << file << " to " << to << ": " << ec.message();
    ::chmod(to.c_str(), 0755);
    copies_.emplace_back(file, to.string());
  }
}

ReadableCopies::~ReadableCopies() {
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string ReadableCopies::Of(const std::string& file) const {
  for (const auto& [original, copy] : copies_) {
    if (original == file) return copy;
  }
  ADD_FAILURE() << file << " was not copied";
  return "";
}

std::string SharedReadableCopy(const std::string& file) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<ReadableCopies>> copies;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<ReadableCopies>& copy = copies[file];
  if (copy == nullptr) copy = std::make_unique<ReadableCopies>(std::vector<std::string>{file});
  return copy->Of(file);
}

namespace {

// The process's socket directory, removed at exit by the process that made it (not by a forked
// child that runs exit handlers).
class SocketDir {
 public:
  SocketDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/cfs-XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << templ << ": " << std::strerror(errno);
      return;
    }
    path_ = templ;
  }
  ~SocketDir() {
    std::error_code ec;
    if (getpid() == owner_ && !path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  pid_t owner_ = getpid();
  std::string path_;
};

}  // namespace

std::string TempSocketPath(const std::string& tag) {
  static SocketDir dir;
  static std::atomic<int> counter{0};
  return dir.path() + "/" + tag + "-" + std::to_string(counter.fetch_add(1)) + ".sock";
}

}  // namespace cuflight::test_support
