// cuflight-collector: the collector daemon (docs/collector.md). Everything lives in the
// cuflight_collector library.
#include <iostream>

#include "collector_main.h"

int main(int argc, char** argv) {
  return cuflight::collector::RunCollectorMain(argc, argv, "cuflight-collector", std::cout,
                                               std::cerr);
}
