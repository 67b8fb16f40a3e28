// The CUPTI callback handler: turns each kernel launch into a LaunchRecord in the ring.
//
// Hot path (a launch of a function, device and context seen before): decode the parameter
// struct, find the function's slot, count the launch, apply the name filter and sampling, copy a
// fixed-size record into the ring. No allocation, no lock, no I/O, no logging, no JSON; when the
// ring is full the record is dropped and counted (CUFLIGHT_ON_FULL=drop) or the thread waits
// (block). The first launch of a function, device or context takes a slow path that asks the
// driver and allocates once.
//
// Launches made while their stream is being captured into a graph do not execute; they are not
// recorded (the graph's kernel nodes are, from their activity records, when it runs).
//
// For stall detection (stall_tracker.h), two things beside the launch ring, both off the kernel
// launch path: the synchronising calls in progress (sync_calls.h: their enter and exit
// callbacks; a launch's enter callback pays one compare for it), and the graph launches
// (graph_launches.h: cuGraphLaunch's exit callback).
//
// Calls into CUDA from inside a callback, and why each is safe. Every one is made inside an
// OwnCalls scope (own_calls.h): the callbacks CUPTI raises for them are ignored, so the library
// never re-enters itself nor reports its own probes as the application's errors. Each is made
// from the exit callback, after the application's call returned, on the application's thread with
// its current context (the one the call ran in; none is pushed or set):
//  - cuStreamIsCapturing, first, and only while some capture is in progress in the process
//    (captures_active_): a launch into a capturing stream is not recorded, and the calls below
//    are not made for it, so that no query that could invalidate a capture reaches its stream;
//  - cuFuncGetAttribute / cuKernelGetAttribute / cuKernelGetFunction / cuKernelGetLibrary /
//    cuFuncGetModule (a function's first launch), cuDeviceGet / cuDeviceGetAttribute /
//    cuDeviceGetName / cuDeviceGetUuid (a device's first launch), cuOccupancy* (a
//    configuration's first launch), cuStreamGetCtx (a stream's first launch),
//    cuStreamGetGreenCtx / cuGreenCtxGetDevResource / cuCtxGetDevResource (a context's first
//    launch, context_sms.h), cuDevicePrimaryCtxGetState (a primary context's release): queries
//    that neither synchronize nor change state, each cached after its first answer;
//  - the device of a launch's context: cuptiGetDeviceId, which cupti_activity.h documents as
//    callable "from within callback functions" (unlike cuCtxGetDevice, never called here).
// tests/inject/driver_calls_test.cc raises a callback re-entrantly from inside each of these calls
// (ReentrantCallback.RaisedByTheLibrarysOwnCallIsIgnored/<call>) and checks that the scenarios
// making them make exactly this list.
#ifndef CUFLIGHT_LIBINJECT_SRC_RECORDER_H_
#define CUFLIGHT_LIBINJECT_SRC_RECORDER_H_

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "cuflight/blackbox/region_writer.h"
#include "context_sms.h"
#include "cupti_api.h"
#include "device_table.h"
#include "driver_api.h"
#include "function_table.h"
#include "graph_launches.h"
#include "launch_config_table.h"
#include "launch_decoder.h"
#include "launch_place.h"
#include "launch_ring.h"
#include "own_calls.h"
#include "stream_ids.h"
#include "stream_table.h"
#include "sync_calls.h"

namespace cuflight::inject {

struct RecorderOptions {
  uint32_t sample_every = 1;  // record every Nth launch of each function
  env::OnFull on_full = env::OnFull::kDrop;
  // Name filter, called once per function on the slow path; empty = accept all.
  std::function<bool(std::string_view demangled, std::string_view mangled)> accept;
  // Record driver calls that fail (api_error events): those whose callbacks are enabled
  // (CUFLIGHT_API_ERRORS, driver_queries.h). Off, only launches, cache invalidations and
  // synchronising calls are looked at.
  bool api_errors = true;
  // Called on the failing thread after the api_error record of the process's first sticky error
  // (the context is unusable: illegal address, launch failure, ECC, ...) is in the ring; sends
  // everything pending at once. May be empty.
  std::function<void()> on_sticky_error;
  // The black box the ring lies in: each function read is described there (slow path), and its
  // launch records name the descriptor. Null: none (the records name none).
  blackbox::RegionWriter* blackbox = nullptr;
  // The sampled timing policy's window word (TimingWindows::state(), timing_windows.h design
  // point 3): read at a launch's API entry and exit, and the launch record flagged
  // kLaunchInTimingWindow when both saw the same open window. Null: not sampled (no flag).
  const std::atomic<uint64_t>* timing_window = nullptr;
};

// Errors after which the CUDA context cannot be used any more (the process usually ends soon).
bool IsStickyError(CUresult result);
// Failures that are part of normal operation and are counted instead of reported as api_error:
// the list in cuflight/schema/routine_failures.h (polling, entry-point and symbol probing,
// pointer-attribute probes on host memory, peer access and host registration already in the
// asked state, ...).
bool IsRoutineFailure(CUpti_CallbackId cbid, CUresult result);

// Repeats of one failure (driver call, CUresult) beyond the first kBurst are recorded at most
// once per second; the rest are counted. Lock-free; a fixed table of pairs (a pair whose entry
// another took starts afresh).
class ApiErrorLimiter {
 public:
  static constexpr uint64_t kBurst = 10;
  static constexpr int64_t kIntervalNs = 1000000000;
  static constexpr size_t kEntries = 256;

  // True when this failure at `now_ns` is to be recorded.
  bool Allow(uint32_t cbid, int32_t result, int64_t now_ns) noexcept;

 private:
  struct Entry {
    std::atomic<uint64_t> key{0};
    std::atomic<uint64_t> count{0};
    std::atomic<int64_t> last_ns{0};
  };
  Entry entries_[kEntries];
};

class Recorder {
 public:
  Recorder(const DriverApi* driver, const CuptiApi* cupti, LaunchRing* ring,
           FunctionTable* functions, DeviceTable* devices, RecorderOptions options);
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // The body of the CUPTI callback. Never throws.
  void OnCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                  const CUpti_CallbackData* data) noexcept;

  // Driver-domain callback ids enabled in every CUFLIGHT_API_ERRORS setting: the launches, the
  // calls that change what the recorder caches (function attributes, module unloads, context
  // teardown, capture), and for stall detection the synchronising calls (sync_calls.h) and graph
  // launches (graph_launches.h) (driver_queries.h, kNeededCalls).
  static std::span<const CUpti_CallbackId> DriverCallbacks();

  // After the library was off CUPTI (cupti_yield.h): the teardowns and attribute changes made
  // meanwhile were not seen, so the remembered contexts and streams are forgotten and every
  // function is read again at its next launch. Sender thread, while the callback is gated.
  void ForgetAfterYield() noexcept;

  // For the sender thread's stall detection (its reads keep their own position, hence mutable).
  SyncCallTable* sync_calls() const { return &sync_calls_; }
  GraphLaunchLog* graph_launches() const { return &graph_launches_; }

  // Launches the ring refused (full, or closed at exit).
  uint64_t dropped_ring_full() const { return ring_->dropped(); }
  uint64_t captured() const { return captured_.load(std::memory_order_relaxed); }
  // Launches seen that could not be recorded for want of driver facts (function attributes,
  // device limits): also counted in `filtered` of their function when it has a slot.
  uint64_t unresolved() const { return unresolved_.load(std::memory_order_relaxed); }
  // Launches of functions beyond the function table's capacity (not recorded).
  uint64_t untracked() const { return untracked_.load(std::memory_order_relaxed); }
  // Failed driver calls recorded as api_error (or dropped by a full ring).
  uint64_t api_errors() const { return api_errors_.load(std::memory_order_relaxed); }
  // Failed driver calls of the routine list: counted, not recorded.
  uint64_t api_errors_routine() const { return routine_.load(std::memory_order_relaxed); }
  // Repeats of one failure beyond the rate limit: counted, not recorded.
  uint64_t api_errors_suppressed() const { return suppressed_.load(std::memory_order_relaxed); }

  // Streams whose CUPTI ids are remembered.
  static constexpr size_t kStreamCapacity = 4096;
  // Launch configurations whose driver answer is remembered.
  static constexpr size_t kLaunchConfigCapacity = 16384;
  // A teardown that leaves this many retired functions waiting wakes the sender thread, which
  // frees them (FunctionTable::Reclaim) so that their slots can be reused.
  static constexpr size_t kWakeConsumerRetired = 1024;

 private:
  // `thread`: the calling thread's (own_calls.h), found once by OnCallback.
  void OnLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData* data,
                ThisThread& thread) noexcept;
  // A synchronising call's enter callback (sync_calls.h); kept out of line, off the launch path.
  [[gnu::noinline]] void OnSyncEnter(CUpti_CallbackId cbid, SyncScope scope,
                                     const CUpti_CallbackData* data) noexcept;
  // A cuGraphLaunch that succeeded.
  void OnGraphLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData* data) noexcept;
  void OnApiError(CUpti_CallbackId cbid, const CUpti_CallbackData* data, CUresult result) noexcept;
  // cuFuncSetAttribute of a CUfunction succeeded (it concerns the CUfunction's entry and, when it
  // is the CUfunction of a CUkernel, that CUkernel's entry on the same device).
  void OnFunctionAttributeSet(uint64_t function, CUfunction_attribute attribute,
                              int value) noexcept;
  // cuKernelSetAttribute of a CUkernel on one device succeeded.
  void OnKernelAttributeSet(uint64_t kernel, CUdevice device, CUfunction_attribute attribute,
                            int value) noexcept;
  // A context was destroyed: its functions, streams and device mapping go.
  void ContextGone(uint64_t context) noexcept;
  // The primary context of `device` was destroyed (reset, or its last reference released).
  void PrimaryContextGone(CUdevice device) noexcept;
  void RecordOne(const DecodedLaunch& launch, const CUpti_CallbackData* data, uint64_t context,
                 ThisThread& thread) noexcept;
  // Where a launch in `context` on the launch's stream runs (launch_place.h): the calling
  // thread's place when it is this launch's, else resolved from the tables into it.
  LaunchPlace& PlaceOf(ThisThread& thread, uint64_t context,
                       const DecodedLaunch& launch) noexcept;
  // Resolves `place` anew (the slow side of PlaceOf, kept out of line).
  [[gnu::noinline]] void ResolvePlace(LaunchPlace* place, uint64_t generation, uint64_t context,
                                      const DecodedLaunch& launch) noexcept;
  // The pinned entry of the launched function on the launch's device, read from the driver on the
  // first launch (slow path). For a CUkernel on a stream of its own, *context and *device become
  // the stream's (from `place`). An empty pin: the table is full. The pinned slot becomes the
  // place's function hint.
  FunctionTable::Pin ResolveFunction(const DecodedLaunch& launch, const CUpti_CallbackData* data,
                                     LaunchPlace& place, uint64_t* context,
                                     int* device) noexcept;
  // The pinned entry of (handle, device), through the place's function hint.
  FunctionTable::Pin Pinned(uint64_t handle, int device, const LaunchPlace& place) noexcept;
  // The slow path of ResolveFunction: reads the driver and publishes, once per function and
  // device; kept out of line so that the cached case stays small.
  [[gnu::noinline]] FunctionTable::Pin ReadFunction(const DecodedLaunch& launch,
                                                    const CUpti_CallbackData* data,
                                                    uint64_t context, int device) noexcept;
  // When the launch's place names a stream of its own whose context is not *context: sets
  // *context to it and *device to its device, and returns true when the device changed.
  static bool MoveToStreamContext(const LaunchPlace& place, uint64_t* context,
                                  int* device) noexcept;
  // The tables forget a stream that was destroyed, or every context and stream (a context went
  // away, or the library was off CUPTI); then every thread's launch place is stale
  // (launch_place.h, point 2).
  void ForgetStream(uint64_t stream) noexcept;
  void ForgetContexts() noexcept;
  // The context of a non-NULL stream (cuStreamGetCtx, remembered per stream), or 0: the NULL
  // stream (the current context), or a driver that cannot say.
  uint64_t StreamContext(uint64_t stream) noexcept;
  int ResolveDevice(uint64_t context) noexcept;
  // Describes `info` (read for `device`) in the black box, when there is one and its launches
  // are recorded: sets info->desc_index. Slow path.
  void Describe(FunctionInfo* info, int device) noexcept;
  bool StreamIsCapturing(uint64_t stream) noexcept;
  // What the driver says about the configuration `record` describes, asked once per
  // configuration (see launch_config_table.h). Slow path on a configuration's first launch.
  // `current`: the launch runs in the calling thread's current context. A CUkernel launched into
  // a stream of another context is not asked about per SM: cuda.h computes a CUkernel's
  // occupancy "in the current context", which is another device's.
  DriverOccupancy AskDriver(const DecodedLaunch& launch, const LaunchRecord& record,
                            bool current) noexcept;
  // The same for a launch that is not a cluster launch, through the function's memo of its last
  // configuration first: a function launched as before costs one load and a compare.
  int32_t DriverBlocks(const DecodedLaunch& launch, const LaunchRecord& record,
                       bool current) noexcept;

  // Never reused in the process (launch_place.h, point 6).
  const uint64_t instance_id_;
  // Bumped after the tables forget (launch_place.h, point 2).
  std::atomic<uint64_t> place_generation_{1};
  const DriverApi* driver_;
  const CuptiApi* cupti_;
  LaunchRing* ring_;
  FunctionTable* functions_;
  DeviceTable* devices_;
  RecorderOptions options_;

  std::atomic<int32_t> captures_active_{0};
  std::atomic<uint64_t> captured_{0};
  std::atomic<uint64_t> unresolved_{0};
  std::atomic<uint64_t> untracked_{0};
  std::atomic<uint64_t> api_errors_{0};
  std::atomic<uint64_t> routine_{0};
  std::atomic<uint64_t> suppressed_{0};
  ApiErrorLimiter limiter_;
  std::atomic<bool> sticky_flushed_{false};
  LaunchConfigTable configs_{kLaunchConfigCapacity};
  StreamTable streams_;
  StreamIds stream_ids_;
  ContextSms context_sms_;
  // Each device's primary context as cuDevicePrimaryCtxRetain returned it; 0: not seen.
  std::atomic<uint64_t> primary_contexts_[DeviceTable::kMaxDevices] = {};
  mutable SyncCallTable sync_calls_;
  mutable GraphLaunchLog graph_launches_;
};

// Reads a function's attributes and names from the driver (the recorder's slow path; exposed
// for tests): a CUfunction through cuFuncGetAttribute; a CUkernel on device `ordinal` through
// cuKernelGetAttribute, resolving its CUfunction (cuKernelGetFunction, current context) only when
// `resolve_in_current_context` (the launch's context is the current one). `symbol_name` is
// CUPTI's name for the launch (may be null).
std::unique_ptr<FunctionInfo> ReadFunctionInfo(const DriverApi& driver, uint64_t handle,
                                               int ordinal, const char* symbol_name,
                                               bool resolve_in_current_context);
// Reads a device's limits, name and UUID (slow path; exposed for tests).
std::unique_ptr<DeviceInfo> ReadDeviceInfo(const DriverApi& driver, int ordinal);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_RECORDER_H_
