// The ring between the CUPTI callbacks (producers, any application thread) and the sender thread
// (the one consumer). In the injected library it lies in the black box (the memfd shared with the
// collector), so its slots and control words have the black box's layout.
#ifndef CUFLIGHT_LIBINJECT_SRC_LAUNCH_RING_H_
#define CUFLIGHT_LIBINJECT_SRC_LAUNCH_RING_H_

#include <cstddef>

#include "cuflight/blackbox/region_layout.h"
#include "cuflight/inject/ring.h"
#include "launch_record.h"

namespace cuflight::inject {

using LaunchRing = MpscRing<LaunchRecord>;

static_assert(sizeof(LaunchRing::Slot) == blackbox::kRingSlotBytes);
static_assert(offsetof(LaunchRing::Slot, data) == blackbox::kRingSlotRecordOffset);
static_assert(sizeof(LaunchRing::Control) == blackbox::kRingControlBytes);
static_assert(offsetof(LaunchRing::Control, enqueue_pos) == blackbox::kRingEnqueueOffset);
static_assert(offsetof(LaunchRing::Control, dequeue_pos) == blackbox::kRingDequeueOffset);
static_assert(offsetof(LaunchRing::Control, dropped) == blackbox::kRingDroppedOffset);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_LAUNCH_RING_H_
