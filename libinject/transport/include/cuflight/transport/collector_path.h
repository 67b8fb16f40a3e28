// The collector's default socket path (docs/protocol.md, "Transport").
#ifndef CUFLIGHT_TRANSPORT_COLLECTOR_PATH_H_
#define CUFLIGHT_TRANSPORT_COLLECTOR_PATH_H_

#include <string>

namespace cuflight::transport {

// "$XDG_RUNTIME_DIR/cuflight/collector.sock" when XDG_RUNTIME_DIR is set and not empty, else
// "/tmp/cuflight-<uid>/collector.sock" with the real uid. $CUFLIGHT_COLLECTOR, which overrides
// both, is read by the configuration, not here. Reads the environment (not thread-safe against a
// concurrent setenv); allocates the result, so it may throw std::bad_alloc and nothing else.
std::string DefaultCollectorPath();

}  // namespace cuflight::transport

#endif  // CUFLIGHT_TRANSPORT_COLLECTOR_PATH_H_
