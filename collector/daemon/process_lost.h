// The collector-made `process_lost` line: appended to a producer's log when its connection ended
// without a process_end (the process crashed, was killed, or the collector stopped first), so
// that a post-mortem reader knows the log ends there and why.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_PROCESS_LOST_H_
#define CUFLIGHT_COLLECTOR_DAEMON_PROCESS_LOST_H_

#include <cstdint>
#include <optional>
#include <string>

#include "cuflight/schema/events.h"

namespace cuflight::collector {

struct ProcessLostRecord {
  int64_t ts_ns = 0;                 // when the collector wrote it (CLOCK_REALTIME ns)
  int32_t pid = 0;                   // the producer's pid as the log records it
  std::optional<uint64_t> last_seq;  // highest seq of the process in its log, if any
  schema::LostReason reason = schema::LostReason::kDisconnected;
  uint64_t events_stored = 0;  // events of the process this collector stored
  uint64_t events_lost = 0;    // gaps, and refused lines not sent again (ProducerProcess::lost)
  // Of events_stored, recovered from the producer's black box; set when one was read.
  std::optional<uint64_t> events_recovered;
};

// The event line, ending in '\n'. Never empty.
std::string EncodeProcessLost(const ProcessLostRecord& record);

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_PROCESS_LOST_H_
