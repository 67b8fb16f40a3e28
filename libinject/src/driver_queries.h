// Which driver API callbacks the injector subscribes to, for each CUFLIGHT_API_ERRORS setting.
// Shared with the overhead benchmark's null subscriber (bench/overhead/null_subscriber.cc), which
// must subscribe exactly as the injector does.
//
// 1. Each subscribed call costs the application two callbacks through CUPTI's dispatch, one "at
//    the entry of the API call" and one "at the exit" (cupti_callbacks.h, CUpti_ApiCallbackSite),
//    whatever the handler then does; a call not enabled (cuptiEnableCallback, cuptiEnableDomain)
//    is never seen, and its failures cannot be api_error events.
// 2. kNeededCalls are subscribed in every setting: the launches, the calls that change what the
//    recorder caches (function attributes, module and context teardown, stream capture), and the
//    synchronising calls (a hang shows as one of them entered and not returned) and graph
//    launches (a hang inside a graph names its launch).
// 3. kHighRateCalls are what libraries call thousands of times a second and whose failures are
//    polling or probing (routine_failures.h): queries (NCCL's watchdog, MPI/UCX progress loops,
//    allocators polling events), event records and stream waits between kernels, capture checks
//    (PyTorch asks before many operations), the current context's pushes, pops and reads (the
//    runtime around each call), pointer attributes, device attributes, entry points. Also the
//    injector's own per-launch queries (cuStreamIsCapturing while a capture runs, cuStreamGetCtx):
//    raised by the injector, they would be CUPTI's dispatch for nothing. `default` subscribes to
//    every driver call but these; `all` to these too.
#ifndef CUFLIGHT_LIBINJECT_SRC_DRIVER_QUERIES_H_
#define CUFLIGHT_LIBINJECT_SRC_DRIVER_QUERIES_H_

#include <cupti.h>

#include <array>
#include <cstddef>

namespace cuflight::inject {

// The recorder's calls (2): launches and what changes its caches.
inline constexpr CUpti_CallbackId kRecorderCalls[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuFuncSetBlockShape,
    CUPTI_DRIVER_TRACE_CBID_cuFuncSetSharedSize,
    CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuKernelSetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuModuleUnload,
    CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload,
    CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain,
    CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
};

// The synchronising calls (2): the application waits in them for the GPU, so a hang is a call
// among these entered and not returned, and a sticky error (an illegal address, ...) is most
// often first returned by one of them.
inline constexpr CUpti_CallbackId kSyncCalls[] = {
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
    // Graph launches: a hang inside one names it (graph_launches.h).
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

// Left out by `default` (3).
inline constexpr CUpti_CallbackId kHighRateCalls[] = {
    // Polling: CUDA_ERROR_NOT_READY is their answer while work runs.
    CUPTI_DRIVER_TRACE_CBID_cuEventQuery,
    CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,
    CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz,
    // Between kernels: events recorded and waited on across streams.
    CUPTI_DRIVER_TRACE_CBID_cuEventRecord,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent,
    CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz,
    // Capture checks.
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing_ptsz,
    // The calling thread's context.
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice_v2,
    // Stream facts.
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetPriority,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetPriority_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetFlags,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetFlags_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetId,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetId_ptsz,
    // Pointer, device, function and driver facts; entry points.
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion,
    CUPTI_DRIVER_TRACE_CBID_cuGetErrorName,
    CUPTI_DRIVER_TRACE_CBID_cuGetErrorString,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
    CUPTI_DRIVER_TRACE_CBID_cuGetExportTable,
};

namespace internal {
template <size_t A, size_t B>
constexpr std::array<CUpti_CallbackId, A + B> Join(const CUpti_CallbackId (&a)[A],
                                                   const CUpti_CallbackId (&b)[B]) {
  std::array<CUpti_CallbackId, A + B> out{};
  for (size_t i = 0; i < A; ++i) out[i] = a[i];
  for (size_t i = 0; i < B; ++i) out[A + i] = b[i];
  return out;
}
}  // namespace internal

// Subscribed in every setting (2).
inline constexpr auto kNeededCalls = internal::Join(kRecorderCalls, kSyncCalls);

// What is subscribed (CUFLIGHT_API_ERRORS in parentheses; schema/env/README.md).
enum class DriverSubscription {
  kNone,     // nothing: the null subscriber's floor of a subscription alone
  kNeeded,   // kNeededCalls (`launches`, `off`)
  kDefault,  // the whole driver domain less kHighRateCalls (`default`)
  kAll,      // the whole driver domain (`all`)
};

using EnableDomainFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
using EnableCallbackFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                         CUpti_CallbackId);

// Enables `subscription`'s driver API callbacks on `subscriber` with cuptiEnableDomain and
// cuptiEnableCallback (cupti_callbacks.h). Returns false when the whole domain was asked for and
// could not be enabled (enable_domain null or failing): the needed calls are then enabled one by
// one. A callback id this driver does not know fails to enable; the rest still work.
inline bool EnableDriverCallbacks(DriverSubscription subscription,
                                  CUpti_SubscriberHandle subscriber, EnableDomainFn enable_domain,
                                  EnableCallbackFn enable_callback) {
  if (subscription == DriverSubscription::kNone) return true;
  if (subscription != DriverSubscription::kNeeded) {
    if (enable_domain != nullptr &&
        enable_domain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS) {
      if (subscription == DriverSubscription::kDefault) {
        for (CUpti_CallbackId cbid : kHighRateCalls) {
          enable_callback(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
        }
      }
      return true;
    }
  }
  for (CUpti_CallbackId cbid : kNeededCalls) {
    enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
  return subscription == DriverSubscription::kNeeded;
}

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_DRIVER_QUERIES_H_
