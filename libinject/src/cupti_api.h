// The CUPTI entry points the injected library calls, as a table of function pointers: the seam
// between the library and CUPTI. In a process, LoadCuptiApi() opens libcupti with dlopen (the
// injected library has no link-time dependency on it, so the user need not set
// LD_LIBRARY_PATH); tests fill the table with fakes.
#ifndef CUFLIGHT_LIBINJECT_SRC_CUPTI_API_H_
#define CUFLIGHT_LIBINJECT_SRC_CUPTI_API_H_

#include <cupti.h>

#include <string>
#include <vector>

namespace cuflight::inject {

struct CuptiApi {
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  // Optional (CUPTI 12.6+): names the subscriber and reports the holder of a refused one.
  CUptiResult (*SubscribeV2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                             CUpti_SubscriberParams*) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*EnableCallback)(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                CUpti_CallbackId) = nullptr;
  CUptiResult (*GetVersion)(uint32_t* version) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult (*GetDeviceId)(CUcontext, uint32_t*) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t flag) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t* buffer, size_t valid_size,
                                       CUpti_Activity** record) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t stream_id,
                                              size_t* dropped) = nullptr;
  CUptiResult (*Finalize)() = nullptr;  // optional
  // Optional: every callback of a domain (api_error events need every driver call's exit).
  CUptiResult (*EnableDomain)(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain) =
      nullptr;
  // Optional: the API name of a callback id.
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t cbid, const char** name) = nullptr;
};

// Where LoadCuptiApi looks for libcupti, in order: $CUFLIGHT_CUPTI_PATH (a file), the dynamic
// linker's search (libcupti.so.13, libcupti.so), then the toolkit's standard places under
// $CUDA_HOME, $CUDA_PATH and /usr/local/cuda (extras/CUPTI/lib64, lib64, lib,
// targets/x86_64-linux/lib), then /usr/lib/x86_64-linux-gnu.
std::vector<std::string> CuptiCandidates(const char* env_path, const char* cuda_home,
                                         const char* cuda_path);

// Opens the first candidate that loads and resolves the table. On failure returns false with
// *error naming what was tried. *loaded_from gets the path that worked.
bool LoadCuptiApi(CuptiApi* api, std::string* loaded_from, std::string* error);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CUPTI_API_H_
