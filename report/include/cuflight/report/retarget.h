// --retarget: a signature's occupancy recomputed for another GPU from the kernel's resources
// (registers, static and dynamic shared memory, block, grid, cluster, carveout, the function's
// thread limit), with the occupancy engine.
#ifndef CUFLIGHT_REPORT_RETARGET_H_
#define CUFLIGHT_REPORT_RETARGET_H_

#include "cuflight/occupancy/engine.h"
#include "cuflight/report/report_model.h"

namespace cuflight::report {

// The launch the signature's representative kernel event describes. A launch that used more
// shared memory than the device allows without opt-in must have opted in, so its dynamic-smem
// limit is set to what it used; otherwise the driver's default applies.
occupancy::LaunchConfig LaunchOf(const schema::OwnedKernelEvent& kernel,
                                 const occupancy::DeviceLimits& target);

// Computes the launch on `device` and says what changes against the event's own occupancy.
Retarget RetargetSignature(const Signature& signature, const occupancy::DeviceContext& device);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_RETARGET_H_
