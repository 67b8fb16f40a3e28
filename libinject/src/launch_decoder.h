// Launch decoding: the CUPTI driver-domain parameter struct of a launch callback -> the launch's
// function, grid, block, dynamic shared memory, stream, cluster, cooperative flag and whether it
// may overlap the previous kernel of its stream (programmatic dependent launch).
//
// Covers cuLaunchKernel(_ptsz), cuLaunchKernelEx(_ptsz) (grid, block, smem and stream from the
// CUlaunchConfig; cluster dimension, cooperative, programmatic stream serialization and the shared
// memory carveout preference from its attributes),
// cuLaunchCooperativeKernel(_ptsz), cuLaunchCooperativeKernelMultiDevice (one launch per entry of
// its list) and the legacy cuLaunch / cuLaunchGrid / cuLaunchGridAsync (whose block shape and
// shared memory come from earlier cuFuncSetBlockShape / cuFuncSetSharedSize calls, which the
// caller tracks and passes in through `legacy`). Runtime launches (<<<>>>, cudaLaunchKernel,
// cudaLaunchKernelExC, cudaLaunchCooperativeKernel) reach the driver as one of these calls.
//
// Pure functions over the parameter structs: no driver call, no allocation, noexcept.
#ifndef CUFLIGHT_LIBINJECT_SRC_LAUNCH_DECODER_H_
#define CUFLIGHT_LIBINJECT_SRC_LAUNCH_DECODER_H_

#include <cuda.h>
#include <cupti.h>

#include <cstdint>
#include <optional>

#include "launch_record.h"

namespace cuflight::inject {

struct DecodedLaunch {
  uint64_t function = 0;  // CUfunction (or CUkernel) handle
  LaunchApi api = LaunchApi::kLaunchKernel;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t cluster[3] = {0, 0, 0};  // from CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; 0s: none given
  uint32_t dyn_smem = 0;
  uint64_t stream = 0;
  // CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT (0..100), which takes precedence over
  // the function's carveout attribute; -1: none given.
  int32_t carveout = -1;
  bool cooperative = false;
  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION non-0 (cuLaunchKernelEx): the kernel
  // may overlap the previous one of its stream (programmatic dependent launch).
  bool programmatic_serialization = false;
  // A _ptsz entry point: stream 0 is the calling thread's per-thread default stream
  // (CU_STREAM_PER_THREAD), not the legacy NULL stream.
  bool per_thread_default_stream = false;

  // The stream handle to ask the driver about (e.g. whether it is capturing).
  uint64_t driver_stream() const {
    return stream == 0 && per_thread_default_stream
               ? reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD)
               : stream;
  }
};

// Block shape and shared memory set by cuFuncSetBlockShape / cuFuncSetSharedSize for a function,
// used by the legacy cuLaunch* calls.
struct LegacyLaunchState {
  uint32_t block[3] = {1, 1, 1};
  uint32_t smem = 0;
};

// The launch API of a driver callback id, or nullopt when the callback is not a kernel launch.
// Inline: every callback asks it (a launch's entry and exit, more than once).
inline std::optional<LaunchApi> LaunchApiOf(CUpti_CallbackId cbid) noexcept {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      return LaunchApi::kLaunchKernel;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return LaunchApi::kLaunchKernelPtsz;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      return LaunchApi::kLaunchKernelEx;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return LaunchApi::kLaunchKernelExPtsz;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      return LaunchApi::kLaunchCooperativeKernel;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return LaunchApi::kLaunchCooperativeKernelPtsz;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice:
      return LaunchApi::kLaunchCooperativeKernelMultiDevice;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunch:
      return LaunchApi::kLaunch;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid:
      return LaunchApi::kLaunchGrid;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync:
      return LaunchApi::kLaunchGridAsync;
    default:
      return std::nullopt;
  }
}

// True for the launch calls that carry one launch and need no state of earlier calls: all but
// cuLaunchCooperativeKernelMultiDevice (one launch per device) and the legacy cuLaunch,
// cuLaunchGrid and cuLaunchGridAsync (block shape and shared memory from earlier calls).
inline bool IsSingleLaunch(CUpti_CallbackId cbid) noexcept {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return true;
    default:
      return false;
  }
}

// Number of launches a callback carries: 1 for every launch API except the multi-device one,
// whose `numDevices` it returns; 0 when `cbid` is not a launch or `params` is null.
int LaunchCount(CUpti_CallbackId cbid, const void* params) noexcept;

// Decodes launch `index` (< LaunchCount) of the callback. For the legacy calls, *legacy must hold
// the function's state (the caller looks it up by LegacyFunction() first); otherwise it may be
// null. Returns false when the parameters are unusable (null pointers).
bool DecodeLaunch(CUpti_CallbackId cbid, const void* params, int index,
                  const LegacyLaunchState* legacy, DecodedLaunch* out) noexcept;

// The function a legacy launch (cuLaunch, cuLaunchGrid, cuLaunchGridAsync) names, or 0.
uint64_t LegacyFunction(CUpti_CallbackId cbid, const void* params) noexcept;

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_LAUNCH_DECODER_H_
