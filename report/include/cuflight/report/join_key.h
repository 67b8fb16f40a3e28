// The key that joins a kernel_time to its kernel event while reading logs: the process (the
// report's process index, or the export's pid) and the schema's join key (correlation_id, graph
// node, device; cuflight/schema/join_key.h). Shared by the report's model builder and the export.
#ifndef CUFLIGHT_REPORT_JOIN_KEY_H_
#define CUFLIGHT_REPORT_JOIN_KEY_H_

#include <cstddef>
#include <cstdint>

#include "cuflight/schema/join_key.h"

namespace cuflight::report {

struct JoinKey {
  size_t process;
  schema::JoinKey launch;
  bool operator==(const JoinKey&) const = default;
};

struct JoinKeyHash {
  size_t operator()(const JoinKey& k) const {
    return schema::JoinKeyHash()(k.launch) ^ (k.process * 0xC2B2AE3D27D4EB4Full);
  }
};

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_JOIN_KEY_H_
