// The ring between the CUPTI callbacks (producers, any application thread) and the sender thread
// (the one consumer).
#ifndef CUFLIGHT_LIBINJECT_SRC_LAUNCH_RING_H_
#define CUFLIGHT_LIBINJECT_SRC_LAUNCH_RING_H_

#include "cuflight/inject/ring.h"
#include "launch_record.h"

namespace cuflight::inject {

using LaunchRing = MpscRing<LaunchRecord>;

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_LAUNCH_RING_H_
