#include "driver_api.h"

#include <dlfcn.h>

namespace cuflight::inject {
namespace {

template <typename Fn>
bool Resolve(void* library, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  return *fn != nullptr;
}

}  // namespace

bool LoadDriverApi(DriverApi* api, std::string* error) {
  // RTLD_NOLOAD first: the application's driver, never a second copy.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (library == nullptr) library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    *error = std::string("cannot open libcuda.so.1: ") + (why != nullptr ? why : "unknown");
    return false;
  }
  // Symbol names are the versioned ones cuda.h maps the plain names to in CUDA 13.
  const bool ok = Resolve(library, "cuFuncGetAttribute", &api->FuncGetAttribute) &&
                  Resolve(library, "cuCtxGetDevice", &api->CtxGetDevice) &&
                  Resolve(library, "cuDeviceGet", &api->DeviceGet) &&
                  Resolve(library, "cuDeviceGetAttribute", &api->DeviceGetAttribute) &&
                  Resolve(library, "cuDeviceGetName", &api->DeviceGetName) &&
                  Resolve(library, "cuDriverGetVersion", &api->DriverGetVersion) &&
                  Resolve(library, "cuStreamIsCapturing", &api->StreamIsCapturing);
  if (!ok) {
    *error = "libcuda.so.1 lacks a required entry point (cuFuncGetAttribute, cuCtxGetDevice, cuDeviceGet, "
             "cuDeviceGetAttribute, cuDeviceGetName, cuDriverGetVersion or cuStreamIsCapturing)";
    return false;
  }
  Resolve(library, "cuKernelGetFunction", &api->KernelGetFunction);
  Resolve(library, "cuFuncGetModule", &api->FuncGetModule);
  Resolve(library, "cuKernelGetAttribute", &api->KernelGetAttribute);
  Resolve(library, "cuKernelGetLibrary", &api->KernelGetLibrary);
  Resolve(library, "cuDevicePrimaryCtxGetState", &api->DevicePrimaryCtxGetState);
  Resolve(library, "cuStreamGetCtx", &api->StreamGetCtx);
  if (!Resolve(library, "cuDeviceGetUuid_v2", &api->DeviceGetUuid)) {
    Resolve(library, "cuDeviceGetUuid", &api->DeviceGetUuid);
  }
  Resolve(library, "cuGetErrorName", &api->GetErrorName);
  Resolve(library, "cuGetErrorString", &api->GetErrorString);
  Resolve(library, "cuOccupancyMaxActiveClusters", &api->OccupancyMaxActiveClusters);
  Resolve(library, "cuOccupancyMaxPotentialClusterSize", &api->OccupancyMaxPotentialClusterSize);
  Resolve(library, "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
          &api->OccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
  Resolve(library, "cuCtxGetDevResource", &api->CtxGetDevResource);
  Resolve(library, "cuGreenCtxGetDevResource", &api->GreenCtxGetDevResource);
  Resolve(library, "cuStreamGetGreenCtx", &api->StreamGetGreenCtx);
  return true;
}

}  // namespace cuflight::inject
