// A stand-in libcuda.so.1 for the injection tests on machines without a GPU: one H100-like
// device, every function with the same attributes. Only what libcuflight_inject resolves.
#include <cuda.h>

#include <cstdio>
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
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice) {
  std::snprintf(name, static_cast<size_t>(len), "Fake H100");
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDriverGetVersion(int* version) { *version = 13000; return CUDA_SUCCESS; }
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
