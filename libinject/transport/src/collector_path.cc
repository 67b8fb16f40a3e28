#include "cuflight/transport/collector_path.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace cuflight::transport {

std::string DefaultCollectorPath() {
  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  if (runtime_dir != nullptr && runtime_dir[0] != '\0') {
    return std::string(runtime_dir) + "/cuflight/collector.sock";
  }
  return "/tmp/cuflight-" + std::to_string(getuid()) + "/collector.sock";
}

}  // namespace cuflight::transport
