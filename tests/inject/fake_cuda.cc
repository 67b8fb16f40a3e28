#include "fake_cuda.h"

#include <cuda_occupancy.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

namespace cuflight::inject::testing {

FakeCuda* FakeCuda::current = nullptr;

namespace {

uint64_t H(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// The entry point `Impl` as driver() hands it out: calls it, then FakeCuda::after_driver_call
// with `Name` and its result.
template <const char* Name, auto Impl, typename... A>
CUresult Raising(A... a) {
  const CUresult result = Impl(a...);
  if (FakeCuda::current != nullptr && FakeCuda::current->after_driver_call) {
    FakeCuda::current->after_driver_call(Name, result);
  }
  return result;
}

CUresult FillSm(CUdevResource* resource, int sms) {
  *resource = CUdevResource{};
  resource->type = CU_DEV_RESOURCE_TYPE_SM;
  resource->sm.smCount = static_cast<unsigned>(sms);
  return CUDA_SUCCESS;
}

CUresult CtxGetDevResource(CUcontext context, CUdevResource* resource, CUdevResourceType type) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->resource_queries;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  if (auto it = fake->context_sms.find(H(context)); it != fake->context_sms.end()) {
    return FillSm(resource, it->second);
  }
  auto device = fake->context_device.find(H(context));
  const int ordinal = device != fake->context_device.end() ? device->second : fake->current_device;
  auto limits = fake->devices.find(ordinal);
  if (limits == fake->devices.end()) return CUDA_ERROR_INVALID_CONTEXT;
  return FillSm(resource, limits->second.sm_count);
}

CUresult GreenCtxGetDevResource(CUgreenCtx green, CUdevResource* resource,
                                CUdevResourceType type) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->resource_queries;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  auto it = fake->green_sms.find(H(green));
  if (it == fake->green_sms.end()) return CUDA_ERROR_INVALID_CONTEXT;
  return FillSm(resource, it->second);
}

CUresult StreamGetGreenCtx(CUstream stream, CUgreenCtx* green) {
  FakeCuda* fake = FakeCuda::current;
  auto it = fake->stream_green.find(H(stream));
  *green = it != fake->stream_green.end()
               ? reinterpret_cast<CUgreenCtx>(static_cast<uintptr_t>(it->second))
               : nullptr;
  return CUDA_SUCCESS;
}

CUresult FuncGetAttributeOf(int* value, CUfunction_attribute attribute, CUfunction f);
CUresult KernelGetAttributeOf(int* value, CUfunction_attribute attribute, CUkernel kernel,
                              CUdevice device);

CUresult FuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction f) {
  const CUresult result = FuncGetAttributeOf(value, attribute, f);
  if (result == CUDA_SUCCESS && attribute == CU_FUNC_ATTRIBUTE_NUM_REGS) {
    ++FakeCuda::current->function_reads[H(f)];
  }
  if (FakeCuda::current->after_attribute_query) FakeCuda::current->after_attribute_query(result);
  return result;
}

CUresult KernelGetAttribute(int* value, CUfunction_attribute attribute, CUkernel kernel,
                            CUdevice device) {
  const CUresult result = KernelGetAttributeOf(value, attribute, kernel, device);
  if (result == CUDA_SUCCESS && attribute == CU_FUNC_ATTRIBUTE_NUM_REGS) {
    ++FakeCuda::current->kernel_reads[{H(kernel), device}];
  }
  if (FakeCuda::current->after_attribute_query) FakeCuda::current->after_attribute_query(result);
  return result;
}

CUresult KernelGetFunction(CUfunction* f, CUkernel kernel) {
  FakeCuda* fake = FakeCuda::current;
  auto it = fake->kernels.find(H(kernel));
  if (it == fake->kernels.end()) return CUDA_ERROR_INVALID_HANDLE;
  // "the handle of the function for the requested kernel kernel and the current context. If
  // function handle is not found, the call returns CUDA_ERROR_NOT_FOUND" (cuda.h:8113-8114).
  auto on_device = it->second.functions.find(fake->current_device);
  if (on_device == it->second.functions.end()) return CUDA_ERROR_NOT_FOUND;
  *f = reinterpret_cast<CUfunction>(static_cast<uintptr_t>(on_device->second));
  return CUDA_SUCCESS;
}

CUresult KernelGetLibrary(CUlibrary* library, CUkernel kernel) {
  auto it = FakeCuda::current->kernels.find(H(kernel));
  if (it == FakeCuda::current->kernels.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (it->second.library == 0) return CUDA_ERROR_NOT_FOUND;
  *library = reinterpret_cast<CUlibrary>(static_cast<uintptr_t>(it->second.library));
  return CUDA_SUCCESS;
}

CUresult FuncGetModule(CUmodule* module, CUfunction f) {
  auto it = FakeCuda::current->functions.find(H(f));
  if (it == FakeCuda::current->functions.end()) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.module == 0) return CUDA_ERROR_NOT_FOUND;
  *module = reinterpret_cast<CUmodule>(static_cast<uintptr_t>(it->second.module));
  return CUDA_SUCCESS;
}

CUresult StreamGetCtx(CUstream stream, CUcontext* context) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->stream_context_queries;
  auto it = fake->stream_context.find(H(stream));
  if (it == fake->stream_context.end()) return CUDA_ERROR_INVALID_HANDLE;
  *context = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(it->second));
  return CUDA_SUCCESS;
}

CUresult DevicePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  FakeCuda* fake = FakeCuda::current;
  if (fake->devices.count(device) == 0) return CUDA_ERROR_INVALID_DEVICE;
  // "active - Pointer to store context state; 0 = inactive, 1 = active" (cuda.h:6044).
  auto it = fake->primary_active.find(device);
  *flags = 0;
  *active = it != fake->primary_active.end() ? it->second : 0;
  return CUDA_SUCCESS;
}

CUresult OccupancyMaxActiveClusters(int* clusters, CUfunction, const CUlaunchConfig* config) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->cluster_queries;
  fake->last_cluster_config = *config;
  for (unsigned int i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      fake->last_cluster_dims[0] = config->attrs[i].value.clusterDim.x;
      fake->last_cluster_dims[1] = config->attrs[i].value.clusterDim.y;
      fake->last_cluster_dims[2] = config->attrs[i].value.clusterDim.z;
    }
  }
  if (fake->max_active_clusters < 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  *clusters = fake->max_active_clusters;
  return CUDA_SUCCESS;
}

// cuda.h, cuOccupancyMaxPotentialClusterSize: "The cluster dimensions in config are ignored";
// the answer respects the function's non-portable-size attribute, which this fake leaves to the
// test's max_potential_cluster_size.
CUresult OccupancyMaxPotentialClusterSize(int* size, CUfunction, const CUlaunchConfig*) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->cluster_size_queries;
  if (fake->max_potential_cluster_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  *size = fake->max_potential_cluster_size;
  return CUDA_SUCCESS;
}

// cuda.h, cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags: "the maximum active blocks per
// streaming multiprocessor" for a block size and dynamic shared memory, under the function's own
// attributes; a CUkernel is computed "in the current context". Here: NVIDIA's reference
// calculator (cuda_occupancy.h) with the function's attributes, its carveout preference and its
// block_barriers, on the current device.
CUresult OccupancyMaxActiveBlocks(int* blocks, CUfunction f, int block_size, size_t dyn_smem,
                                  unsigned int flags) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->occupancy_queries;
  if (fake->occupancy_fails || flags != CU_OCCUPANCY_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  uint64_t handle = H(f);
  const FakeKernel* kernel = nullptr;
  if (fake->functions.count(handle) == 0) {
    auto k = fake->kernels.find(handle);
    if (k == fake->kernels.end()) return CUDA_ERROR_INVALID_HANDLE;
    auto on_device = k->second.functions.find(fake->current_device);
    if (on_device == k->second.functions.end()) return CUDA_ERROR_INVALID_HANDLE;
    kernel = &k->second;
    handle = on_device->second;
  }
  auto fn_it = fake->functions.find(handle);
  auto dev_it = fake->devices.find(fake->current_device);
  if (fn_it == fake->functions.end() || fn_it->second.fail || dev_it == fake->devices.end()) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const FakeFunction& fn = fn_it->second;
  // The attributes as they stand: a value set through cuFuncSetAttribute, or for a CUkernel
  // through cuKernelSetAttribute on this device, else the compiled one.
  auto attribute = [&](CUfunction_attribute a, int compiled) {
    if (kernel != nullptr) {
      if (auto v = kernel->set.find({fake->current_device, a}); v != kernel->set.end()) {
        return v->second;
      }
    }
    if (auto v = fn.set.find(a); v != fn.set.end()) return v->second;
    return compiled;
  };
  const occupancy::DeviceLimits& d = dev_it->second;
  cudaOccDeviceProp p;
  p.computeMajor = d.cc_major;
  p.computeMinor = d.cc_minor;
  p.maxThreadsPerBlock = d.max_threads_per_block;
  p.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  p.regsPerBlock = d.regs_per_block;
  p.regsPerMultiprocessor = d.regs_per_sm;
  p.warpSize = d.warp_size;
  p.sharedMemPerBlock = static_cast<size_t>(d.smem_per_block);
  p.sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  p.numSms = d.sm_count;
  p.sharedMemPerBlockOptin = static_cast<size_t>(d.smem_per_block_optin);
  p.reservedSharedMemPerBlock = static_cast<size_t>(d.reserved_smem_per_block);
  cudaOccFuncAttributes a;
  a.maxThreadsPerBlock = fn.max_threads_per_block;
  a.numRegs = fn.num_regs;
  a.sharedSizeBytes = static_cast<size_t>(fn.static_smem);
  a.partitionedGCConfig = PARTITIONED_GC_OFF;
  a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
  a.maxDynamicSharedSizeBytes = static_cast<size_t>(
      attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn.max_dyn_smem));
  a.numBlockBarriers = fn.block_barriers;
  cudaOccDeviceState s;
  s.carveoutConfig = attribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, fn.carveout);
  cudaOccResult result{};
  if (cudaOccMaxActiveBlocksPerMultiprocessor(&result, &p, &a, &s, block_size, dyn_smem) !=
      CUDA_OCC_SUCCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *blocks = result.activeBlocksPerMultiprocessor;
  return CUDA_SUCCESS;
}

// The value `fn` was compiled with.
CUresult CompiledAttribute(const FakeFunction& fn, CUfunction_attribute attribute, int* value) {
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = fn.num_regs; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = fn.static_smem; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *value = fn.local_bytes; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *value = fn.const_bytes; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = fn.max_threads_per_block; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = fn.max_dyn_smem; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *value = fn.carveout; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *value = fn.cluster[0]; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *value = fn.cluster[1]; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *value = fn.cluster[2]; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *value = fn.non_portable; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult FuncGetAttributeOf(int* value, CUfunction_attribute attribute, CUfunction f) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->attribute_queries;
  auto it = fake->functions.find(H(f));
  if (it == fake->functions.end() || it->second.fail) return CUDA_ERROR_INVALID_HANDLE;
  const FakeFunction& fn = it->second;
  if (auto set = fn.set.find(attribute); set != fn.set.end()) {
    *value = set->second;
    return CUDA_SUCCESS;
  }
  return CompiledAttribute(fn, attribute, value);
}

CUresult KernelGetAttributeOf(int* value, CUfunction_attribute attribute, CUkernel kernel,
                              CUdevice device) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->attribute_queries;
  auto it = fake->kernels.find(H(kernel));
  if (it == fake->kernels.end()) return CUDA_ERROR_INVALID_HANDLE;
  const FakeKernel& k = it->second;
  auto on_device = k.functions.find(device);
  if (on_device == k.functions.end()) return CUDA_ERROR_INVALID_DEVICE;
  // "cuKernelGetAttribute() will always return the attribute value set by this API", not one set
  // with cuFuncSetAttribute (cuda.h:8348-8349, cuKernelSetAttribute). cuda.h does not say whether
  // cuFuncGetAttribute on the kernel's CUfunction sees cuKernelSetAttribute values; the fake's
  // does not.
  if (auto set = k.set.find({device, attribute}); set != k.set.end()) {
    *value = set->second;
    return CUDA_SUCCESS;
  }
  auto fn = fake->functions.find(on_device->second);
  if (fn == fake->functions.end() || fn->second.fail) return CUDA_ERROR_INVALID_HANDLE;
  return CompiledAttribute(fn->second, attribute, value);
}

CUresult CtxGetDevice(CUdevice* device) {
  ++FakeCuda::current->ctx_get_device_calls;
  *device = FakeCuda::current->current_device;
  return CUDA_SUCCESS;
}

CUresult DeviceGet(CUdevice* device, int ordinal) {
  if (FakeCuda::current->devices.count(ordinal) == 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult DeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice d) {
  auto it = FakeCuda::current->devices.find(d);
  if (it == FakeCuda::current->devices.end()) return CUDA_ERROR_INVALID_DEVICE;
  const occupancy::DeviceLimits& l = it->second;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = l.cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = l.cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = l.sm_count; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = l.max_threads_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = l.max_threads_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *value = l.max_blocks_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *value = l.regs_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *value = l.regs_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *value = static_cast<int>(l.smem_per_sm); break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = static_cast<int>(l.smem_per_block); break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = static_cast<int>(l.smem_per_block_optin); break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *value = static_cast<int>(l.reserved_smem_per_block); break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = l.warp_size; break;
    // cuda.h (CUDA 13.0) lines 761, 762 and 778: "PCI bus ID of the device", "PCI device ID of
    // the device", "PCI domain ID of the device". Device d sits at 0000:(0x19 + d):00, as the
    // GPUs of an HGX board sit on buses of their own; a domain above 0xFFFF (VMD) when set.
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = FakeCuda::current->pci_domain; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = 0x19 + d; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = 0; break;
    // cuda.h: "Indicates device supports cluster launch" (devices of compute capability 9.0+).
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *value = l.cc_major >= 9 ? 1 : 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult DeviceGetName(char* name, int len, CUdevice d) {
  std::snprintf(name, static_cast<size_t>(len), "Fake GPU %d", d);
  return CUDA_SUCCESS;
}

// cuda.h (CUDA 13.0) line 5355: "If the device is in MIG mode, returns its MIG UUID": the
// 16 octets say nothing of MIG either way; the fake's are i * 16 + d.
CUresult DeviceGetUuid(CUuuid* uuid, CUdevice d) {
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = static_cast<char>(i * 16 + d);
  return CUDA_SUCCESS;
}

CUresult DriverGetVersion(int* version) {
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult StreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->capture_queries;
  *status = fake->capturing_streams.count(H(stream)) ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                     : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

// cupti_activity.h (CUDA 13.0), cuptiGetDeviceId: "If context is NULL, returns the ID of the
// device that contains the currently active context. If context is non-NULL, returns the ID of
// the device which contains that context"; CUPTI_ERROR_INVALID_DEVICE "if unable to get device
// ID" (here a context not in context_device gets CUPTI_ERROR_INVALID_CONTEXT).
CUptiResult GetDeviceId(CUcontext context, uint32_t* id) {
  if (context == nullptr) {
    *id = static_cast<uint32_t>(FakeCuda::current->current_device);
    return CUPTI_SUCCESS;
  }
  auto it = FakeCuda::current->context_device.find(H(context));
  if (it == FakeCuda::current->context_device.end()) return CUPTI_ERROR_INVALID_CONTEXT;
  *id = static_cast<uint32_t>(it->second);
  return CUPTI_SUCCESS;
}

CUptiResult GetContextId(CUcontext context, uint32_t* id) {
  FakeCuda* fake = FakeCuda::current;
  if (context == nullptr) return CUPTI_ERROR_INVALID_CONTEXT;
  auto [it, fresh] = fake->context_ids.try_emplace(H(context), fake->next_context_id);
  if (fresh) ++fake->next_context_id;
  *id = it->second;
  return CUPTI_SUCCESS;
}

CUptiResult GetGraphExecId(CUgraphExec exec, uint32_t* id) {
  const auto& ids = FakeCuda::current->graph_exec_ids;
  auto it = ids.find(reinterpret_cast<uintptr_t>(exec));
  if (it == ids.end()) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = it->second;
  return CUPTI_SUCCESS;
}

CUptiResult GetStreamIdEx(CUcontext context, CUstream stream, uint8_t per_thread, uint32_t* id) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->stream_id_queries;
  if (stream == nullptr) {
    if (context == nullptr) return CUPTI_ERROR_INVALID_STREAM;
    const uint64_t thread = per_thread ? std::hash<std::thread::id>{}(std::this_thread::get_id()) : 0;
    auto [it, fresh] =
        fake->null_stream_ids.try_emplace({H(context), thread}, fake->next_stream_id);
    if (fresh) ++fake->next_stream_id;
    *id = it->second;
    return CUPTI_SUCCESS;
  }
  if (fake->destroyed_streams.count(H(stream)) != 0) return CUPTI_ERROR_INVALID_STREAM;
  auto [it, fresh] = fake->stream_ids.try_emplace(H(stream), fake->next_stream_id);
  if (fresh) ++fake->next_stream_id;
  *id = it->second;
  return CUPTI_SUCCESS;
}

CUptiResult ActivityGetNextRecord(uint8_t* buffer, size_t valid_size, CUpti_Activity** record) {
  FakeCuda* fake = FakeCuda::current;
  if (fake->activity_records.empty()) {
    // The buffer itself: the first record at its start, each next one after the previous.
    size_t at = 0;
    if (*record != nullptr) {
      const auto* previous = reinterpret_cast<const uint8_t*>(*record);
      if (previous < buffer || previous >= buffer + valid_size) return CUPTI_ERROR_INVALID_PARAMETER;
      at = static_cast<size_t>(previous - buffer) + sizeof(CUpti_ActivityKernel10);
    }
    if (at + sizeof(CUpti_ActivityKernel10) > valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = reinterpret_cast<CUpti_Activity*>(buffer + at);
    const CUpti_ActivityKind kind = (*record)->kind;
    if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind != CUPTI_ACTIVITY_KIND_KERNEL &&
        kind != CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
      return CUPTI_ERROR_INVALID_KIND;  // the writers below write these kinds only
    }
    return CUPTI_SUCCESS;
  }
  if (fake->activity_next >= fake->activity_records.size()) {
    fake->activity_next = 0;
    fake->activity_records.clear();
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  }
  *record = fake->activity_records[fake->activity_next++];
  return CUPTI_SUCCESS;
}

CUptiResult ActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  FakeCuda* fake = FakeCuda::current;
  ++fake->dropped_queries;
  *dropped = fake->dropped_records;
  fake->dropped_records = 0;
  return CUPTI_SUCCESS;
}

// cupti_activity.h, cuptiActivityEnable / cuptiActivityDisable: "Enable collection of a specific
// kind of activity record" (and its end); counted per call.
CUptiResult ActivityEnable(CUpti_ActivityKind kind) {
  FakeCuda* fake = FakeCuda::current;
  fake->activity_kinds.insert(kind);
  ++fake->activity_enables;
  return CUPTI_SUCCESS;
}
CUptiResult ActivityDisable(CUpti_ActivityKind kind) {
  FakeCuda* fake = FakeCuda::current;
  fake->activity_kinds.erase(kind);
  ++fake->activity_disables;
  return CUPTI_SUCCESS;
}
CUptiResult ActivityEnableAllSyncRecords(uint8_t enable) {
  FakeCuda::current->all_sync_records = enable != 0;
  return CUPTI_SUCCESS;
}

CUptiResult ActivityFlushAll(uint32_t flag) {
  FakeCuda* fake = FakeCuda::current;
  if (fake == nullptr) return CUPTI_SUCCESS;
  ++fake->flushes;
  if (fake->on_flush) fake->on_flush(flag);
  return CUPTI_SUCCESS;
}

// Two errors the driver can name, as cuda.h documents them; other codes are unknown.
CUresult GetErrorName(CUresult error, const char** name) {
  switch (error) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE:
      *name = "CUDA_ERROR_INVALID_VALUE";
      return CUDA_SUCCESS;
    default:
      *name = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult GetErrorString(CUresult error, const char** text) {
  switch (error) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      *text = "an illegal memory access was encountered";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE:
      *text = "invalid argument";
      return CUDA_SUCCESS;
    default:
      *text = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUptiResult GetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize) {
    *name = "cuCtxSynchronize";
    return CUPTI_SUCCESS;
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

}  // namespace

size_t WriteKernelRecords(const std::vector<CUpti_ActivityKernel10>& records, uint8_t* buffer,
                          size_t size) {
  static_assert(sizeof(CUpti_ActivityKernel10) % 8 == 0, "records stay 8-byte aligned");
  const size_t bytes = records.size() * sizeof(CUpti_ActivityKernel10);
  if (bytes > size) return 0;
  if (bytes != 0) std::memcpy(buffer, records.data(), bytes);
  return bytes;
}

size_t WriteActivityRecords(const std::vector<FakeActivityRecord>& records, uint8_t* buffer,
                            size_t size) {
  const size_t bytes = records.size() * sizeof(FakeActivityRecord);
  if (bytes > size) return 0;
  if (bytes != 0) std::memcpy(buffer, records.data(), bytes);
  return bytes;
}

void FakeCuda::FuncSetAttribute(uint64_t function, CUfunction_attribute attribute, int value) {
  functions[function].set[attribute] = value;
}

void FakeCuda::KernelSetAttribute(CUfunction_attribute attribute, int value, uint64_t kernel,
                                  int device) {
  kernels[kernel].set[{device, attribute}] = value;
}

int FakeCuda::Reads() const {
  int total = 0;
  for (const auto& [handle, n] : function_reads) total += n;
  for (const auto& [key, n] : kernel_reads) total += n;
  return total;
}

int FakeCuda::KernelReads(uint64_t kernel, int device) const {
  auto it = kernel_reads.find({kernel, device});
  return it != kernel_reads.end() ? it->second : 0;
}

// The names after_driver_call reports.
constexpr char kFuncGetAttribute[] = "cuFuncGetAttribute";
constexpr char kKernelGetFunction[] = "cuKernelGetFunction";
constexpr char kKernelGetAttribute[] = "cuKernelGetAttribute";
constexpr char kKernelGetLibrary[] = "cuKernelGetLibrary";
constexpr char kFuncGetModule[] = "cuFuncGetModule";
constexpr char kStreamGetCtx[] = "cuStreamGetCtx";
constexpr char kDevicePrimaryCtxGetState[] = "cuDevicePrimaryCtxGetState";
constexpr char kOccupancyMaxActiveClusters[] = "cuOccupancyMaxActiveClusters";
constexpr char kOccupancyMaxPotentialClusterSize[] = "cuOccupancyMaxPotentialClusterSize";
constexpr char kOccupancyMaxActiveBlocks[] = "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags";
constexpr char kCtxGetDevice[] = "cuCtxGetDevice";
constexpr char kDeviceGet[] = "cuDeviceGet";
constexpr char kDeviceGetAttribute[] = "cuDeviceGetAttribute";
constexpr char kDeviceGetName[] = "cuDeviceGetName";
constexpr char kDeviceGetUuid[] = "cuDeviceGetUuid";
constexpr char kDriverGetVersion[] = "cuDriverGetVersion";
constexpr char kStreamIsCapturing[] = "cuStreamIsCapturing";
constexpr char kGetErrorName[] = "cuGetErrorName";
constexpr char kGetErrorString[] = "cuGetErrorString";
constexpr char kCtxGetDevResource[] = "cuCtxGetDevResource";
constexpr char kGreenCtxGetDevResource[] = "cuGreenCtxGetDevResource";
constexpr char kStreamGetGreenCtx[] = "cuStreamGetGreenCtx";

DriverApi FakeCuda::driver() const {
  DriverApi api;
  api.FuncGetAttribute = &Raising<kFuncGetAttribute, &FuncGetAttribute>;
  api.KernelGetFunction = &Raising<kKernelGetFunction, &KernelGetFunction>;
  api.KernelGetAttribute = &Raising<kKernelGetAttribute, &KernelGetAttribute>;
  api.KernelGetLibrary = &Raising<kKernelGetLibrary, &KernelGetLibrary>;
  api.FuncGetModule = &Raising<kFuncGetModule, &FuncGetModule>;
  api.StreamGetCtx = &Raising<kStreamGetCtx, &StreamGetCtx>;
  api.DevicePrimaryCtxGetState = &Raising<kDevicePrimaryCtxGetState, &DevicePrimaryCtxGetState>;
  api.OccupancyMaxActiveClusters =
      &Raising<kOccupancyMaxActiveClusters, &OccupancyMaxActiveClusters>;
  api.OccupancyMaxPotentialClusterSize =
      &Raising<kOccupancyMaxPotentialClusterSize, &OccupancyMaxPotentialClusterSize>;
  api.OccupancyMaxActiveBlocksPerMultiprocessorWithFlags =
      &Raising<kOccupancyMaxActiveBlocks, &OccupancyMaxActiveBlocks>;
  api.CtxGetDevice = &Raising<kCtxGetDevice, &CtxGetDevice>;
  api.DeviceGet = &Raising<kDeviceGet, &DeviceGet>;
  api.DeviceGetAttribute = &Raising<kDeviceGetAttribute, &DeviceGetAttribute>;
  api.DeviceGetName = &Raising<kDeviceGetName, &DeviceGetName>;
  api.DeviceGetUuid = &Raising<kDeviceGetUuid, &DeviceGetUuid>;
  api.DriverGetVersion = &Raising<kDriverGetVersion, &DriverGetVersion>;
  api.StreamIsCapturing = &Raising<kStreamIsCapturing, &StreamIsCapturing>;
  api.GetErrorName = &Raising<kGetErrorName, &GetErrorName>;
  api.GetErrorString = &Raising<kGetErrorString, &GetErrorString>;
  api.CtxGetDevResource = &Raising<kCtxGetDevResource, &CtxGetDevResource>;
  api.GreenCtxGetDevResource = &Raising<kGreenCtxGetDevResource, &GreenCtxGetDevResource>;
  api.StreamGetGreenCtx = &Raising<kStreamGetGreenCtx, &StreamGetGreenCtx>;
  return api;
}

CuptiApi FakeCuda::cupti() const {
  CuptiApi api;
  api.GetDeviceId = &GetDeviceId;
  api.GetContextId = &GetContextId;
  api.GetStreamIdEx = &GetStreamIdEx;
  api.GetGraphExecId = &GetGraphExecId;
  api.ActivityGetNextRecord = &ActivityGetNextRecord;
  api.ActivityFlushAll = &ActivityFlushAll;
  api.ActivityEnable = &ActivityEnable;
  api.ActivityDisable = &ActivityDisable;
  api.ActivityEnableAllSyncRecords = &ActivityEnableAllSyncRecords;
  api.ActivityGetNumDroppedRecords = &ActivityGetNumDroppedRecords;
  api.GetCallbackName = &GetCallbackName;
  return api;
}

}  // namespace cuflight::inject::testing
