// The injected library as a whole: set-up from InitializeInjection, the CUPTI callbacks, exit and
// fork handling. One instance per process, created on first use and never destroyed (CUPTI may
// call back until the process ends).
//
// Failure policy: anything that cannot be set up (libcupti missing, another CUPTI subscriber,
// no sender thread) prints one line on stderr and leaves the application untouched.
#ifndef CUFLIGHT_LIBINJECT_SRC_INJECTOR_H_
#define CUFLIGHT_LIBINJECT_SRC_INJECTOR_H_

#include <cupti.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "activity_buffers.h"
#include "crash_handler.h"
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/env/config.h"
#include "cupti_api.h"
#include "cupti_yield.h"
#include "device_table.h"
#include "driver_api.h"
#include "function_table.h"
#include "launch_ring.h"
#include "recorder.h"
#include "sender_thread.h"
#include "timing_windows.h"

namespace cuflight::inject {

// How long an urgent flush (a sticky CUDA error, a fatal signal) may hold the thread that asked
// for it, waiting for the collector's acknowledgement.
inline constexpr int64_t kUrgentFlushWaitNs = 2'000'000'000;

class Injector {
 public:
  static Injector& Instance() noexcept;

  // Sets everything up; called once from InitializeInjection. Never throws.
  void Initialize() noexcept;

 private:
  // What a process (the original one, or a fork()ed child that launches kernels) sends through.
  struct Pipeline {
    // The memfd the ring lies in, shared with the collector (null: the ring is in this
    // process's own memory). Declared first: it outlives the ring.
    std::unique_ptr<blackbox::RegionWriter> blackbox;
    std::unique_ptr<LaunchRing> ring;
    // The sampled timing policy's windows (null under all and off): before the recorder, which
    // reads its word.
    std::unique_ptr<TimingWindows> windows;
    std::unique_ptr<Recorder> recorder;
    std::unique_ptr<SenderThread> sender;
    Pipeline* previous = nullptr;  // chain of pipelines inherited through fork()
  };

  Injector() = default;
  bool InitializeOrExplain() noexcept;
  // `quiet`: a refusal is said at debug level only (taking CUPTI back after a yield, retried).
  // The CUPTI result is left in last_subscribe_.
  // `enable_callbacks` false: the driver callbacks are left to EnableCallbacks.
  bool Subscribe(bool quiet = false, bool enable_callbacks = true) noexcept;
  void EnableCallbacks() noexcept;
  // CuptiYield's hooks (cupti_yield.h), on the sender thread: hand CUPTI over; take it back
  // (subscribe, forget what the callbacks could not keep current, set timing up again).
  void ReleaseCupti() noexcept;
  CUptiResult TakeCupti() noexcept;
  // Registers the activity buffer callbacks and, under the `all` policy, enables kernel records,
  // through the family Subscribe chose (under `sampled` the sender thread enables them, window by
  // window). False (one warning said): no timing for this process.
  bool EnableTiming() noexcept;
  // `start`: start the sender thread now (false: the caller starts it).
  Pipeline* MakePipeline(bool with_activity, bool start) noexcept;
  // The black box for a ring of `ring_slots` and its ring; a ring in this process's memory (and
  // one warning) when no black box can be made or the collector is reached over TCP.
  void MakeRing(Pipeline* pipeline, int32_t pid);
  Pipeline* PipelineForThisProcess() noexcept;
  void OnExit() noexcept;
  // pthread_atfork's prepare, parent and child handlers.
  void OnForkPrepare() noexcept;
  void OnForkParent() noexcept;
  void OnForkChild() noexcept;
  // The crash handler's reporter (async-signal-safe): flushes this process's pipeline.
  static bool ReportCrash(const CrashInfo& crash, int64_t wait_ns) noexcept;

  static void CUPTIAPI Callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void* data);
  static void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                       size_t size, size_t valid_size);
  // The same for the subscriber-scoped activity API (CuptiApi::ActivityRegisterCallbacksV2).
  static void CUPTIAPI BufferRequestedV2(uint8_t** buffer, size_t* size, size_t* max_records,
                                         void* request_info);
  static void CUPTIAPI BufferCompletedV2(uint8_t* buffer, size_t size, size_t valid_size,
                                         void* complete_info);

  env::Config config_;
  DriverApi driver_;
  CuptiApi cupti_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  // Timing uses the subscriber-scoped activity API (UsesSubscriberActivityApi), decided once.
  bool subscriber_scoped_ = false;
  std::unique_ptr<FunctionTable> functions_;
  std::unique_ptr<DeviceTable> devices_;
  std::unique_ptr<env::NameFilter> filter_;
  std::unique_ptr<ActivityBuffers> activity_;
  // Taking turns with other CUPTI tools; made before the subscription, never destroyed.
  std::unique_ptr<CuptiYield> yield_;
  CUptiResult last_subscribe_ = CUPTI_SUCCESS;
  std::atomic<Pipeline*> pipeline_{nullptr};
  // Pipelines inherited from parent processes: never used or freed in the child (their threads
  // do not exist here), kept reachable.
  Pipeline* inherited_ = nullptr;
  std::atomic<int> pipeline_pid_{0};
  std::mutex pipeline_mu_;  // creating a pipeline (slow path, once per process)
  std::atomic<bool> initialized_{false};
  std::atomic<bool> exiting_{false};
  int32_t driver_version_ = 0;
  uint32_t cupti_version_ = 0;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_INJECTOR_H_
