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
  // Optional: the ids CUPTI's activity records use for a context and a stream
  // (CUpti_ActivityKernel10.contextId / streamId), so launch-callback events name the same ones.
  CUptiResult (*GetContextId)(CUcontext, uint32_t* id) = nullptr;
  CUptiResult (*GetStreamIdEx)(CUcontext, CUstream, uint8_t per_thread_stream,
                               uint32_t* id) = nullptr;
};

// The oldest CUPTI whose activity record layout this build reads (CUpti_ActivityKernel10 of the
// CUDA 13.0 headers). cupti_version.h: from CUDA 13.0 the API version is xxyyzz (130000 for 13.0);
// CUDA 12.x reported 19..28.
inline constexpr uint32_t kCuptiApiVersionForActivityLayout = 130000;

// What CuptiCandidates searches beyond the fixed places.
struct CuptiSearch {
  const char* env_path = nullptr;   // $CUFLIGHT_CUPTI_PATH
  const char* cuda_home = nullptr;  // $CUDA_HOME
  const char* cuda_path = nullptr;  // $CUDA_PATH
  // Paths of the shared objects already loaded in the process (dl_iterate_phdr order).
  std::vector<std::string> loaded_objects;
  // Python environments: $VIRTUAL_ENV and $CONDA_PREFIX.
  const char* virtual_env = nullptr;
  const char* conda_prefix = nullptr;
};

// Where LoadCuptiApi looks for libcupti, in order:
//  1. a libcupti the process has already loaded (a PyTorch wheel's, another tool's): a second
//     copy of CUPTI in one process is never loaded;
//  2. $CUFLIGHT_CUPTI_PATH (a file);
//  3. the dynamic linker's search (libcupti.so.13, libcupti.so);
//  4. pip wheels: for each `.../site-packages/` or `.../dist-packages/` directory holding a loaded
//     object (torch, a CUDA wheel), then $VIRTUAL_ENV/lib/python3*/site-packages: CUDA 13 wheels'
//     nvidia/cu13/lib/libcupti.so.13, then nvidia/cuda_cupti/lib/libcupti.so.13; conda:
//     $CONDA_PREFIX/lib/libcupti.so.13;
//  5. the toolkit's standard places under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda
//     (extras/CUPTI/lib64, lib64, lib, targets/x86_64-linux/lib), then /usr/lib/x86_64-linux-gnu.
// No duplicates; pure (the $VIRTUAL_ENV python3* directories are globbed).
std::vector<std::string> CuptiCandidates(const CuptiSearch& search);

// The paths of the shared objects loaded in this process.
std::vector<std::string> LoadedObjects();

// Opens the first candidate that loads and resolves the table. On failure returns false with
// *error naming what was tried. *loaded_from gets the path that worked.
bool LoadCuptiApi(CuptiApi* api, std::string* loaded_from, std::string* error);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CUPTI_API_H_
