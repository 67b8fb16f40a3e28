// A minimal collector for the injected library's tests: a Unix socket server on its own thread
// that stores every line it receives, acknowledges the highest seq after each read, and can be
// waited on.
#ifndef CUFLIGHT_TESTS_INJECT_TEST_COLLECTOR_H_
#define CUFLIGHT_TESTS_INJECT_TEST_COLLECTOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cuflight::inject::testing {

class TestCollector {
 public:
  // Listens on `path` (removed first if it exists).
  explicit TestCollector(std::string path);
  ~TestCollector();

  // Every line received so far (without the '\n').
  std::vector<std::string> Lines();
  // Waits until `predicate(lines)` holds or `timeout`; returns whether it held.
  bool WaitFor(const std::function<bool(const std::vector<std::string>&)>& predicate,
               std::chrono::milliseconds timeout = std::chrono::seconds(20));

 private:
  void Run();

  std::string path_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

// A unique socket path under the test's temporary directory.
std::string TempSocketPath(const std::string& tag);

}  // namespace cuflight::inject::testing

#endif  // CUFLIGHT_TESTS_INJECT_TEST_COLLECTOR_H_
