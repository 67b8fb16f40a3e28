// The CUDA driver entry points the injected library calls, as a table of function pointers: the
// seam between the library and the driver. In a process, LoadDriverApi() fills it from the
// libcuda.so.1 the application already loaded; tests fill it with fakes.
//
// Member names leave out the `cu` prefix because cuda.h redefines many `cu*` names as macros.
#ifndef CUFLIGHT_LIBINJECT_SRC_DRIVER_API_H_
#define CUFLIGHT_LIBINJECT_SRC_DRIVER_API_H_

#include <cuda.h>

#include <string>

namespace cuflight::inject {

struct DriverApi {
  CUresult (*FuncGetAttribute)(int* value, CUfunction_attribute attribute, CUfunction f) = nullptr;
  // Optional (CUDA 12.0+): the CUfunction of a CUkernel in the current context. cuLaunchKernel
  // accepts a CUkernel in place of a CUfunction, and the runtime launches that way.
  CUresult (*KernelGetFunction)(CUfunction* f, CUkernel kernel) = nullptr;
  CUresult (*FuncGetModule)(CUmodule* module, CUfunction f) = nullptr;  // optional
  // Optional (CUDA 12.0+): a CUkernel's attribute on one device, and its library. A CUkernel has
  // its own code and settings per device (cuda.h, cuKernelGetAttribute / cuKernelSetAttribute).
  CUresult (*KernelGetAttribute)(int* value, CUfunction_attribute attribute, CUkernel kernel,
                                 CUdevice d) = nullptr;
  CUresult (*KernelGetLibrary)(CUlibrary* library, CUkernel kernel) = nullptr;
  // Optional: whether a device's primary context is active (cuDevicePrimaryCtxRelease destroys
  // it only with the last reference).
  CUresult (*DevicePrimaryCtxGetState)(CUdevice d, unsigned int* flags, int* active) = nullptr;
  CUresult (*CtxGetDevice)(CUdevice* device) = nullptr;
  CUresult (*DeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*StreamGetCtx)(CUstream stream, CUcontext* context) = nullptr;  // optional
  CUresult (*DeviceGetAttribute)(int* value, CUdevice_attribute attribute, CUdevice d) = nullptr;
  CUresult (*DeviceGetName)(char* name, int len, CUdevice d) = nullptr;
  CUresult (*DeviceGetUuid)(CUuuid* uuid, CUdevice d) = nullptr;  // optional
  CUresult (*DriverGetVersion)(int* version) = nullptr;
  CUresult (*StreamIsCapturing)(CUstream stream, CUstreamCaptureStatus* status) = nullptr;
  CUresult (*GetErrorName)(CUresult error, const char** name) = nullptr;  // optional
  CUresult (*GetErrorString)(CUresult error, const char** text) = nullptr;  // optional
  // Optional (CUDA 11.8+): how many clusters of a launch fit on the GPU at once.
  CUresult (*OccupancyMaxActiveClusters)(int* clusters, CUfunction f,
                                         const CUlaunchConfig* config) = nullptr;
  // Optional (CUDA 11.8+): the largest cluster size the function may launch with.
  CUresult (*OccupancyMaxPotentialClusterSize)(int* size, CUfunction f,
                                               const CUlaunchConfig* config) = nullptr;
  // Optional: resident blocks per SM for a block size and dynamic shared memory, under the
  // function's own attributes (its carveout preference among them). cuda.h: a CUkernel may be
  // passed cast to CUfunction, computed in the current context.
  CUresult (*OccupancyMaxActiveBlocksPerMultiprocessorWithFlags)(int* blocks, CUfunction f,
                                                                 int block_size,
                                                                 size_t dyn_smem,
                                                                 unsigned int flags) = nullptr;
  // Optional (CUDA 12.4+, cuda.h "Green Contexts"): the SMs available to a context and to a green
  // context (CU_DEV_RESOURCE_TYPE_SM, CUdevResource.sm.smCount), and the green context of a stream
  // (NULL when none). context_sms.h asks them once per context.
  CUresult (*CtxGetDevResource)(CUcontext context, CUdevResource* resource,
                                CUdevResourceType type) = nullptr;
  CUresult (*GreenCtxGetDevResource)(CUgreenCtx green, CUdevResource* resource,
                                     CUdevResourceType type) = nullptr;
  CUresult (*StreamGetGreenCtx)(CUstream stream, CUgreenCtx* green) = nullptr;
};

// Resolves the table from the process's libcuda.so.1 (already loaded by the application when the
// driver calls InitializeInjection). Returns false with *error set when a required entry is
// missing; optional entries stay nullptr.
bool LoadDriverApi(DriverApi* api, std::string* error);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_DRIVER_API_H_
