// A stand-in libcupti for the injection tests: keeps the subscriber's callback and lets the test
// program fire launch callbacks through fake_cupti_launch(). FAKE_CUPTI_MODE=taken makes
// subscription fail as when another tool holds CUPTI.
#include <cupti.h>

#include <cstdlib>
#include <cstring>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {
CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
bool g_enabled[1024] = {};
}  // namespace

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                  void* userdata) {
  const char* mode = std::getenv("FAKE_CUPTI_MODE");
  if (mode != nullptr && std::strcmp(mode, "taken") == 0) {
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  g_callback = callback;
  g_userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(0x1);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) { return CUPTI_SUCCESS; }
EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < 1024) g_enabled[cbid] = enable != 0;
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle,
                                     CUpti_CallbackDomain domain) {
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    for (bool& e : g_enabled) e = enable != 0;
  }
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain, uint32_t, const char** name) {
  *name = "cuFakeCall";
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiGetVersion(uint32_t* version) { *version = 130001; return CUPTI_SUCCESS; }
EXPORT CUptiResult cuptiGetResultString(CUptiResult, const char** str) {
  *str = "fake CUPTI error";
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiGetDeviceId(CUcontext, uint32_t* id) { *id = 0; return CUPTI_SUCCESS; }
EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind) { return CUPTI_SUCCESS; }
EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind) { return CUPTI_SUCCESS; }
EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc,
                                                  CUpti_BuffersCallbackCompleteFunc) {
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) { return CUPTI_SUCCESS; }
EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**) {
  return CUPTI_ERROR_MAX_LIMIT_REACHED;
}
EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}

// Fires `count` cuLaunchKernel exit callbacks (block 256, dynamic smem 0, grid 132) as the
// driver would for a successful runtime launch. Returns how many reached an enabled callback.
EXPORT int fake_cupti_launch(int count) {
  if (g_callback == nullptr || !g_enabled[CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel]) return 0;
  cuLaunchKernel_params params{};
  params.f = reinterpret_cast<CUfunction>(0xF00D);
  params.gridDimX = 132;
  params.gridDimY = 1;
  params.gridDimZ = 1;
  params.blockDimX = 256;
  params.blockDimY = 1;
  params.blockDimZ = 1;
  CUresult result = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_EXIT;
  data.functionName = "cuLaunchKernel";
  data.functionParams = &params;
  data.functionReturnValue = &result;
  data.symbolName = "_Z6vecaddPKfS0_Pfi";
  data.context = reinterpret_cast<CUcontext>(0xC0);
  for (int i = 0; i < count; ++i) {
    data.correlationId = static_cast<uint32_t>(i + 1);
    g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
               &data);
  }
  return count;
}

// Fires the exit callback of a cuCtxSynchronize that returned `code`, on the context the
// launches use, as the driver does when a kernel faulted. Returns 1 when a callback was enabled.
EXPORT int fake_cupti_fail(int code) {
  if (g_callback == nullptr || !g_enabled[CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize]) return 0;
  auto result = static_cast<CUresult>(code);
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_EXIT;
  data.functionName = "cuCtxSynchronize";
  data.functionReturnValue = &result;
  data.context = reinterpret_cast<CUcontext>(0xC0);
  data.correlationId = 100000;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
             &data);
  return 1;
}
