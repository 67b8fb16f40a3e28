// Driver calls whose failure is part of normal operation: the injected library counts them
// (stats `api_errors_routine`) instead of sending `api_error` events, and the report never takes
// one for the reason a process failed (logs written before this list existed may hold them).
//
// One list, two views: the injected library matches a CUPTI driver callback id (the X-macro's
// name pasted onto CUPTI_DRIVER_TRACE_CBID_), the report an event's `api` and `code`.
//
// Why each is routine (codes are CUresult values, cuda.h):
//  - any call returning CUDA_ERROR_NOT_READY (600): polling (cuStreamQuery, cuEventQuery);
//  - cuGetProcAddress(_v2), cuGetExportTable, any code: the runtime probing driver entry points;
//  - cuPointerGetAttribute(s), cuMemGetAddressRange(_v2) with CUDA_ERROR_INVALID_VALUE (1) or
//    CUDA_ERROR_NOT_FOUND (500): NCCL, UCX and MPI ask about pointers that may be host memory;
//  - cuModuleGetGlobal(_v2), cuModuleGetFunction, cuModuleGetTexRef, cuLibraryGetGlobal,
//    cuLibraryGetKernel with CUDA_ERROR_NOT_FOUND (500): looking a symbol up;
//  - cuCtxEnablePeerAccess with CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED (704),
//    cuCtxDisablePeerAccess with CUDA_ERROR_PEER_ACCESS_NOT_ENABLED (705);
//  - cuMemHostRegister(_v2) with CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED (712),
//    cuMemHostUnregister with CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713);
//  - cuDeviceGetAttribute with CUDA_ERROR_INVALID_VALUE (1): an attribute this driver does not
//    know (libraries probe by version).
#ifndef CUFLIGHT_SCHEMA_ROUTINE_FAILURES_H_
#define CUFLIGHT_SCHEMA_ROUTINE_FAILURES_H_

#include <cstdint>
#include <string_view>

// X(api, code): code -1 means any code.
#define CUFLIGHT_ROUTINE_FAILURES(X)   \
  X(cuGetProcAddress, -1)              \
  X(cuGetProcAddress_v2, -1)           \
  X(cuGetExportTable, -1)              \
  X(cuPointerGetAttribute, 1)          \
  X(cuPointerGetAttribute, 500)        \
  X(cuPointerGetAttributes, 1)         \
  X(cuPointerGetAttributes, 500)       \
  X(cuMemGetAddressRange, 1)           \
  X(cuMemGetAddressRange, 500)         \
  X(cuMemGetAddressRange_v2, 1)        \
  X(cuMemGetAddressRange_v2, 500)      \
  X(cuModuleGetGlobal, 500)            \
  X(cuModuleGetGlobal_v2, 500)         \
  X(cuModuleGetFunction, 500)          \
  X(cuModuleGetTexRef, 500)            \
  X(cuLibraryGetGlobal, 500)           \
  X(cuLibraryGetKernel, 500)           \
  X(cuCtxEnablePeerAccess, 704)        \
  X(cuCtxDisablePeerAccess, 705)       \
  X(cuMemHostRegister, 712)            \
  X(cuMemHostRegister_v2, 712)         \
  X(cuMemHostUnregister, 713)          \
  X(cuDeviceGetAttribute, 1)

namespace cuflight::schema {

inline constexpr int32_t kCudaErrorNotReady = 600;  // CUDA_ERROR_NOT_READY

struct RoutineFailure {
  std::string_view api;
  int32_t code;  // -1: any
};

#define CUFLIGHT_ROUTINE_FAILURE_ENTRY(api, code) RoutineFailure{#api, code},
inline constexpr RoutineFailure kRoutineFailures[] = {
    CUFLIGHT_ROUTINE_FAILURES(CUFLIGHT_ROUTINE_FAILURE_ENTRY)};
#undef CUFLIGHT_ROUTINE_FAILURE_ENTRY

// True when a failed call named `api` (as an api_error event names it) returning `code` is
// routine. A name the driver callback table gives with a suffix CUPTI adds for per-thread default
// streams ("_ptsz", "_ptds") counts as the plain name.
constexpr bool IsRoutineFailure(std::string_view api, int32_t code) {
  if (code == kCudaErrorNotReady) return true;
  for (std::string_view suffix : {std::string_view("_ptsz"), std::string_view("_ptds")}) {
    if (api.ends_with(suffix)) api.remove_suffix(suffix.size());
  }
  for (const RoutineFailure& r : kRoutineFailures) {
    if (r.api == api && (r.code == -1 || r.code == code)) return true;
  }
  return false;
}

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_ROUTINE_FAILURES_H_
