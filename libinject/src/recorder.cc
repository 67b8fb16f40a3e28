#include "recorder.h"

#include "cuflight/base/tsc_clock.h"
#include "device_identity.h"
#include "driver_queries.h"
#include "cuflight/occupancy/device_attributes.h"
#include "cuflight/schema/routine_failures.h"
#include "event_builder.h"
#include "cuflight/schema/sticky_errors.h"
#include "mix64.h"
#include "own_calls.h"
#include "timing_windows.h"

#include <cupti.h>
#include <cxxabi.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <optional>

namespace cuflight::inject {
namespace {

// Off the launch path; a launch's callback has its ThisThread at hand (own_calls.h).
int32_t ThreadId() noexcept { return ThisThread::Get().Tid(); }

CUresult ReturnValue(const CUpti_CallbackData* data) noexcept {
  if (data->functionReturnValue == nullptr) return CUDA_SUCCESS;
  return *static_cast<const CUresult*>(data->functionReturnValue);
}

// Recorder::instance_id_: from 1, never reused in the process (launch_place.h, point 6).
std::atomic<uint64_t> g_next_recorder_id{1};

int GetDeviceAttribute(void* context, int attribute, int* value) {
  const auto* args = static_cast<const std::pair<const DriverApi*, CUdevice>*>(context);
  return static_cast<int>(args->first->DeviceGetAttribute(
      value, static_cast<CUdevice_attribute>(attribute), args->second));
}


}  // namespace

bool IsStickyError(CUresult result) {
  static_assert(schema::IsStickyError(CUDA_ERROR_ECC_UNCORRECTABLE) &&
                schema::IsStickyError(CUDA_ERROR_NVLINK_UNCORRECTABLE) &&
                schema::IsStickyError(CUDA_ERROR_ILLEGAL_ADDRESS) &&
                schema::IsStickyError(CUDA_ERROR_LAUNCH_TIMEOUT) &&
                schema::IsStickyError(CUDA_ERROR_ASSERT) &&
                schema::IsStickyError(CUDA_ERROR_HARDWARE_STACK_ERROR) &&
                schema::IsStickyError(CUDA_ERROR_ILLEGAL_INSTRUCTION) &&
                schema::IsStickyError(CUDA_ERROR_MISALIGNED_ADDRESS) &&
                schema::IsStickyError(CUDA_ERROR_INVALID_ADDRESS_SPACE) &&
                schema::IsStickyError(CUDA_ERROR_INVALID_PC) &&
                schema::IsStickyError(CUDA_ERROR_LAUNCH_FAILED) &&
                std::size(schema::kStickyErrors) == 11);
  return schema::IsStickyError(static_cast<int32_t>(result));
}

bool IsRoutineFailure(CUpti_CallbackId cbid, CUresult result) {
  static_assert(schema::kCudaErrorNotReady == CUDA_ERROR_NOT_READY);
  if (result == CUDA_ERROR_NOT_READY) return true;
  struct Routine {
    CUpti_CallbackId cbid;
    int32_t code;
  };
  // The shared list, by callback id: a name there that is not a driver callback does not compile.
#define CUFLIGHT_ROUTINE_BY_CBID(api, code) Routine{CUPTI_DRIVER_TRACE_CBID_##api, code},
  static constexpr Routine kRoutine[] = {CUFLIGHT_ROUTINE_FAILURES(CUFLIGHT_ROUTINE_BY_CBID)};
#undef CUFLIGHT_ROUTINE_BY_CBID
  const auto code = static_cast<int32_t>(result);
  for (const Routine& r : kRoutine) {
    if (r.cbid == cbid && (r.code == -1 || r.code == code)) return true;
  }
  return false;
}

bool ApiErrorLimiter::Allow(uint32_t cbid, int32_t result, int64_t now_ns) noexcept {
  const uint64_t key = (uint64_t{cbid} << 32 | static_cast<uint32_t>(result)) + 1;  // never 0
  Entry& e = entries_[Mix64(key) & (kEntries - 1)];
  if (e.key.load(std::memory_order_relaxed) != key) {
    e.key.store(key, std::memory_order_relaxed);
    e.count.store(0, std::memory_order_relaxed);
    e.last_ns.store(0, std::memory_order_relaxed);
  }
  if (e.count.fetch_add(1, std::memory_order_relaxed) < kBurst) {
    e.last_ns.store(now_ns, std::memory_order_relaxed);
    return true;
  }
  int64_t last = e.last_ns.load(std::memory_order_relaxed);
  return now_ns - last >= kIntervalNs &&
         e.last_ns.compare_exchange_strong(last, now_ns, std::memory_order_relaxed);
}

std::unique_ptr<FunctionInfo> ReadFunctionInfo(const DriverApi& driver, uint64_t handle,
                                               int ordinal, const char* symbol_name,
                                               bool resolve_in_current_context) {
  auto info = std::make_unique<FunctionInfo>();
  info->handle = handle;
  info->device = ordinal;
  CUfunction function = reinterpret_cast<CUfunction>(static_cast<uintptr_t>(handle));
  const auto kernel = reinterpret_cast<CUkernel>(static_cast<uintptr_t>(handle));
  CUdevice device = 0;
  // Inside the launch's callback (recorder.h, "Calls into CUDA from inside a callback"): its
  // OwnCalls scope ignores the callbacks of these queries; the stream was found not capturing
  // first; the current context is the application's, as its call left it.
  // A CUkernel is read on the launch's device; without cuKernelGetAttribute, through its
  // CUfunction in the current context.
  bool per_device = false;
  auto get = [&](CUfunction_attribute attribute, int* value) {
    return per_device ? driver.KernelGetAttribute(value, attribute, kernel, device)
                      : driver.FuncGetAttribute(value, attribute, function);
  };
  int value = 0;
  CUresult result = get(CU_FUNC_ATTRIBUTE_NUM_REGS, &value);
  if (result != CUDA_SUCCESS && driver.KernelGetFunction != nullptr) {
    // Not a CUfunction: a CUkernel (context-independent loading, how the runtime launches)?
    CUfunction resolved = nullptr;
    const bool resolve = resolve_in_current_context || driver.KernelGetAttribute == nullptr;
    if (resolve && (driver.KernelGetFunction(&resolved, kernel) != CUDA_SUCCESS)) {
      resolved = nullptr;
    }
    if (driver.KernelGetAttribute != nullptr && ordinal >= 0 &&
        driver.DeviceGet(&device, ordinal) == CUDA_SUCCESS) {
      per_device = true;
      result = get(CU_FUNC_ATTRIBUTE_NUM_REGS, &value);
    } else if (resolved != nullptr) {
      function = resolved;
      result = get(CU_FUNC_ATTRIBUTE_NUM_REGS, &value);
    }
    info->is_kernel = result == CUDA_SUCCESS;
    if (info->is_kernel) {
      info->resolved_function = reinterpret_cast<uintptr_t>(resolved);
      CUlibrary library = nullptr;
      if (driver.KernelGetLibrary != nullptr &&
          driver.KernelGetLibrary(&library, kernel) == CUDA_SUCCESS) {
        info->library = reinterpret_cast<uintptr_t>(library);
      }
    }
  }
  if (driver.FuncGetModule != nullptr && result == CUDA_SUCCESS &&
      (!info->is_kernel || info->resolved_function != 0)) {
    CUmodule module = nullptr;
    const uint64_t of = info->is_kernel ? info->resolved_function
                                        : reinterpret_cast<uintptr_t>(function);
    if (driver.FuncGetModule(&module, reinterpret_cast<CUfunction>(static_cast<uintptr_t>(of))) ==
        CUDA_SUCCESS) {
      info->module = reinterpret_cast<uintptr_t>(module);
    }
  }
  bool ok = result == CUDA_SUCCESS;
  info->num_regs = value;
  struct Wide {
    CUfunction_attribute attribute;
    int64_t* out;
  };
  const Wide wide[] = {
      {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &info->static_smem},
      {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &info->local_bytes},
      {CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, &info->const_bytes},
      {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &info->max_dyn_smem},
  };
  for (const Wide& w : wide) {
    value = 0;
    ok = ok && get(w.attribute, &value) == CUDA_SUCCESS;
    *w.out = value;
  }
  value = 0;
  ok = ok && get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &value) == CUDA_SUCCESS;
  info->max_threads_per_block = value;
  value = -1;
  ok = ok && get(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, &value) == CUDA_SUCCESS;
  info->carveout = value;
  // Cluster attributes exist only on sm_90+ drivers; absent means "no cluster requirement".
  const CUfunction_attribute cluster[3] = {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                                           CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
                                           CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH};
  for (int i = 0; i < 3; ++i) {
    value = 0;
    if (get(cluster[i], &value) == CUDA_SUCCESS && value > 0) {
      info->required_cluster[i] = static_cast<uint32_t>(value);
    }
  }
  value = 0;
  if (get(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, &value) == CUDA_SUCCESS) {
    info->non_portable_cluster_allowed = value != 0;
  }
  info->attributes_ok = ok;

  if (symbol_name != nullptr) {
    info->name = symbol_name;
    int status = 0;
    char* demangled = abi::__cxa_demangle(symbol_name, nullptr, nullptr, &status);
    if (status == 0 && demangled != nullptr) info->demangled = demangled;
    std::free(demangled);
  }
  return info;
}

std::unique_ptr<DeviceInfo> ReadDeviceInfo(const DriverApi& driver, int ordinal) {
  auto info = std::make_unique<DeviceInfo>();
  info->ordinal = ordinal;
  // From a launch's callback (its OwnCalls scope, recorder.h) or the sender thread (an OwnCalls
  // scope for its life): the callbacks of these queries are ignored; none needs a context.
  CUdevice device = 0;
  if (driver.DeviceGet(&device, ordinal) != CUDA_SUCCESS) {
    info->problem = "cuDeviceGet failed";
    return info;
  }
  char name[256] = {};
  if (driver.DeviceGetName(name, sizeof(name) - 1, device) == CUDA_SUCCESS) info->name = name;
  CUuuid uuid{};
  if (driver.DeviceGetUuid != nullptr && driver.DeviceGetUuid(&uuid, device) == CUDA_SUCCESS) {
    info->uuid = FormatDeviceUuid(uuid);
  }
  int pci[3] = {-1, -1, -1};
  const CUdevice_attribute pci_attributes[3] = {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
                                                CU_DEVICE_ATTRIBUTE_PCI_BUS_ID,
                                                CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID};
  bool pci_known = true;
  for (int i = 0; i < 3; ++i) {
    pci_known = pci_known &&
                driver.DeviceGetAttribute(&pci[i], pci_attributes[i], device) == CUDA_SUCCESS;
  }
  // The attribute is an int: a domain above 2^31-1 reads negative; its bits are the domain.
  if (pci_known) {
    info->pci_bus_id = FormatPciBusId(static_cast<long long>(static_cast<unsigned>(pci[0])),
                                      pci[1], pci[2]);
  }
  std::pair<const DriverApi*, CUdevice> args{&driver, device};
  occupancy::DeviceAttributeError error;
  if (!occupancy::ReadDeviceLimits(&GetDeviceAttribute, &args, &info->limits, &error)) {
    info->problem = std::string("cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_") + error.attribute +
                    ") failed with CUresult " + std::to_string(error.result);
    return info;
  }
  const occupancy::Status status = occupancy::DeviceContext::Validate(info->limits);
  if (status != occupancy::Status::kOk) {
    info->problem = "compute capability " + std::to_string(info->limits.cc_major) + "." +
                    std::to_string(info->limits.cc_minor) + ": " +
                    std::string(occupancy::StatusMessage(status));
    return info;
  }
  info->engine = occupancy::DeviceContext::Make(info->limits);
  return info;
}

Recorder::Recorder(const DriverApi* driver, const CuptiApi* cupti, LaunchRing* ring,
                   FunctionTable* functions, DeviceTable* devices, RecorderOptions options)
    : instance_id_(g_next_recorder_id.fetch_add(1, std::memory_order_relaxed)),
      driver_(driver),
      cupti_(cupti),
      ring_(ring),
      functions_(functions),
      devices_(devices),
      options_(std::move(options)),
      stream_ids_(cupti, kStreamCapacity) {
  if (options_.sample_every == 0) options_.sample_every = 1;
}

std::span<const CUpti_CallbackId> Recorder::DriverCallbacks() { return kNeededCalls; }

void Recorder::OnCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const CUpti_CallbackData* data) noexcept {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || data == nullptr) return;
  if (data->callbackSite != CUPTI_API_EXIT) {
    // The timing window at the launch's entry, for its exit (timing_windows.h, point 3):
    // correlationData is "data shared between the entry and exit callbacks" (cupti_callbacks.h).
    // Acquire: the window's enable call happened before this launch.
    if (options_.timing_window != nullptr && data->correlationData != nullptr &&
        LaunchApiOf(cbid)) {
      *data->correlationData = options_.timing_window->load(std::memory_order_acquire);
    }
    SyncScope scope;
    if (SyncScopeOf(cbid, &scope)) OnSyncEnter(cbid, scope, data);
    return;
  }
  ThisThread& thread = ThisThread::Get();  // the callback's one thread_local lookup
  if (thread.InOwnCalls()) return;  // raised by one of the library's own driver calls
  const OwnCalls own(thread);       // every driver call made from here on is the library's
  const CUresult result = ReturnValue(data);
  if (result != CUDA_SUCCESS && options_.api_errors) OnApiError(cbid, data, result);
  if (LaunchApiOf(cbid)) {
    if (result == CUDA_SUCCESS) OnLaunch(cbid, data, thread);
    return;
  }
  const bool ok = result == CUDA_SUCCESS;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuFuncSetBlockShape: {
      const auto* p = static_cast<const cuFuncSetBlockShape_params*>(data->functionParams);
      if (!ok || p == nullptr) return;
      const uint64_t context = reinterpret_cast<uintptr_t>(data->context);
      FunctionTable::Slot* slot = functions_->FindOrClaim(reinterpret_cast<uintptr_t>(p->hfunc),
                                                          ResolveDevice(context), context);
      if (slot == nullptr) return;
      slot->legacy_block[0].store(static_cast<uint32_t>(p->x), std::memory_order_relaxed);
      slot->legacy_block[1].store(static_cast<uint32_t>(p->y), std::memory_order_relaxed);
      slot->legacy_block[2].store(static_cast<uint32_t>(p->z), std::memory_order_relaxed);
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuFuncSetSharedSize: {
      const auto* p = static_cast<const cuFuncSetSharedSize_params*>(data->functionParams);
      if (!ok || p == nullptr) return;
      const uint64_t context = reinterpret_cast<uintptr_t>(data->context);
      FunctionTable::Slot* slot = functions_->FindOrClaim(reinterpret_cast<uintptr_t>(p->hfunc),
                                                          ResolveDevice(context), context);
      if (slot != nullptr) slot->legacy_smem.store(p->bytes, std::memory_order_relaxed);
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute: {
      const auto* p = static_cast<const cuFuncSetAttribute_params*>(data->functionParams);
      if (ok && p != nullptr) {
        OnFunctionAttributeSet(reinterpret_cast<uintptr_t>(p->hfunc), p->attrib, p->value);
      }
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuKernelSetAttribute: {
      // How the runtime's cudaFuncSetAttribute reaches the driver for library-loaded kernels.
      const auto* p = static_cast<const cuKernelSetAttribute_params*>(data->functionParams);
      if (ok && p != nullptr) {
        OnKernelAttributeSet(reinterpret_cast<uintptr_t>(p->kernel), p->dev, p->attrib, p->val);
      }
      return;
    }
    // Each teardown drops only what it freed (a failed call frees nothing); the handles of what
    // it freed may be reused from then on.
    case CUPTI_DRIVER_TRACE_CBID_cuModuleUnload: {
      const auto* p = static_cast<const cuModuleUnload_params*>(data->functionParams);
      if (ok && p != nullptr) {
        functions_->Remove(FunctionTable::Owner::kModule, reinterpret_cast<uintptr_t>(p->hmod));
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload: {
      const auto* p = static_cast<const cuLibraryUnload_params*>(data->functionParams);
      if (ok && p != nullptr) {
        functions_->Remove(FunctionTable::Owner::kLibrary, reinterpret_cast<uintptr_t>(p->library));
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2: {
      // cuCtxDestroy_params and cuCtxDestroy_v2_params are the same struct: {CUcontext ctx}.
      const auto* p = static_cast<const cuCtxDestroy_v2_params*>(data->functionParams);
      if (ok && p != nullptr) ContextGone(reinterpret_cast<uintptr_t>(p->ctx));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain: {
      const auto* p = static_cast<const cuDevicePrimaryCtxRetain_params*>(data->functionParams);
      if (ok && p != nullptr && p->pctx != nullptr && p->dev >= 0 &&
          p->dev < DeviceTable::kMaxDevices) {
        primary_contexts_[p->dev].store(reinterpret_cast<uintptr_t>(*p->pctx),
                                        std::memory_order_relaxed);
      }
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease:
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2: {
      // "The context is automatically reset once the last reference to it is released" (cuda.h,
      // cuDevicePrimaryCtxRelease): before that, the release frees nothing.
      const auto* p = static_cast<const cuDevicePrimaryCtxRelease_v2_params*>(data->functionParams);
      if (!ok || p == nullptr) return;
      int active = 0;
      unsigned int flags = 0;
      // A query of the device, no context needed; its own callback is ignored (OwnCalls scope of
      // this callback, recorder.h).
      if (driver_->DevicePrimaryCtxGetState != nullptr &&
          driver_->DevicePrimaryCtxGetState(p->dev, &flags, &active) == CUDA_SUCCESS &&
          active != 0) {
        return;
      }
      PrimaryContextGone(p->dev);  // inactive, or not known: drop its functions (read again)
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset:
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2: {
      // "Destroy all allocations and reset all state on the primary context" (cuda.h).
      const auto* p = static_cast<const cuDevicePrimaryCtxReset_v2_params*>(data->functionParams);
      if (ok && p != nullptr) PrimaryContextGone(p->dev);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2: {
      const auto* p = static_cast<const cuStreamDestroy_v2_params*>(data->functionParams);
      if (ok && p != nullptr) ForgetStream(reinterpret_cast<uintptr_t>(p->hStream));
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz:
      if (ok) captures_active_.fetch_add(1, std::memory_order_acq_rel);
      return;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
      // Same thread and correlation id as its enter callback (cupti_callbacks.h).
      sync_calls_.Exit(thread.Tid(), data->correlationId, static_cast<int32_t>(result));
      return;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      if (ok) OnGraphLaunch(cbid, data);
      return;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz: {
      // A capture ends with this call whatever it returns (an invalidated capture reports an
      // error but is over). Never below zero: over-checking is safe, under-checking is not.
      int32_t active = captures_active_.load(std::memory_order_acquire);
      while (active > 0 && !captures_active_.compare_exchange_weak(
                               active, active - 1, std::memory_order_acq_rel)) {
      }
      return;
    }
    default:
      return;
  }
  // After a teardown: let the sender thread free what was retired soon, before retired slots
  // crowd the table.
  if (functions_->retired() >= kWakeConsumerRetired) ring_->WakeConsumer();
}

void Recorder::OnFunctionAttributeSet(uint64_t function, CUfunction_attribute attribute,
                                      int value) noexcept {
  // A CUfunction's entry is under its context's device, which the call does not name: look under
  // every device known (a few probes; this is not the launch path).
  for (int device = -1; device < DeviceTable::kMaxDevices; ++device) {
    if (device >= 0 && devices_->Get(device) == nullptr) continue;
    const uint64_t kernel =
        functions_->AttributeSet(function, device, FunctionTable::SetBy::kHandle, attribute, value);
    if (kernel != 0) {
      functions_->AttributeSet(kernel, device, FunctionTable::SetBy::kResolvedFunction, attribute,
                               value);
    }
  }
}

void Recorder::OnKernelAttributeSet(uint64_t kernel, CUdevice device,
                                    CUfunction_attribute attribute, int value) noexcept {
  // "sets the value of a specified attribute attrib on the kernel kernel for the requested device
  // dev" (cuda.h, cuKernelSetAttribute): that device's entry only. A CUdevice is the ordinal
  // cuDeviceGet was given.
  functions_->AttributeSet(kernel, static_cast<int32_t>(device), FunctionTable::SetBy::kHandle,
                           attribute, value);
}

void Recorder::ContextGone(uint64_t context) noexcept {
  functions_->Remove(FunctionTable::Owner::kContext, context);
  ForgetContexts();
}

void Recorder::ForgetAfterYield() noexcept {
  functions_->InvalidateAll();
  // Contexts may have been destroyed meanwhile, their handles reused for other partitions: their
  // SM counts go too.
  ForgetContexts();
}

void Recorder::ForgetStream(uint64_t stream) noexcept {
  streams_.Forget(stream);
  stream_ids_.Forget(stream);
  // After the tables (launch_place.h, point 2); release: a launch that reads the new generation
  // finds the tables without the stream.
  place_generation_.fetch_add(1, std::memory_order_release);
}

void Recorder::ForgetContexts() noexcept {
  devices_->ForgetContexts();  // a context's handle may come back for another device
  context_sms_.ForgetAll();    // or for another partition
  streams_.ForgetAll();        // its streams are gone with it
  stream_ids_.ForgetAll();
  place_generation_.fetch_add(1, std::memory_order_release);  // as in ForgetStream
}

void Recorder::PrimaryContextGone(CUdevice device) noexcept {
  uint64_t context = 0;
  if (device >= 0 && device < DeviceTable::kMaxDevices) {
    context = primary_contexts_[device].exchange(0, std::memory_order_relaxed);
  }
  if (context != 0) {
    ContextGone(context);
    return;
  }
  // Retained before the library subscribed: every entry of the device goes.
  functions_->RemoveDevice(static_cast<int32_t>(device));
  ForgetContexts();
}

void Recorder::OnApiError(CUpti_CallbackId cbid, const CUpti_CallbackData* data,
                          CUresult result) noexcept {
  if (IsRoutineFailure(cbid, result)) {
    routine_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int64_t now_ns = base::EventClock().NowNs();
  const bool sticky = IsStickyError(result);
  if (!limiter_.Allow(cbid, static_cast<int32_t>(result), now_ns)) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return;  // a repeat: the first ones of this failure were recorded (and flushed if sticky)
  }
  LaunchRecord record;
  record.kind = RecordKind::kApiError;
  record.ts_ns = now_ns;
  const uint64_t context = reinterpret_cast<uintptr_t>(data->context);
  record.correlation_id = data->correlationId;
  record.tid = ThreadId();
  record.device = static_cast<int8_t>(devices_->DeviceOf(context));  // -1 when not known yet
  record.cbid = static_cast<uint16_t>(cbid);
  record.result = static_cast<int32_t>(result);
  // The same ids as the launches' events (usually remembered from them: CUPTI may not answer
  // about a context that just failed). A call that names no stream: the stream is unknown.
  record.stream = CUPTI_INVALID_STREAM_ID;
  DecodedLaunch launch;
  const LegacyLaunchState legacy;  // the shape does not matter here, only the stream
  if (LaunchApiOf(cbid) && DecodeLaunch(cbid, data->functionParams, 0, &legacy, &launch)) {
    const StreamIdentity ids =
        stream_ids_.Lookup(context, launch.stream, launch.per_thread_default_stream);
    record.context = ids.context;
    record.stream = ids.stream;
  } else {
    record.context = context != 0 ? stream_ids_.Lookup(context, 0, false).context
                                  : CUPTI_INVALID_CONTEXT_ID;
  }
  api_errors_.fetch_add(1, std::memory_order_relaxed);
  ring_->Push(record, options_.on_full);
  // The first sticky error sends everything pending and waits; the failures that follow on the
  // dead context (every later call returns the same error) are recorded without waiting again.
  if (sticky && options_.on_sticky_error &&
      !sticky_flushed_.exchange(true, std::memory_order_acq_rel)) {
    try {
      options_.on_sticky_error();
    } catch (...) {
    }
  }
}

void Recorder::OnLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData* data,
                        ThisThread& thread) noexcept {
  const void* params = data->functionParams;
  const uint64_t context = reinterpret_cast<uintptr_t>(data->context);
  if (IsSingleLaunch(cbid)) {  // every launch but the multi-device and legacy ones: decoded once
    DecodedLaunch launch;
    if (DecodeLaunch(cbid, params, 0, nullptr, &launch)) RecordOne(launch, data, context, thread);
    return;
  }
  const int count = LaunchCount(cbid, params);
  LegacyLaunchState legacy;
  const LegacyLaunchState* legacy_ptr = nullptr;
  if (const uint64_t f = LegacyFunction(cbid, params); f != 0) {
    if (FunctionTable::Slot* slot = functions_->FindOrClaim(f, ResolveDevice(context), context);
        slot != nullptr) {
      for (int i = 0; i < 3; ++i) legacy.block[i] = slot->legacy_block[i].load(std::memory_order_relaxed);
      legacy.smem = slot->legacy_smem.load(std::memory_order_relaxed);
    }
    legacy_ptr = &legacy;
  }
  for (int i = 0; i < count; ++i) {
    DecodedLaunch launch;
    if (!DecodeLaunch(cbid, params, i, legacy_ptr, &launch)) continue;
    uint64_t launch_context = context;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice &&
        driver_->StreamGetCtx != nullptr && launch.stream != 0) {
      // Each entry runs on its own device: its stream's context, not the current one. A query
      // inside this callback's OwnCalls scope (recorder.h); capture is checked per entry after.
      CUcontext stream_context = nullptr;
      if (driver_->StreamGetCtx(reinterpret_cast<CUstream>(launch.stream), &stream_context) ==
          CUDA_SUCCESS) {
        launch_context = reinterpret_cast<uintptr_t>(stream_context);
      }
    }
    RecordOne(launch, data, launch_context, thread);
  }
}

void Recorder::OnSyncEnter(CUpti_CallbackId cbid, SyncScope scope,
                           const CUpti_CallbackData* data) noexcept {
  if (OwnCalls::Active()) return;  // the library's own call
  const OwnCalls own;
  SyncCall call;
  call.tid = ThreadId();
  call.cbid = cbid;
  call.scope = scope;
  call.correlation_id = data->correlationId;
  call.entered_ns = base::MonotonicNs();
  uint64_t context = reinterpret_cast<uintptr_t>(data->context);
  call.stream = CUPTI_INVALID_STREAM_ID;
  switch (scope) {
    case SyncScope::kStream: {
      // cuStreamSynchronize_params and cuStreamSynchronize_ptsz_params: {CUstream hStream}.
      const auto* p = static_cast<const cuStreamSynchronize_params*>(data->functionParams);
      const uint64_t stream = p != nullptr ? reinterpret_cast<uintptr_t>(p->hStream) : 0;
      // The stream's own context when a launch on it told (a stream of another context than the
      // current one), as the launches' events name it.
      if (const uint64_t of = stream != 0 ? streams_.ContextOf(stream) : 0; of != 0) context = of;
      const StreamIdentity ids = stream_ids_.Lookup(
          context, stream, cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz);
      call.context = ids.context;
      call.stream = ids.stream;
      break;
    }
    case SyncScope::kContext: {
      if (cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2) {
        const auto* p = static_cast<const cuCtxSynchronize_v2_params*>(data->functionParams);
        if (p != nullptr && p->ctx != nullptr) context = reinterpret_cast<uintptr_t>(p->ctx);
      }
      call.context = context != 0 ? stream_ids_.Lookup(context, 0, false).context
                                  : CUPTI_INVALID_CONTEXT_ID;
      break;
    }
    case SyncScope::kEvent: {
      const auto* p = static_cast<const cuEventSynchronize_params*>(data->functionParams);
      call.event = p != nullptr ? reinterpret_cast<uintptr_t>(p->hEvent) : 0;
      call.context = context != 0 ? stream_ids_.Lookup(context, 0, false).context
                                  : CUPTI_INVALID_CONTEXT_ID;
      break;
    }
  }
  sync_calls_.Enter(call);
}

void Recorder::OnGraphLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData* data) noexcept {
  // cuGraphLaunch_params {CUgraphExec hGraph; CUstream hStream} and cuGraphLaunch_ptsz_params
  // {CUgraphExec hGraphExec; CUstream hStream}: the same layout.
  const auto* p = static_cast<const cuGraphLaunch_params*>(data->functionParams);
  if (p == nullptr) return;
  const uint64_t stream = reinterpret_cast<uintptr_t>(p->hStream);
  // Launched into a stream being captured, it becomes a node of that graph and does not run.
  if (StreamIsCapturing(stream)) return;
  uint64_t context = reinterpret_cast<uintptr_t>(data->context);
  if (const uint64_t of = stream != 0 ? streams_.ContextOf(stream) : 0; of != 0) context = of;
  const StreamIdentity ids =
      stream_ids_.Lookup(context, stream, cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz);
  GraphLaunch launch;
  launch.context = ids.context;
  launch.stream = ids.stream;
  launch.correlation_id = data->correlationId;
  uint32_t exec_id = 0;
  if (cupti_->GetGraphExecId != nullptr && p->hGraph != nullptr &&
      cupti_->GetGraphExecId(p->hGraph, &exec_id) == CUPTI_SUCCESS) {
    launch.graph_exec_id = exec_id;
  }
  launch.tid = ThreadId();
  launch.device = devices_->DeviceOf(context);
  launch.ts_ns = base::NowRealtimeNs();
  graph_launches_.Add(launch);
}

bool Recorder::StreamIsCapturing(uint64_t stream) noexcept {
  if (captures_active_.load(std::memory_order_acquire) == 0) return false;
  // The first driver call of a launch's callback, and the one allowed on a capturing stream: it
  // is how capture is checked (cuda.h, cuStreamIsCapturing); its callback is ignored (OwnCalls).
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver_->StreamIsCapturing(reinterpret_cast<CUstream>(stream), &status) != CUDA_SUCCESS) {
    return false;
  }
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool Recorder::MoveToStreamContext(const LaunchPlace& place, uint64_t* context,
                                   int* device) noexcept {
  if (place.stream_context == 0 || place.stream_context == *context) return false;
  *context = place.stream_context;
  if (place.stream_device == *device) return false;
  *device = place.stream_device;
  return true;
}

LaunchPlace& Recorder::PlaceOf(ThisThread& thread, uint64_t context,
                               const DecodedLaunch& launch) noexcept {
  LaunchPlace& place = thread.launch_place;
  // Acquire: pairs with the release of ForgetStream / ForgetContexts (launch_place.h, point 2).
  const uint64_t generation = place_generation_.load(std::memory_order_acquire);
  if (place.recorder != instance_id_ || place.generation != generation ||
      place.context != context || place.stream != launch.stream ||
      place.per_thread_default_stream != launch.per_thread_default_stream) {
    ResolvePlace(&place, generation, context, launch);
  }
  return place;
}

void Recorder::ResolvePlace(LaunchPlace* place, uint64_t generation, uint64_t context,
                            const DecodedLaunch& launch) noexcept {
  // The generation was read before the tables (launch_place.h, point 3). The driver and CUPTI
  // calls below are the ones the launch path always made (ResolveDevice, StreamContext,
  // StreamIds, ContextSms), once per stream and context, inside the launch's OwnCalls scope and
  // after its capture check (recorder.h).
  place->recorder = 0;  // not valid until complete
  place->generation = generation;
  place->context = context;
  place->stream = launch.stream;
  place->per_thread_default_stream = launch.per_thread_default_stream;
  place->device = ResolveDevice(context);
  place->stream_context = StreamContext(launch.stream);
  place->stream_device = place->stream_context != 0 && place->stream_context != context
                             ? ResolveDevice(place->stream_context)
                             : place->device;
  // The SMs the launch may use: its stream's context's (each green context is its own,
  // context_sms.h point 2), else the launch's.
  place->ids_context = place->stream_context != 0 ? place->stream_context : context;
  const StreamIdentity ids =
      stream_ids_.Lookup(place->ids_context, launch.stream, launch.per_thread_default_stream);
  place->context_id = ids.context;
  place->stream_id = ids.stream;
  place->sm_count = context_sms_.Of(*driver_, place->ids_context, launch.stream);
  // Point 4: only a complete answer is kept (a driver without cuStreamGetCtx never says). A
  // callback without a context is resolved through the current context each time
  // (ResolveDevice), which may change without the key changing.
  if (context != 0 && place->device >= 0 && place->stream_device >= 0 &&
      (place->stream_context != 0 || IsNullStream(launch.stream) ||
       driver_->StreamGetCtx == nullptr)) {
    place->recorder = instance_id_;
  }
}

uint64_t Recorder::StreamContext(uint64_t stream) noexcept {
  if (IsNullStream(stream)) return 0;  // the NULL stream: the current context
  uint64_t stream_context = streams_.ContextOf(stream);
  if (stream_context == 0) {
    // Driver call inside the launch callback, safe as every call of the slow path: the callback
    // holds an OwnCalls scope, so the callback CUPTI raises for this cuStreamGetCtx is ignored
    // (own_calls.h), and the stream is not under capture (RecordOne checked that first).
    CUcontext c = nullptr;
    if (driver_->StreamGetCtx == nullptr ||
        driver_->StreamGetCtx(reinterpret_cast<CUstream>(stream), &c) != CUDA_SUCCESS ||
        c == nullptr) {
      return 0;
    }
    stream_context = reinterpret_cast<uintptr_t>(c);
    streams_.Remember(stream, stream_context);
  }
  return stream_context;
}

FunctionTable::Pin Recorder::Pinned(uint64_t handle, int device,
                                    const LaunchPlace& place) noexcept {
  auto* hint = place.function_recorder == instance_id_
                   ? static_cast<FunctionTable::Slot*>(place.function_slot)
                   : nullptr;
  return functions_->Acquire(handle, device, hint);
}

FunctionTable::Pin Recorder::ResolveFunction(const DecodedLaunch& launch,
                                             const CUpti_CallbackData* data,
                                             LaunchPlace& place, uint64_t* context,
                                             int* device) noexcept {
  FunctionTable::Pin pin = Pinned(launch.function, *device, place);
  const uint64_t handle = launch.function;
  const FunctionInfo* known = pin.any_info();
  if (known != nullptr && !known->is_kernel) {
    if (pin.info() != nullptr) return pin;  // a CUfunction: its own context is current
  } else if (known != nullptr || pin.slot() == nullptr) {
    // A CUkernel (or not known yet) runs in the context of its stream: "the context to launch the
    // kernel on will either be taken from the specified stream hStream or the current context in
    // case of NULL stream" (cuda.h:17494-17496, cuLaunchKernel).
    if (MoveToStreamContext(place, context, device)) {
      pin.Drop();
      pin = Pinned(handle, *device, place);
    }
    if (pin.info() != nullptr) return pin;
  }
  pin.Drop();
  return ReadFunction(launch, data, *context, *device);
}

FunctionTable::Pin Recorder::ReadFunction(const DecodedLaunch& launch,
                                          const CUpti_CallbackData* data, uint64_t context,
                                          int device) noexcept {
  const uint64_t handle = launch.function;
  // An attribute set on another thread may retire what was just published before this launch
  // pins it; the launch then reads again (at most 16 times: a bound under a storm of sets), so
  // it is still recorded.
  constexpr int kAttempts = 16;
  for (int attempt = 0;; ++attempt) {
    try {
      FunctionTable::Slot* slot = functions_->FindOrClaim(handle, device, context);
      if (slot == nullptr) return FunctionTable::Pin();
      // Sets from here on are kept beside what the driver says now.
      const uint32_t generation = slot->set_generation.load(std::memory_order_acquire);
      std::unique_ptr<FunctionInfo> fresh =
          ReadFunctionInfo(*driver_, handle, device, data->symbolName,
                           context == reinterpret_cast<uintptr_t>(data->context));
      fresh->context = context;
      if (options_.accept) fresh->accepted = options_.accept(fresh->demangled, fresh->name);
      Describe(fresh.get(), device);
      if (fresh->resolved_function != 0 && fresh->resolved_function != handle) {
        // cuFuncSetAttribute on the CUfunction of this CUkernel concerns this entry too.
        functions_->Alias(fresh->resolved_function, *fresh);
      }
      functions_->Publish(slot, std::move(fresh), generation);
    } catch (...) {  // std::bad_alloc, or a throwing filter: record nothing for this launch
      return functions_->Acquire(handle, device);
    }
    FunctionTable::Pin pin = functions_->Acquire(handle, device);
    if (pin.info() != nullptr || attempt + 1 == kAttempts) return pin;
  }
}

void Recorder::Describe(FunctionInfo* info, int device) noexcept {
  // Only what RecordOne records: a function whose launches are filtered out, or whose occupancy
  // cannot be computed, needs no descriptor.
  if (options_.blackbox == nullptr || !info->accepted || !info->attributes_ok) return;
  const DeviceInfo* d = device < 0 ? nullptr : devices_->Get(device);
  if (d == nullptr || !d->engine) return;
  info->desc_index = options_.blackbox->AddFunction(
      EventBuilder::FactsOf(*info), device, blackbox::DeviceFacts{d->name, d->uuid, d->limits});
}

int Recorder::ResolveDevice(uint64_t context) noexcept {
  int ordinal = devices_->DeviceOf(context);
  if (ordinal >= 0 && devices_->Get(ordinal) != nullptr) return ordinal;
  // cuptiGetDeviceId, not cuCtxGetDevice: cupti_activity.h says it "Operates in a similar manner
  // to cudaGetDevice() or cuCtxGetDevice() but may be called from within callback functions",
  // and this runs inside the launch's callback. A context CUPTI does not know: the device of the
  // calling thread's current context ("If context is NULL, returns the ID of the device that
  // contains the currently active context"), the one the launch went to when it named none.
  uint32_t id = 0;
  if (cupti_->GetDeviceId(reinterpret_cast<CUcontext>(context), &id) != CUPTI_SUCCESS &&
      (context == 0 || cupti_->GetDeviceId(nullptr, &id) != CUPTI_SUCCESS)) {
    return -1;
  }
  ordinal = static_cast<int>(id);
  if (ordinal < 0 || ordinal >= DeviceTable::kMaxDevices) return -1;
  devices_->RememberContext(context, ordinal);
  if (devices_->Get(ordinal) == nullptr) {
    try {
      devices_->Publish(ReadDeviceInfo(*driver_, ordinal));
    } catch (...) {
      return -1;
    }
  }
  return ordinal;
}

DriverOccupancy Recorder::AskDriver(const DecodedLaunch& launch, const LaunchRecord& record,
                                    bool current) noexcept {
  // cuda.h, cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags: a CUkernel "cast to CUfunction"
  // is computed in "the current context".
  const bool per_sm_answerable = current || !record.function->is_kernel;
  const bool cluster = uint64_t{record.cluster[0]} * record.cluster[1] * record.cluster[2] > 1;
  LaunchConfigKey key;
  key.function = record.function->id;
  key.device = record.device;
  key.dyn_smem = record.dyn_smem;
  key.carveout = record.carveout >= 0 ? record.carveout : record.func_carveout;
  for (int i = 0; i < 3; ++i) {
    key.block[i] = record.block[i];
    key.cluster[i] = cluster ? record.cluster[i] : 0;
  }
  if (per_sm_answerable) {
    if (const std::optional<DriverOccupancy> known = configs_.Find(key)) return *known;
  } else if (!cluster) {
    return DriverOccupancy{};
  }

  // The cuOccupancy* calls below run once per configuration, inside the launch's callback
  // (recorder.h): in its OwnCalls scope (their callbacks ignored), after the capture check, in the
  // application's current context (for a CUkernel only when the launch's context is the current
  // one: per_sm_answerable), or the launch stream's (the cluster calls' config.hStream).
  DriverOccupancy answer;
  const auto function = reinterpret_cast<CUfunction>(launch.function);
  // The per-SM call computes under the function's own attributes; a carveout given as a launch
  // attribute (cuLaunchKernelEx) that differs from the function's cannot be expressed to it, so
  // the engine's figure holds for such a launch.
  const bool launch_carveout_differs =
      record.carveout >= 0 && record.carveout != record.func_carveout;
  const uint64_t threads = uint64_t{record.block[0]} * record.block[1] * record.block[2];
  if (driver_->OccupancyMaxActiveBlocksPerMultiprocessorWithFlags != nullptr &&
      per_sm_answerable && !launch_carveout_differs && threads <= INT32_MAX) {
    int blocks = -1;
    if (driver_->OccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
            &blocks, function, static_cast<int>(threads), record.dyn_smem, CU_OCCUPANCY_DEFAULT) ==
            CUDA_SUCCESS &&
        blocks >= 0) {
      answer.max_active_blocks = blocks;
    }
  }
  if (cluster) {
    CUlaunchAttribute attrs[2] = {};
    unsigned int count = 0;
    attrs[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[count].value.clusterDim.x = record.cluster[0];
    attrs[count].value.clusterDim.y = record.cluster[1];
    attrs[count].value.clusterDim.z = record.cluster[2];
    ++count;
    if (record.carveout >= 0) {
      attrs[count].id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
      attrs[count].value.sharedMemCarveout = static_cast<unsigned int>(record.carveout);
      ++count;
    }
    CUlaunchConfig config = {};
    config.gridDimX = record.grid[0];
    config.gridDimY = record.grid[1];
    config.gridDimZ = record.grid[2];
    config.blockDimX = record.block[0];
    config.blockDimY = record.block[1];
    config.blockDimZ = record.block[2];
    config.sharedMemBytes = record.dyn_smem;
    // The launch's stream names the context the driver computes in (a CUkernel has none).
    config.hStream = reinterpret_cast<CUstream>(launch.driver_stream());
    config.attrs = attrs;
    config.numAttrs = count;
    int clusters = 0;
    if (driver_->OccupancyMaxActiveClusters != nullptr &&
        driver_->OccupancyMaxActiveClusters(&clusters, function, &config) == CUDA_SUCCESS &&
        clusters > 0) {
      answer.max_active_clusters = clusters;
    }
    // cuda.h: cuOccupancyMaxPotentialClusterSize ignores the config's cluster dimension.
    int size = 0;
    if (driver_->OccupancyMaxPotentialClusterSize != nullptr &&
        driver_->OccupancyMaxPotentialClusterSize(&size, function, &config) == CUDA_SUCCESS &&
        size > 0) {
      answer.max_cluster_size = size;
    }
  }
  // Unknown answers are remembered too: the driver is not asked at every launch. (Not an answer
  // left unknown only because another context was current: that one is asked again.)
  if (per_sm_answerable) configs_.Insert(key, answer);
  return answer;
}

int32_t Recorder::DriverBlocks(const DecodedLaunch& launch, const LaunchRecord& record,
                               bool current) noexcept {
  // The per-SM answer depends on the function (its FunctionInfo, whose memo this is), the
  // device, the block's thread count, the dynamic shared memory and the effective carveout. When
  // they fit, they are one 42-bit key: threads (11 bits), dynamic smem (18), carveout + 1 (7),
  // device (6); the answer + 1 takes bits 42-49, and bit 63 marks the word as set.
  constexpr uint64_t kSet = uint64_t{1} << 63;
  constexpr uint64_t kKeyMask = (uint64_t{1} << 42) - 1;
  const uint64_t threads = uint64_t{record.block[0]} * record.block[1] * record.block[2];
  const int32_t carveout = record.carveout >= 0 ? record.carveout : record.func_carveout;
  const bool fits = threads < 2048 && record.dyn_smem < (1u << 18) && carveout >= -1 &&
                    carveout <= 100 && record.device >= 0 && record.device < 64;
  const uint64_t key = threads | uint64_t{record.dyn_smem} << 11 |
                       static_cast<uint64_t>(carveout + 1) << 29 |
                       static_cast<uint64_t>(record.device) << 36;
  if (fits) {
    const uint64_t word = record.function->last_driver_answer.load(std::memory_order_relaxed);
    if ((word & kSet) != 0 && (word & kKeyMask) == key) {
      return static_cast<int32_t>((word >> 42) & 0xff) - 1;
    }
  }
  if (!current && record.function->is_kernel) return -1;  // see AskDriver
  const int32_t blocks = AskDriver(launch, record, current).max_active_blocks;
  if (fits && blocks >= -1 && blocks < 255) {
    record.function->last_driver_answer.store(
        kSet | static_cast<uint64_t>(blocks + 1) << 42 | key, std::memory_order_relaxed);
  }
  return blocks;
}

void Recorder::RecordOne(const DecodedLaunch& launch, const CUpti_CallbackData* data,
                         uint64_t context, ThisThread& thread) noexcept {
  if (StreamIsCapturing(launch.driver_stream())) {
    captured_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  LaunchPlace& place = PlaceOf(thread, context, launch);
  int device = place.device;
  const uint64_t calling_context = context;
  // Pinned until the record is in the ring: the FunctionInfo cannot be freed before the sender
  // thread is done with it.
  const FunctionTable::Pin pin = ResolveFunction(launch, data, place, &context, &device);
  FunctionTable::Slot* slot = pin.slot();
  if (slot == nullptr) {
    untracked_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  place.function_recorder = instance_id_;  // the next launch's hint (launch_place.h, point 5)
  place.function_slot = slot;
  const uint64_t n = pin.ordinal();
  const FunctionInfo* info = pin.info();
  const DeviceInfo* device_info = device < 0 ? nullptr : devices_->Get(device);
  if (info == nullptr || device_info == nullptr || !info->attributes_ok || !device_info->engine) {
    unresolved_.fetch_add(1, std::memory_order_relaxed);
    slot->filtered.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Every launch by default: no division then (a 64-bit div costs tens of cycles on x86-64).
  if (!info->accepted || (options_.sample_every != 1 && n % options_.sample_every != 0)) {
    slot->filtered.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  LaunchRecord record;
  record.ts_ns = base::EventClock().NowNs();  // CLOCK_REALTIME from the TSC (tsc_clock.h)
  if (context == place.ids_context) {
    record.context = place.context_id;
    record.stream = place.stream_id;
  } else {  // a CUfunction on a stream whose context is not current: asked as before
    const StreamIdentity ids =
        stream_ids_.Lookup(context, launch.stream, launch.per_thread_default_stream);
    record.context = ids.context;
    record.stream = ids.stream;
  }
  record.correlation_id = data->correlationId;
  record.function = info;
  record.function_desc = info->desc_index;
  for (int i = 0; i < 3; ++i) {
    record.grid[i] = launch.grid[i];
    record.block[i] = launch.block[i];
    record.cluster[i] = launch.cluster[i];
  }
  if (record.cluster[0] == 0 && info->required_cluster[0] != 0) {
    // __cluster_dims__: a cluster launch even without the launch attribute.
    for (int i = 0; i < 3; ++i) record.cluster[i] = info->required_cluster[i];
  }
  record.dyn_smem = launch.dyn_smem;
  record.carveout = launch.carveout;
  const int32_t set_max_dyn_smem = slot->set_max_dyn_smem.load(std::memory_order_relaxed);
  const int32_t set_carveout = slot->set_carveout.load(std::memory_order_relaxed);
  record.func_max_dyn_smem = set_max_dyn_smem != FunctionTable::kNotSet
                                 ? set_max_dyn_smem
                                 : static_cast<int32_t>(info->max_dyn_smem);
  record.func_carveout = set_carveout != FunctionTable::kNotSet ? set_carveout : info->carveout;
  record.tid = thread.Tid();
  record.device = static_cast<int8_t>(device);  // [0, DeviceTable::kMaxDevices)
  // The SMs the launch may use (the place's: its stream's context's, else the launch's).
  const int sms = place.sm_count;
  record.sm_count = sms > 0 && sms < device_info->limits.sm_count ? static_cast<uint16_t>(sms) : 0;
  const bool current_context = context == calling_context;
  if (uint64_t{record.cluster[0]} * record.cluster[1] * record.cluster[2] <= 1) {
    record.driver_max_active_blocks =
        static_cast<int16_t>(DriverBlocks(launch, record, current_context));
  } else {
    const DriverOccupancy driver = AskDriver(launch, record, current_context);
    record.driver_max_active_blocks = static_cast<int16_t>(driver.max_active_blocks);
    record.max_active_clusters = driver.max_active_clusters;
    // The launch ran: its cluster size is allowed whatever else the driver could say.
    const uint64_t own = uint64_t{record.cluster[0]} * record.cluster[1] * record.cluster[2];
    record.max_cluster_size = static_cast<uint16_t>(
        std::min<uint64_t>(std::max<uint64_t>(own, static_cast<uint64_t>(driver.max_cluster_size)),
                           UINT16_MAX));
  }
  record.api = launch.api;
  record.launch_flags =
      static_cast<uint8_t>((launch.cooperative ? blackbox::kLaunchCooperative : 0) |
                           (launch.programmatic_serialization
                                ? blackbox::kLaunchProgrammaticSerialization
                                : 0));
  if (options_.timing_window != nullptr && data->correlationData != nullptr) {
    record.launch_flags |= TimingWindows::LaunchFlag(
        *data->correlationData, options_.timing_window->load(std::memory_order_relaxed));
  }
  ring_->Push(record, options_.on_full);  // a refused record is counted by the ring
}

}  // namespace cuflight::inject
