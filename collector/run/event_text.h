// One event as one human-readable line, for `cuflight tail`.
#ifndef CUFLIGHT_COLLECTOR_RUN_EVENT_TEXT_H_
#define CUFLIGHT_COLLECTOR_RUN_EVENT_TEXT_H_

#include <string>

#include "cuflight/schema/events.h"

namespace cuflight::run {

// "<HH:MM:SS.mmm local time of ts_ns> pid <pid> <type> <the fields that matter>", without a
// newline, e.g.
//   12:04:31.207 pid 4242 kernel vecadd(float*, int) grid 1024x1x1 block 256x1x1 regs 64
//       smem 9216 occupancy 0.50 (registers) stream 0x7f..  corr 17
// (one line). A stall event says what each listed stream waits on:
//   12:05:13.002 pid 4242 stall STALLED 42.0 s: device 0 stream 0xe waits on spin(int volatile*)
//       grid 1x1x1 block 32x1x1 occupancy 0.02 launched 42.0 s ago corr 17 (+2 queued); 1 stream
//       stalled, 0 kernels finished since the last report
// Control characters in names are shown as '?'. Types this build prints no fields for show their
// seq. Never throws except std::bad_alloc.
std::string EventText(const schema::OwnedEvent& event);

}  // namespace cuflight::run

#endif  // CUFLIGHT_COLLECTOR_RUN_EVENT_TEXT_H_
