#include "report_cli_run.h"

#include <sstream>

#include "app.h"
#include "device_query.h"

namespace cuflight::report::testing {
namespace {

class NoDevice : public cli::DeviceQuery {
 public:
  bool Query(int, cli::QueriedDevice*, std::string* error) override {
    *error = "no device";
    return false;
  }
};

}  // namespace

CliRun Report(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"cuflight", "report"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  NoDevice query;
  const int code = cli::RunCli(static_cast<int>(argv.size()), argv.data(), out, err, query);
  return {code, out.str(), err.str()};
}

}  // namespace cuflight::report::testing
