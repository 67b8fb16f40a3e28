// In-process fakes of the driver and CUPTI tables for the injected library's tests: function
// attributes and devices are whatever the test sets, every call is counted.
#ifndef CUFLIGHT_TESTS_INJECT_FAKE_CUDA_H_
#define CUFLIGHT_TESTS_INJECT_FAKE_CUDA_H_

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "cuflight/occupancy/device_limits.h"
#include "cupti_api.h"
#include "driver_api.h"

namespace cuflight::inject::testing {

struct FakeFunction {
  int num_regs = 32;
  int static_smem = 0;
  int local_bytes = 0;
  int const_bytes = 0;
  int max_threads_per_block = 1024;
  int max_dyn_smem = 48 * 1024;
  int carveout = -1;
  int cluster[3] = {0, 0, 0};
  int non_portable = 0;
  bool fail = false;  // every attribute query fails (CUDA_ERROR_INVALID_HANDLE)
  // Named barriers per block (bar.sync ids the kernel uses). No function attribute exposes it;
  // the fake driver's occupancy call applies it as cuda_occupancy.h's numBlockBarriers does, so a
  // barrier-heavy kernel (CUTLASS, FlashAttention) gets fewer blocks from the driver than from
  // what the attributes show.
  int block_barriers = 1;
  // cuFuncGetModule answers this ("the handle of the module that function hfunc is located in",
  // cuda.h:17308); 0: CUDA_ERROR_NOT_FOUND, one of its documented results.
  uint64_t module = 0;
  // Values set by FakeCuda::FuncSetAttribute, by attribute: cuFuncGetAttribute returns them in
  // place of the compiled values above.
  std::map<int, int> set;
};

// A CUkernel (cuLibraryGetKernel): context-independent, with a CUfunction in each device's
// context.
struct FakeKernel {
  uint64_t library = 0;  // cuKernelGetLibrary (cuda.h:8141); 0: CUDA_ERROR_NOT_FOUND
  // Device ordinal -> the kernel's CUfunction there (a key of FakeCuda::functions, whose compiled
  // values are the kernel's on that device). cuKernelGetFunction: "the handle of the function for
  // the requested kernel kernel and the current context" (cuda.h:8113-8114): the entry of
  // current_device.
  std::map<int, uint64_t> functions;
  // cuKernelSetAttribute values by (device, attribute): "on the kernel kernel for the requested
  // device dev" (cuda.h:8339-8340).
  std::map<std::pair<int, int>, int> set;
};

struct FakeCuda {
  std::map<uint64_t, FakeFunction> functions;          // by handle
  std::map<int, occupancy::DeviceLimits> devices;      // by ordinal
  int pci_domain = 0;  // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID of every device (the bus: 0x19 + ordinal)
  std::map<uint64_t, int> context_device;              // CUcontext -> ordinal
  std::map<uint64_t, int> capturing_streams;           // stream -> capturing (1)
  // CUkernels by handle. cuFuncGetAttribute on a CUkernel handle fails with
  // CUDA_ERROR_INVALID_HANDLE unless it is also in `functions`.
  std::map<uint64_t, FakeKernel> kernels;
  // cuStreamGetCtx: stream -> "the context that was active in the calling thread when the stream
  // was created" (cuda.h:15139). Another handle is undefined behaviour there (cuda.h:15140); here
  // CUDA_ERROR_INVALID_HANDLE.
  std::map<uint64_t, uint64_t> stream_context;
  // cuDevicePrimaryCtxGetState: device ordinal -> whether its primary context is active, "0 =
  // inactive, 1 = active" (cuda.h:6044); absent: 0.
  std::map<int, int> primary_active;
  // Called after every cuFuncGetAttribute and cuKernelGetAttribute with its result, as CUPTI
  // raises the exit callback of a driver call the library itself makes.
  std::function<void(CUresult)> after_attribute_query;
  // Called after every driver call the library makes through driver() (its cu* name and result),
  // as CUPTI raises a callback for each ("the callback is invoked ... for every CUDA driver API
  // function", cupti_callbacks.h, CUPTI_CB_DOMAIN_DRIVER_API): a test raises the recorder's
  // callback from in there, re-entrantly, as CUPTI would on the thread inside the callback.
  std::function<void(const char* call, CUresult)> after_driver_call;
  // Green contexts (cuda.h, CUDA 13.0, "Green Contexts"). cuCtxGetDevResource(ctx, SM): the
  // smCount of context_sms[ctx], else of the context's device (the whole device:
  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT); cuStreamGetGreenCtx: stream_green[stream], else
  // NULL ("NULL if the stream is not associated with any green context");
  // cuGreenCtxGetDevResource(green, SM): green_sms[green], else CUDA_ERROR_INVALID_CONTEXT (one
  // of its documented results). Each resource query is counted.
  std::map<uint64_t, int> context_sms;
  std::map<uint64_t, uint64_t> stream_green;
  std::map<uint64_t, int> green_sms;
  int resource_queries = 0;
  // Successful CU_FUNC_ATTRIBUTE_NUM_REGS queries, the first of each read of a function: by
  // CUfunction (cuFuncGetAttribute) and by (CUkernel, device) (cuKernelGetAttribute).
  std::map<uint64_t, int> function_reads;
  std::map<std::pair<uint64_t, int>, int> kernel_reads;
  int stream_context_queries = 0;
  // cuOccupancyMaxActiveClusters answers this (CUDA_ERROR_INVALID_CLUSTER_SIZE when < 0), and
  // counts its calls; the last configuration asked about is kept.
  int max_active_clusters = -1;
  int cluster_queries = 0;
  // cuOccupancyMaxPotentialClusterSize answers this (CUDA_ERROR_INVALID_VALUE when <= 0) and
  // counts its calls.
  int max_potential_cluster_size = 8;
  int cluster_size_queries = 0;
  // cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags: computed with cuda_occupancy.h from the
  // function's attributes (its carveout and block_barriers among them) on the current device;
  // `occupancy_fails` makes it fail (CUDA_ERROR_INVALID_VALUE). Its calls are counted.
  bool occupancy_fails = false;
  int occupancy_queries = 0;
  CUlaunchConfig last_cluster_config{};
  uint32_t last_cluster_dims[3] = {0, 0, 0};
  int current_device = 0;
  // cuCtxGetDevice calls (the library asks cuptiGetDeviceId inside callbacks instead).
  int ctx_get_device_calls = 0;
  // CUPTI's ids (cupti_activity.h). cuptiGetContextId: "a process-unique ID for the context";
  // cuptiGetStreamIdEx: "The stream ID is unique within a context". Handles not listed get the
  // next free id on first ask (contexts from 1, streams from 100); the legacy NULL stream of a
  // context and each thread's per-thread stream (perThreadStream = 1) are streams of their own.
  // A stream in `destroyed_streams` is refused (CUPTI_ERROR_INVALID_STREAM). Calls are counted.
  std::map<uint64_t, uint32_t> context_ids;
  std::map<uint64_t, uint32_t> stream_ids;
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> null_stream_ids;  // (context, thread or 0)
  std::set<uint64_t> destroyed_streams;
  // cuptiGetGraphExecId (cupti_activity.h: "Returns the unique ID of executable CUDA graph"):
  // the id of a listed CUgraphExec handle; others are refused (CUPTI_ERROR_INVALID_PARAMETER).
  std::map<uint64_t, uint32_t> graph_exec_ids;
  uint32_t next_context_id = 1;
  uint32_t next_stream_id = 100;
  int stream_id_queries = 0;
  int attribute_queries = 0;
  int capture_queries = 0;
  // Activity records the fake cuptiActivityGetNextRecord walks, whatever the buffer. When empty,
  // it walks the buffer itself as CUPTI does: records back to back from its start, as
  // WriteKernelRecords lays them out, up to the valid size.
  std::vector<CUpti_Activity*> activity_records;
  size_t activity_next = 0;
  // cuptiActivityFlushAll(flag) calls this with the flag, when set, so that a test can hand over
  // the buffers CUPTI would: with flag 0 "all the activity buffers which have all the activity
  // records completed", with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED also "the ones which have one or
  // more incomplete activity records" (cupti_activity.h, cuptiActivityFlushAll). Calls are
  // counted.
  std::function<void(uint32_t)> on_flush;
  int flushes = 0;
  // The activity kinds enabled (cuptiActivityEnable, cuptiActivityDisable; calls counted) and
  // cuptiActivityEnableAllSyncRecords' setting (CUPTI's default: on).
  std::set<int> activity_kinds;
  int activity_enables = 0;
  int activity_disables = 0;
  bool all_sync_records = true;
  // cuptiActivityGetNumDroppedRecords hands this out and resets it to 0, as CUPTI resets its
  // count on every read; each call is counted.
  size_t dropped_records = 0;
  int dropped_queries = 0;

  // The driver's side of cuFuncSetAttribute and cuKernelSetAttribute (the library sees only the
  // calls' callbacks): what cuFuncGetAttribute / cuKernelGetAttribute return from then on.
  void FuncSetAttribute(uint64_t function, CUfunction_attribute attribute, int value);
  void KernelSetAttribute(CUfunction_attribute attribute, int value, uint64_t kernel, int device);
  // Total of function_reads and kernel_reads; kernel_reads of one (CUkernel, device).
  int Reads() const;
  int KernelReads(uint64_t kernel, int device) const;

  DriverApi driver() const;
  CuptiApi cupti() const;

  static FakeCuda* current;  // the fake the static entry points use
};

// Writes `records` back to back into `buffer` (8-byte aligned, `size` bytes), as CUPTI fills an
// activity buffer; returns the valid size, or 0 when they do not fit.
size_t WriteKernelRecords(const std::vector<CUpti_ActivityKernel10>& records, uint8_t* buffer,
                          size_t size);

// One record of the fake's activity buffers, of either kind the library reads. Every record takes
// a kernel record's size here (CUPTI packs records by their own size; the library walks them only
// through cuptiActivityGetNextRecord, so the layout is the fake's).
union FakeActivityRecord {
  CUpti_Activity activity;
  CUpti_ActivityKernel10 kernel;
  CUpti_ActivitySynchronization2 sync;
};
static_assert(sizeof(FakeActivityRecord) == sizeof(CUpti_ActivityKernel10));
size_t WriteActivityRecords(const std::vector<FakeActivityRecord>& records, uint8_t* buffer,
                            size_t size);

// Sets FakeCuda::current for the scope.
class ScopedFake {
 public:
  explicit ScopedFake(FakeCuda* fake) { FakeCuda::current = fake; }
  ~ScopedFake() { FakeCuda::current = nullptr; }
};

}  // namespace cuflight::inject::testing

#endif  // CUFLIGHT_TESTS_INJECT_FAKE_CUDA_H_
