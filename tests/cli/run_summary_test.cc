// What `cuflight run` says after the application ended (run_summary.h), for the cases a real run
// reaches only by a race: nothing stored because a signal killed the application before the
// injected library's first flush, and nothing stored after a normal exit.
#include "run_summary.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <sstream>
#include <string>

namespace cuflight::cli {
namespace {

std::string Summary(const RunSummaryInput& input) {
  std::ostringstream err;
  PrintRunSummary(input, err);
  return err.str();
}

TEST(RunSummary, NothingStoredAfterAKillSaysItWasKilledBeforeItsFirstFlush) {
  RunSummaryInput input;
  input.log_dir = "/tmp/logs";
  input.exit_code = 128 + SIGKILL;
  input.term_signal = SIGKILL;
  input.flush_ms = 100;
  EXPECT_EQ(Summary(input),
            "cuflight run: application killed by SIGKILL (status 137); 0 processes recorded, 0 "
            "events in 0 files under /tmp/logs\n"
            "  nothing reached the collector: the application was killed by SIGKILL before the "
            "injected library's first flush (it sends what it recorded every 100 ms, --flush-ms, "
            "and a killed process cannot send the rest); whether it launched kernels is "
            "unknown\n");
}

TEST(RunSummary, NothingStoredAfterAnExitSaysNoLaunchWasSeen) {
  RunSummaryInput input;
  input.log_dir = "/tmp/logs";
  input.exit_code = 3;
  const std::string out = Summary(input);
  EXPECT_EQ(out.rfind("cuflight run: application exited with status 3; 0 processes recorded, 0 "
                      "events in 0 files under /tmp/logs\n  no events: the application made no "
                      "CUDA launch the injected library saw",
                      0),
            0u)
      << out;
}

}  // namespace
}  // namespace cuflight::cli
