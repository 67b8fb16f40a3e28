#include "cuflight/transport/collector_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace cuflight::transport {
namespace {

// Sets or unsets XDG_RUNTIME_DIR for one test and restores it afterwards.
class ScopedRuntimeDir {
 public:
  explicit ScopedRuntimeDir(const char* value) {
    if (const char* old = std::getenv("XDG_RUNTIME_DIR")) old_ = old;
    if (value != nullptr) {
      setenv("XDG_RUNTIME_DIR", value, 1);
    } else {
      unsetenv("XDG_RUNTIME_DIR");
    }
  }
  ~ScopedRuntimeDir() {
    if (old_) {
      setenv("XDG_RUNTIME_DIR", old_->c_str(), 1);
    } else {
      unsetenv("XDG_RUNTIME_DIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(CollectorPathTest, UsesXdgRuntimeDirWhenSet) {
  ScopedRuntimeDir env("/run/user/4321");
  EXPECT_EQ(DefaultCollectorPath(), "/run/user/4321/cuflight/collector.sock");
}

TEST(CollectorPathTest, FallsBackToTmpWithTheUid) {
  ScopedRuntimeDir env(nullptr);
  EXPECT_EQ(DefaultCollectorPath(),
            "/tmp/cuflight-" + std::to_string(getuid()) + "/collector.sock");
}

TEST(CollectorPathTest, EmptyXdgRuntimeDirCountsAsUnset) {
  ScopedRuntimeDir env("");
  EXPECT_EQ(DefaultCollectorPath(),
            "/tmp/cuflight-" + std::to_string(getuid()) + "/collector.sock");
}

}  // namespace
}  // namespace cuflight::transport
