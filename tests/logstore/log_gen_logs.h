// bench/log_gen's logs read back for its tests: a log written from a spec and its events as the
// log reader gives them (launches expanded), in the order read.
#ifndef CUFLIGHT_TESTS_LOGSTORE_LOG_GEN_LOGS_H_
#define CUFLIGHT_TESTS_LOGSTORE_LOG_GEN_LOGS_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/schema/events.h"
#include "log_gen.h"

namespace cuflight::bench {

struct Log {
  LogTotals totals;
  std::vector<schema::OwnedEvent> events;
  logread::ReadSummary summary;
};

// Writes `spec`'s log under `dir` and reads it back, every file in order on this thread.
inline Log MakeLog(const std::filesystem::path& dir, const LogSpec& spec) {
  Log log;
  std::string error;
  EXPECT_TRUE(WriteLogs(dir, spec, &log.totals, &error)) << error;
  logread::ReadOptions sequential;
  sequential.sequential = true;
  EXPECT_TRUE(logread::ReadLogFiles(
      log.totals.files,
      [&](const schema::OwnedEvent& e, const logread::Origin&) { log.events.push_back(e); },
      sequential, &log.summary, &error))
      << error;
  return log;
}

// The events of type E, in order.
template <class E>
std::vector<E> EventsOf(const Log& log) {
  std::vector<E> out;
  for (const schema::OwnedEvent& e : log.events) {
    if (const E* x = std::get_if<E>(&e)) out.push_back(*x);
  }
  return out;
}

}  // namespace cuflight::bench

#endif  // CUFLIGHT_TESTS_LOGSTORE_LOG_GEN_LOGS_H_
