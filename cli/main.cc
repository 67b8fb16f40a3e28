// cuflight: the command-line front end. Everything lives in the cuflight_cli library.
#include <iostream>
#include <memory>

#include "app.h"
#include "device_query.h"
#include "usage_error.h"

int main(int argc, char** argv) {
  const std::unique_ptr<cuflight::cli::DeviceQuery> query = cuflight::cli::MakeDriverDeviceQuery();
  const int status = cuflight::cli::RunCli(argc, argv, std::cout, std::cerr, *query);
  std::cout.flush();
  return std::cout.good() ? status : cuflight::cli::kExitFailure;
}
