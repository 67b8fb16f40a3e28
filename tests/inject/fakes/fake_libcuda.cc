// A stand-in libcuda.so.1 for the injection tests on machines without a GPU: one H100-like
// device, every function with the same attributes. Only what libcuflight_inject resolves.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction) {
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = 64; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = 8192; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = 40960; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *value = -1; return CUDA_SUCCESS;
    default: *value = 0; return CUDA_SUCCESS;
  }
}
EXPORT CUresult cuCtxGetDevice(CUdevice* device) { *device = 0; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {  // NVIDIA H100 80GB HBM3 (SXM5)
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *value = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *value = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *value = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    // cuda.h (CUDA 13.0) lines 761, 762, 778: the PCI bus, device and domain ids; this device
    // sits at 0000:19:00 (nvidia-smi: 00000000:19:00.0). FAKE_CUDA_PCI_DOMAIN (hex) moves it
    // to another domain, for tests of domains past 16 bits.
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: {
      const char* domain = std::getenv("FAKE_CUDA_PCI_DOMAIN");
      *value = domain != nullptr ? static_cast<int>(std::strtoul(domain, nullptr, 16)) : 0;
      break;
    }
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = 0x19; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = 0; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}
// cuda.h (CUDA 13.0) line 153 maps cuDeviceGetUuid to cuDeviceGetUuid_v2, and line 5355 says
// that in MIG mode it returns the MIG UUID. The octets: FAKE_CUDA_UUID (32 hex digits), else
// 0x00, 0x11, ... 0xff.
EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice) {
  const char* hex = std::getenv("FAKE_CUDA_UUID");
  for (int i = 0; i < 16; ++i) {
    unsigned byte = static_cast<unsigned>(i * 0x11);
    if (hex != nullptr && std::strlen(hex) == 32) {
      char two[3] = {hex[2 * i], hex[2 * i + 1], '\0'};
      byte = static_cast<unsigned>(std::strtoul(two, nullptr, 16));
    }
    uuid->bytes[i] = static_cast<char>(byte);
  }
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice) {
  std::snprintf(name, static_cast<size_t>(len), "Fake H100");
  return CUDA_SUCCESS;
}
// cuda.h, cuDriverGetVersion: "the latest CUDA version supported by driver", 1000 * major +
// 10 * minor (13000: CUDA 13.0, the r580 driver). FAKE_CUDA_DRIVER_VERSION=<n> reports another
// (13030: CUDA 13.3, the r610 driver that multi-subscriber CUPTI tracing needs).
EXPORT CUresult cuDriverGetVersion(int* version) {
  const char* text = std::getenv("FAKE_CUDA_DRIVER_VERSION");
  *version = text != nullptr ? static_cast<int>(std::strtol(text, nullptr, 10)) : 13000;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

// Names for the one error the injection tests fail a call with.
EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  if (error != CUDA_ERROR_ILLEGAL_ADDRESS) return CUDA_ERROR_INVALID_VALUE;
  *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  if (error != CUDA_ERROR_ILLEGAL_ADDRESS) return CUDA_ERROR_INVALID_VALUE;
  *text = "an illegal memory access was encountered";
  return CUDA_SUCCESS;
}

// Green contexts (cuda.h, CUDA 13.0, "Green Contexts"): cuCtxGetDevResource(ctx,
// CU_DEV_RESOURCE_TYPE_SM) gives "the type resources available to the context";
// CUdevSmResource.smCount "The amount of streaming multiprocessors available in this resource".
// FAKE_CUDA_GREEN_SMS=<n>: every context is a green context's (cuCtxFromGreenCtx) of n SMs, as
// an application that made one of n SMs and set it current; else the whole device's 132. No
// stream belongs to a green context of its own here (cuStreamGetGreenCtx: NULL).
EXPORT CUresult cuCtxGetDevResource(CUcontext, CUdevResource* resource, CUdevResourceType type) {
  if (resource == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  const char* green = std::getenv("FAKE_CUDA_GREEN_SMS");
  *resource = CUdevResource{};
  resource->type = CU_DEV_RESOURCE_TYPE_SM;
  resource->sm.smCount = green != nullptr ? static_cast<unsigned>(std::strtoul(green, nullptr, 10))
                                          : 132u;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamGetGreenCtx(CUstream, CUgreenCtx* green) {
  *green = nullptr;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGreenCtxGetDevResource(CUgreenCtx, CUdevResource*, CUdevResourceType) {
  return CUDA_ERROR_INVALID_CONTEXT;  // no green context handle is ever handed out here
}
