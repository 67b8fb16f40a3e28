#include "process_lost.h"

#include <array>

#include "cuflight/schema/encoder.h"

namespace cuflight::collector {

std::string EncodeProcessLost(const ProcessLostRecord& record) {
  schema::ProcessLostEvent event;
  event.header.ts_ns = record.ts_ns;
  event.header.pid = record.pid;
  event.header.seq = record.last_seq.value_or(0);
  event.last_seq = record.last_seq;
  event.reason = record.reason;
  event.events_stored = record.events_stored;
  event.events_lost = record.events_lost;
  event.events_recovered = record.events_recovered;
  // Every field is a number or a short fixed word: 512 bytes is several times the longest line.
  std::array<char, 512> buf;
  const size_t n = schema::Encode(event, buf.data(), buf.size());
  return std::string(buf.data(), n);
}

}  // namespace cuflight::collector
