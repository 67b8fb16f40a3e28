// Runs `cuflight report ARGS...` in process through cli::RunCli (with no GPU to query), for the
// report tests.
#ifndef CUFLIGHT_TESTS_REPORT_REPORT_CLI_RUN_H_
#define CUFLIGHT_TESTS_REPORT_REPORT_CLI_RUN_H_

#include <string>
#include <vector>

namespace cuflight::report::testing {

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

CliRun Report(const std::vector<std::string>& args);

}  // namespace cuflight::report::testing

#endif  // CUFLIGHT_TESTS_REPORT_REPORT_CLI_RUN_H_
