// Waiting on state another thread or process publishes.
#ifndef CUFLIGHT_TESTS_SUPPORT_WAIT_UNTIL_H_
#define CUFLIGHT_TESTS_SUPPORT_WAIT_UNTIL_H_

#include <chrono>
#include <functional>

namespace cuflight::test_support {

// Waits, polling every `interval`, until `condition` holds or `timeout` passes; returns whether
// it held. The polling is the synchronisation: the condition reads published state.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout = std::chrono::seconds(20),
               std::chrono::milliseconds interval = std::chrono::milliseconds(1));

}  // namespace cuflight::test_support

#endif  // CUFLIGHT_TESTS_SUPPORT_WAIT_UNTIL_H_
