// A stand-in libcupti for the injection tests: keeps the subscriber's callback and lets the test
// program fire launch callbacks through fake_cupti_launch(). FAKE_CUPTI_MODE=taken makes
// subscription fail as when another tool holds CUPTI.
//
// FAKE_CUPTI_TIMING=<incomplete>,<dropped>,<refused> makes it time the launches too: each launch
// gets a CONCURRENT_KERNEL activity record (start 1000 x its correlation id, 500 ns long), held
// until a forced flush (cuptiActivityFlushAll with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, as the
// injector's exit does; other flushes hand over nothing, as if the kernels were still running).
// The forced flush asks for buffers until <refused> requests were refused (at most 64 asks),
// writes the records into the first buffer it got, the last <incomplete> of them with end 0 (still
// running), reports <dropped> records dropped (cuptiActivityGetNumDroppedRecords, reset on read)
// and completes every buffer it got, the others empty.
// FAKE_CUPTI_TIMING=<incomplete>,<dropped>,<refused>,<running ms> instead has the kernels run until
// <running ms> after the first launch, as CUPTI shows a GPU (cupti_activity.h,
// cuptiActivityFlushAll; docs/gpu-verification.md for an H200): until then a default flush hands
// over nothing (the buffer holds records still incomplete) and a forced flush hands over every
// record incomplete (end 0), never to be handed over again; from then on any flush hands over
// the records left, complete, and once a context-synchronize record (type
// CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, the next correlation id), as from a
// program whose cuCtxSynchronize returned when its kernels ended.
//
// A refused buffer request (the <refused> field above, and the polling threads below) loses
// records: cupti_activity.h, CUpti_BuffersCallbackRequestFunc: "The callback function can
// decline the request by setting *buffer to NULL. In this case CUPTI may drop activity records";
// here each record that found no buffer is counted dropped (cuptiActivityGetNumDroppedRecords:
// "records that were dropped because of insufficient buffer space"). When the forced flush gets
// no buffer at all, every kernel record it held is dropped so.
//
// CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER (cuptiActivitySetAttribute): once set non-0,
// "user should provide a zero value buffer in the CUpti_BuffersCallbackRequestFunc"; every buffer
// the fake is given from then on is checked, and one that is not all zero is said on stderr
// ("fake CUPTI: activity buffer not zero") before the fake writes into it.
//
// Synchronization records (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) exist only while that kind is
// enabled (cuptiActivityEnable / cuptiActivityDisable per kind: "Enable collection of a specific
// kind of activity record"), the context-synchronize record of the running mode included.
//   FAKE_CUPTI_POLLERS=<threads>,<polls>  from the first launch, that many threads of the
//                                 application each make <polls> cuStreamQuery calls 1 ms apart
//                                 (at most for 800 ms) on a stream whose work has not completed,
//                                 as NCCL's watchdog and MPI/UCX progress loops do. Each query
//                                 makes a synchronization record while the kind is enabled and
//                                 cuptiActivityEnableAllSyncRecords was not set to 0
//                                 (cupti_activity.h: "By default, the record is generated for all
//                                 CUDA events and stream irrespective of whether the operations
//                                 have been completed"; with it 0, queries "for which the
//                                 operations have not yet been completed" make none). The 13.0
//                                 header's CUpti_ActivitySynchronizationType has no query type:
//                                 the record says TYPE_UNKNOWN. Each thread's records go to a
//                                 buffer of its own
//                                 (CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, default 1:
//                                 "Request activity buffers per-thread"), requested at
//                                 its first record and held until a flush (any flush hands them
//                                 over: their records are complete); a forced flush asks for the
//                                 kernel records' buffer while the polling threads hold theirs.
//
// Modes for the library's bounds on start-up and exit:
//   FAKE_CUPTI_FLUSH=hang         every cuptiActivityFlushAll blocks forever (cupti_activity.h
//                                 gives the call no time limit; on a faulted context it may not
//                                 return); fake_cupti_launch first waits (at most 2 s) until a
//                                 flush hangs, so that the launches find the caller stuck;
//   FAKE_CUPTI_FLUSH=hang-forced  only a forced flush (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) blocks;
//   FAKE_CUPTI_FLUSH=slow:<ms>    every flush takes <ms> milliseconds, then does its work.
//   FAKE_CUPTI_SUBSCRIBE_DELAY_MS=<ms>  cuptiSubscribe takes that long (as inside cuInit).
//   FAKE_CUPTI_CALL_LOG=<path>    appends the name of each CUPTI call, one per line, in the order
//                                 the calls began (all threads), so a test can check the order.
//   FAKE_CUPTI_FIRST_CORRELATION_ID=<n>  the first correlation id handed out (default 1), as in a
//                                 process that has made n - 1 calls: ids are 32 bits
//                                 (cupti_callbacks.h, CUpti_CallbackData: "uint32_t
//                                 correlationId;"; cupti_activity.h, CUpti_ActivityKernel10 the
//                                 same) and wrap from 4294967295 to 0. Whether CUPTI skips 0 when
//                                 it wraps the docs do not say; here it does not.
//
// Kernel activity per launch, and the calls that switch it (the sampled timing policy):
//   A launch is timed (gets a kernel record) only when CONCURRENT_KERNEL (or KERNEL) is enabled
//   while the launch call runs: between its API entry and exit callbacks (cupti_activity.h,
//   cuptiActivityEnable: "Enable collection of a specific kind of activity record",
//   cuptiActivityDisable: "Disable collection"; a kernel launched while its kind is disabled is
//   not collected). Every launch fires both callbacks, as CUPTI does for an enabled callback id
//   (cupti_callbacks.h, CUpti_ApiCallbackSite: CUPTI_API_ENTER and CUPTI_API_EXIT), with one
//   correlationData word shared by the two ("data shared between the entry and exit callbacks").
//   FAKE_CUPTI_ACTIVITY_LOG=<path>  appends one line per enable or disable of a kernel kind
//                                 (either family): "enable|disable app=<0|1> callback=<0|1>
//                                 overlap=<0|1>": app 1 when the calling thread is one that fired
//                                 launches (an application thread), callback 1 when made from
//                                 inside a callback, overlap 1 when another enable or disable was
//                                 in progress (cupti_callbacks.h: "a subscriber must serialize
//                                 access to" its enable calls).
//   With FAKE_CUPTI_VERSION below 130001, cuptiActivityDisable of CONCURRENT_KERNEL (either
//   family) blocks forever: the CUPTI release notes, "Updates in CUDA 13.0 Update 1": "Fixed a
//   potential deadlock that could occur while disabling the activity kind
//   CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL using the API cuptiActivityDisable" (cupti_version.h:
//   "v130001 : CUDA Toolkit 13.0 Update 1"); here the potential deadlock always happens.
//
// The two activity API families (CUPTI docs, "Multiple Subscribers"): the unversioned (global)
// calls and the subscriber-scoped _v2 calls of CUPTI 13.2+. "V1 to V2 API Migration": the
// families "are incompatible; they cannot be used together. When both V1 and V2 APIs are present
// in the same process, CUPTI returns the error CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED".
// Here: once cuptiSubscribe_v2 allowed multiple subscribers or a _v2 activity call succeeded, every
// unversioned activity call fails so; once an unversioned one succeeded, every _v2 one does.
// The _v2 buffer callbacks get a request / complete info (never read by the library) and no
// context or stream.
//   FAKE_CUPTI_MODE=taken         cuptiSubscribe and cuptiSubscribe_v2 fail as when another tool
//                                 holds CUPTI (cuptiSubscribe_v2 names it: "Nsight Systems").
//   FAKE_CUPTI_MULTI_SUBSCRIBER=refuse|not-supported  cuptiSubscribe_v2 asking for multiple
//                                 subscribers fails with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_
//                                 SUPPORTED or CUPTI_ERROR_NOT_SUPPORTED (CUpti_SubscriberParams,
//                                 allowMultipleSubscribers: "cuptiSubscribe_v2 will return
//                                 CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" when they cannot
//                                 be allowed). With FAKE_CUPTI_VERSION 130300 or later and
//                                 FAKE_CUDA_DRIVER_VERSION (as the fake driver reports it,
//                                 default 13000) below 13030 it fails so too: the CUPTI docs,
//                                 "Legacy Initialization (CUDA 13.2 and earlier)": "with drivers
//                                 older than r610, CUPTI limits activity tracing to a single
//                                 subscriber".
//   Each forced flush (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) logs "cuptiActivityFlushAll(forced)"
//   after its "cuptiActivityFlushAll" in FAKE_CUPTI_CALL_LOG.
//   FAKE_CUPTI_ACTIVITY=held      cuptiActivityEnable and cuptiActivityEnable_v2 fail with
//                                 CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, as when another
//                                 tool holds activity tracing.
// One subscriber at a time (CUDA before 13.3): cupti_callbacks.h, cuptiSubscribe:
// "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED if there is already a CUPTI subscriber";
// cuptiUnsubscribe: "Removes a callback subscriber so that no future callbacks will be issued to
// that subscriber" (its enabled callbacks go with it: the next subscriber enables its own), and
// CUPTI_ERROR_INVALID_PARAMETER "if subscriber is NULL or not initialized". So a second
// cuptiSubscribe (or cuptiSubscribe_v2 without multiple subscribers) while one is subscribed fails
// so, and succeeds again once it unsubscribed: another CUPTI client in the process (a test
// program subscribing itself, as torch.profiler's Kineto does) takes turns with the library.
//   fake_cupti_hold(1)            another tool holds CUPTI (as under FAKE_CUPTI_MODE=taken, but
//                                 switchable while the process runs): every subscription fails
//                                 with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED until
//                                 fake_cupti_hold(0).
//   fake_cupti_subscribed()       1 while a subscriber is subscribed.
//   fake_cupti_refused_subscribes()  subscriptions refused so far for another subscriber.
//   fake_cupti_app_thread_subscribe_calls()  cuptiSubscribe(_v2) and cuptiUnsubscribe calls made
//                                 on a thread that fired launches (an application thread).
#include <cupti.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {
// The one subscriber (see "One subscriber at a time" at the top). Atomic: a subscriber may go
// (cuptiUnsubscribe, on its own thread) while the application fires callbacks; each callback
// reads it once.
std::atomic<CUpti_CallbackFunc> g_callback{nullptr};
std::atomic<void*> g_userdata{nullptr};
std::atomic<bool> g_enabled[1024] = {};
std::atomic<bool> g_held{false};            // fake_cupti_hold
std::atomic<int> g_refused_subscribes{0};   // subscriptions refused for another subscriber
std::atomic<int> g_app_thread_subscribe_calls{0};
CUpti_BuffersCallbackRequestFunc g_buffer_requested = nullptr;
CUpti_BuffersCallbackCompleteFunc g_buffer_completed = nullptr;
// The _v2 callbacks (cupti_activity.h of CUDA 13.2+, CUpti_BuffersCallbackRequestFunc_v2 and
// CUpti_BuffersCallbackCompleteFunc_v2; their info structs' first member is structSize).
using RequestedV2 = void (*)(uint8_t**, size_t*, size_t*, void*);
using CompletedV2 = void (*)(uint8_t*, size_t, size_t, void*);
RequestedV2 g_buffer_requested_v2 = nullptr;
CompletedV2 g_buffer_completed_v2 = nullptr;
struct BufferInfo {
  size_t structSize = sizeof(BufferInfo);
  uint64_t threadId = 0;
};
// Which family the process uses: 0 none yet, 1 unversioned, 2 subscriber-scoped (_v2).
std::atomic<int> g_family{0};
// Kernel records are written only once a client enabled the kind (cupti_activity.h,
// cuptiActivityEnable: "Enable collection of a specific kind of activity record").
std::atomic<bool> g_kernels_enabled{false};
std::atomic<bool> g_sync_enabled{false};
std::atomic<bool> g_all_sync_records{true};  // cuptiActivityEnableAllSyncRecords; CUPTI's default
thread_local bool t_app_thread = false;     // this thread fired launches
thread_local int t_in_callback = 0;         // inside the subscriber's callback
std::atomic<int> g_switching{0};            // enables or disables of a kernel kind in progress
uint32_t ReportedVersion();
// The size of each record slot in the fake's activity buffers: the kernel record layout of the
// reported API version (cupti_api.h, KernelRecordVersion, from the CUPTI release notes), or
// FAKE_CUPTI_KERNEL_RECORD_BYTES=<n> (n >= 216, a multiple of 8: ACTIVITY_RECORD_ALIGNMENT). A
// kernel record is CUpti_ActivityKernel10's 216 bytes, then the members the API reference
// (structCUpti__ActivityKernel11/12/13.html) lists after isDeviceLaunched: Kernel11 int32_t
// priority, Kernel12 uint32_t executionModel, Kernel13 uint32_t sourceGraphId and padding6 and
// uint64_t sourceGraphNodeId. Placed after Kernel10's padding3[7], the one placement that keeps
// sourceGraphNodeId 8-byte aligned (CUpti_Activity: every member "naturally aligned"): 224 bytes
// for Kernel11 and 12, 240 for Kernel13 (sizes to confirm on a GPU: docs/gpu-verification.md).
// They hold values no field of Kernel10 has here, so a reader that stepped by Kernel10's size
// would read them as the next record's kind and times. Other records (synchronization) sit in a
// slot of the same size: only cuptiActivityGetNextRecord walks the buffer, by the slot size.
size_t RecordBytes() {
  if (const char* text = std::getenv("FAKE_CUPTI_KERNEL_RECORD_BYTES"); text != nullptr) {
    const size_t bytes = std::strtoul(text, nullptr, 10);
    if (bytes >= sizeof(CUpti_ActivityKernel10) && bytes % 8 == 0) return bytes;
  }
  const uint32_t version = ReportedVersion();
  if (version >= 130400) return 240;
  if (version >= 130100) return 224;
  return sizeof(CUpti_ActivityKernel10);
}
// Writes a kernel record into a slot: Kernel10's fields, then the newer layouts' tail.
void WriteKernelSlot(uint8_t* slot, const CUpti_ActivityKernel10& record) {
  const size_t bytes = RecordBytes();
  std::memset(slot, 0, bytes);
  std::memcpy(slot, &record, sizeof(record));
  if (bytes >= 224) {
    const int32_t priority = -5;           // a stream priority, cuStreamCreateWithPriority
    const uint32_t execution_model = 1;
    std::memcpy(slot + 216, &priority, sizeof(priority));
    std::memcpy(slot + 220, &execution_model, sizeof(execution_model));
  }
  if (bytes >= 240) {
    const uint32_t source_graph_id = 0xC0FFEE;
    const uint64_t source_graph_node_id = 0xFEEDFACEull;
    std::memcpy(slot + 224, &source_graph_id, sizeof(source_graph_id));
    std::memcpy(slot + 232, &source_graph_node_id, sizeof(source_graph_node_id));
  }
}
void LogSwitch(bool on, bool overlap) {
  const char* path = std::getenv("FAKE_CUPTI_ACTIVITY_LOG");
  if (path == nullptr) return;
  const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[96];
  const int n = std::snprintf(line, sizeof(line), "%s app=%d callback=%d overlap=%d\n",
                              on ? "enable" : "disable", t_app_thread ? 1 : 0,
                              t_in_callback > 0 ? 1 : 0, overlap ? 1 : 0);
  (void)!write(fd, line, static_cast<size_t>(n));
  close(fd);
}
void SleepMs(long ms);
void SetKind(CUpti_ActivityKind kind, bool on) {
  if (kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
    g_sync_enabled.store(on);
  } else if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL) {
    const bool overlap = g_switching.fetch_add(1) != 0;
    LogSwitch(on, overlap);
    if (!on && kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && ReportedVersion() < 130001) {
      for (;;) SleepMs(3600 * 1000);  // the deadlock fixed in 13.0 Update 1 (see above)
    }
    SleepMs(1);  // long enough for an overlapping call to be seen
    g_kernels_enabled.store(on);
    g_switching.fetch_sub(1);
  }
}
bool UseFamily(int family) {
  int none = 0;
  return g_family.compare_exchange_strong(none, family) || none == family;
}

// Correlation ids of launches waiting for the forced flush: launching threads add, flushing
// threads take, under g_timed_mutex (with g_first_timed_ms set before the first is added).
std::mutex g_timed_mutex;
struct Timed {
  uint32_t correlation_id;
  uint32_t grid;
};
std::vector<Timed> g_timed;
std::atomic<size_t> g_dropped{0};
std::atomic<bool> g_flush_hanging{false};
std::atomic<uint32_t> g_next_correlation_id{0};
std::atomic<bool> g_correlation_seeded{false};

// The next correlation id of the process (FAKE_CUPTI_FIRST_CORRELATION_ID first), wrapping on
// 32 bits.
uint32_t NextCorrelationId() {
  if (!g_correlation_seeded.exchange(true)) {
    if (const char* first = std::getenv("FAKE_CUPTI_FIRST_CORRELATION_ID"); first != nullptr) {
      g_next_correlation_id.store(static_cast<uint32_t>(std::strtoul(first, nullptr, 0)) - 1u);
    }
  }
  return g_next_correlation_id.fetch_add(1) + 1u;
}

void SleepMs(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

// One line per call, written with one write() on an O_APPEND file: lines of calls on different
// threads never mix.
void LogCall(const char* name) {
  const char* path = std::getenv("FAKE_CUPTI_CALL_LOG");
  if (path == nullptr) return;
  const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[128];
  const int n = std::snprintf(line, sizeof(line), "%s\n", name);
  (void)!write(fd, line, static_cast<size_t>(n));
  close(fd);
}

struct TimingMode {
  bool on = false;
  int incomplete = 0;
  int dropped = 0;
  int refused = 0;
  long running_ms = 0;
};

TimingMode ReadTimingMode() {
  TimingMode mode;
  const char* text = std::getenv("FAKE_CUPTI_TIMING");
  if (text == nullptr) return mode;
  mode.on = std::sscanf(text, "%d,%d,%d,%ld", &mode.incomplete, &mode.dropped, &mode.refused,
                        &mode.running_ms) >= 3;
  return mode;
}

long NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}
std::atomic<long> g_first_timed_ms{0};  // when the first timed launch was made (running mode)
bool g_synchronized = false;            // the context-synchronize record was handed over

std::atomic<bool> g_zeroed_out{false};  // CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER
// A buffer the client handed over while it promised zeroed ones: says so if it is not all zero.
void CheckZeroed(const uint8_t* buffer, size_t size) {
  if (!g_zeroed_out.load() || buffer == nullptr) return;
  for (size_t i = 0; i < size; ++i) {
    if (buffer[i] != 0) {
      static const char kLine[] = "fake CUPTI: activity buffer not zero\n";
      (void)!write(STDERR_FILENO, kLine, sizeof(kLine) - 1);
      return;
    }
  }
}

// The buffer callbacks of the family in use.
BufferInfo g_info;
bool RequestBuffer(uint8_t** buffer, size_t* size) {
  size_t max_records = 0;
  *buffer = nullptr;
  *size = 0;
  if (g_family.load() == 2) {
    if (g_buffer_requested_v2 == nullptr) return false;
    g_buffer_requested_v2(buffer, size, &max_records, &g_info);
  } else {
    if (g_buffer_requested == nullptr) return false;
    g_buffer_requested(buffer, size, &max_records);
  }
  CheckZeroed(*buffer, *size);
  return *buffer != nullptr;
}
void CompleteBuffer(uint8_t* buffer, size_t size, size_t valid) {
  if (g_family.load() == 2) {
    g_buffer_completed_v2(buffer, size, valid, &g_info);
  } else {
    g_buffer_completed(nullptr, 0, buffer, size, valid);
  }
}

// The polling threads' buffers (FAKE_CUPTI_POLLERS): one per thread while it has records.
struct PollerBuffer {
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t valid = 0;
};
std::mutex g_poller_mutex;
std::vector<PollerBuffer> g_poller_buffers;  // indexed by poller
std::atomic<int> g_pollers_running{0};

// Hands over every polling thread's buffer (their records are complete).
void CompletePollerBuffers() {
  std::lock_guard<std::mutex> lock(g_poller_mutex);
  for (PollerBuffer& b : g_poller_buffers) {
    if (b.buffer == nullptr) continue;
    CompleteBuffer(b.buffer, b.size, b.valid);
    b = PollerBuffer{};
  }
}

// One cuStreamQuery of poller `index` on work not completed.
void Query(size_t index) {
  if (!g_sync_enabled.load() || !g_all_sync_records.load()) return;  // no record
  std::lock_guard<std::mutex> lock(g_poller_mutex);
  PollerBuffer& b = g_poller_buffers[index];
  if (b.buffer == nullptr && !RequestBuffer(&b.buffer, &b.size)) {
    b = PollerBuffer{};
    g_dropped.fetch_add(1);
    return;
  }
  if (b.valid + RecordBytes() > b.size) return;  // full: not in these tests
  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN;
  sync.correlationId = NextCorrelationId();
  sync.contextId = 1;
  sync.streamId = 9;
  sync.start = 1000ull * sync.correlationId;
  sync.end = sync.start + 100;
  sync.returnValue = CUDA_ERROR_NOT_READY;
  // In a slot of a kernel record's size: NextRecord walks the buffer by that size.
  std::memset(b.buffer + b.valid, 0, RecordBytes());
  std::memcpy(b.buffer + b.valid, &sync, sizeof(sync));
  b.valid += RecordBytes();
}

void StartPollers() {
  const char* text = std::getenv("FAKE_CUPTI_POLLERS");
  int threads = 0;
  int polls = 0;
  if (text == nullptr || std::sscanf(text, "%d,%d", &threads, &polls) != 2 || threads <= 0) return;
  {
    std::lock_guard<std::mutex> lock(g_poller_mutex);
    g_poller_buffers.assign(static_cast<size_t>(threads), PollerBuffer{});
  }
  for (int t = 0; t < threads; ++t) {
    g_pollers_running.fetch_add(1);
    std::thread([t, polls] {
      const long until = NowMs() + 800;  // ends well before the process does
      for (int i = 0; i < polls && NowMs() < until; ++i) {
        SleepMs(1);
        Query(static_cast<size_t>(t));
      }
      g_pollers_running.fetch_sub(1);
    }).detach();
  }
}

void DeliverTiming(bool forced) {
  std::lock_guard<std::mutex> lock(g_timed_mutex);
  const TimingMode mode = ReadTimingMode();
  bool running = false;    // the kernels still run: their records go incomplete
  bool sync_now = false;   // the context-synchronize record goes with this flush
  if (mode.running_ms > 0) {
    const long first = g_first_timed_ms.load();
    running = first != 0 && NowMs() < first + mode.running_ms;
    if (running && !forced) return;
    sync_now = !running && first != 0 && !g_synchronized;
  } else if (!forced) {
    return;
  }
  const bool v2 = g_family.load() == 2;
  // (Only launches made while a kernel kind was enabled are in g_timed; their records are handed
  // over whatever the kind's state now.)
  if (!mode.on || (v2 ? g_buffer_requested_v2 == nullptr || g_buffer_completed_v2 == nullptr
                      : g_buffer_requested == nullptr || g_buffer_completed == nullptr)) {
    return;
  }
  BufferInfo info;
  const auto request = [&](uint8_t** buffer, size_t* size, size_t* max_records) {
    if (v2) {
      g_buffer_requested_v2(buffer, size, max_records, &info);
    } else {
      g_buffer_requested(buffer, size, max_records);
    }
    CheckZeroed(*buffer, *size);
  };
  struct Given {
    uint8_t* buffer;
    size_t size;
  };
  std::vector<Given> given;
  int refused = 0;
  for (int ask = 0; ask < 64 && refused < mode.refused; ++ask) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    request(&buffer, &size, &max_records);
    if (buffer == nullptr) {
      ++refused;
    } else {
      given.push_back({buffer, size});
    }
  }
  if (given.empty()) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    request(&buffer, &size, &max_records);
    if (buffer != nullptr) given.push_back({buffer, size});
  }
  g_dropped.fetch_add(static_cast<size_t>(mode.dropped));
  if (given.empty()) g_dropped.fetch_add(g_timed.size() + (sync_now ? 1 : 0));  // no buffer
  size_t valid = 0;
  if (!given.empty()) {
    const size_t n = g_timed.size();
    for (size_t i = 0; i < n && valid + RecordBytes() <= given[0].size; ++i) {
      CUpti_ActivityKernel10 record{};
      record.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      record.correlationId = g_timed[i].correlation_id;
      record.start = 1000ull * g_timed[i].correlation_id;
      const bool incomplete = running || i + static_cast<size_t>(mode.incomplete) >= n;
      record.end = incomplete ? 0 : record.start + 500;
      if (running) record.start = 0;
      record.deviceId = 0;
      record.contextId = 1;
      record.streamId = 7;
      record.blockX = 256;
      record.blockY = 1;
      record.blockZ = 1;
      record.gridX = g_timed[i].grid;
      record.gridY = 1;
      record.gridZ = 1;
      record.name = "_Z6vecaddPKfS0_Pfi";
      WriteKernelSlot(given[0].buffer + valid, record);
      valid += RecordBytes();
    }
    if (sync_now && g_sync_enabled.load() &&
        valid + RecordBytes() <= given[0].size) {
      // In a slot of a kernel record's size: NextRecord walks the buffer by that size.
      static_assert(sizeof(CUpti_ActivitySynchronization2) <= sizeof(CUpti_ActivityKernel10));
      CUpti_ActivitySynchronization2 sync{};
      sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
      sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
      sync.correlationId = NextCorrelationId();
      sync.contextId = 1;
      sync.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
      sync.start = 1000ull * sync.correlationId;
      sync.end = sync.start + 500;
      std::memset(given[0].buffer + valid, 0, RecordBytes());
      std::memcpy(given[0].buffer + valid, &sync, sizeof(sync));
      valid += RecordBytes();
    }
  }
  if (sync_now) g_synchronized = true;  // the call returned; recorded or not
  g_timed.clear();
  for (size_t i = 0; i < given.size(); ++i) {
    if (v2) {
      g_buffer_completed_v2(given[i].buffer, given[i].size, i == 0 ? valid : 0, &info);
    } else {
      g_buffer_completed(nullptr, 0, given[i].buffer, given[i].size, i == 0 ? valid : 0);
    }
  }
}
}  // namespace

namespace {
uint32_t ReportedVersion();
}  // namespace
EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                  void* userdata) {
  LogCall("cuptiSubscribe");
  if (const char* delay = std::getenv("FAKE_CUPTI_SUBSCRIBE_DELAY_MS"); delay != nullptr) {
    SleepMs(std::strtol(delay, nullptr, 10));
  }
  if (t_app_thread) g_app_thread_subscribe_calls.fetch_add(1);
  const char* mode = std::getenv("FAKE_CUPTI_MODE");
  if ((mode != nullptr && std::strcmp(mode, "taken") == 0) || g_held.load() ||
      g_callback.load() != nullptr) {
    g_refused_subscribes.fetch_add(1);
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  g_userdata = userdata;
  g_callback = callback;
  g_userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(0x1);
  return CUPTI_SUCCESS;
}
// CUpti_SubscriberParams of CUPTI 13.2+ (cupti_callbacks.h): the 13.0 struct plus
// allowMultipleSubscribers; a caller's structSize says which members it has.
struct SubscriberParams {
  size_t structSize;
  const char* subscriberName;
  char* oldSubscriberName;
  size_t oldSubscriberSize;
  uint8_t allowMultipleSubscribers;
};
EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                     CUpti_CallbackFunc callback, void* userdata,
                                     CUpti_SubscriberParams* declared) {
  LogCall("cuptiSubscribe_v2");
  auto* params = reinterpret_cast<SubscriberParams*>(declared);
  if (t_app_thread) g_app_thread_subscribe_calls.fetch_add(1);
  const char* mode = std::getenv("FAKE_CUPTI_MODE");
  if ((mode != nullptr && std::strcmp(mode, "taken") == 0) || g_held.load() ||
      g_callback.load() != nullptr) {
    g_refused_subscribes.fetch_add(1);
    if (params != nullptr && params->oldSubscriberName != nullptr &&
        params->oldSubscriberSize > std::strlen("Nsight Systems")) {
      std::strcpy(params->oldSubscriberName, "Nsight Systems");
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  const bool multiple = params != nullptr &&
                        params->structSize > offsetof(SubscriberParams, allowMultipleSubscribers) &&
                        params->allowMultipleSubscribers != 0;
  if (multiple) {
    if (const char* refuse = std::getenv("FAKE_CUPTI_MULTI_SUBSCRIBER"); refuse != nullptr) {
      if (std::strcmp(refuse, "refuse") == 0) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
      if (std::strcmp(refuse, "not-supported") == 0) return CUPTI_ERROR_NOT_SUPPORTED;
    }
    const char* driver = std::getenv("FAKE_CUDA_DRIVER_VERSION");
    const long driver_version = driver != nullptr ? std::strtol(driver, nullptr, 10) : 13000;
    if (ReportedVersion() >= 130300 && driver_version < 13030) {
      return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    if (!UseFamily(2)) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  g_userdata = userdata;
  g_callback = callback;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(0x1);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  LogCall("cuptiUnsubscribe");
  if (t_app_thread) g_app_thread_subscribe_calls.fetch_add(1);
  if (subscriber == nullptr || g_callback.load() == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  g_callback = nullptr;
  for (auto& enabled : g_enabled) enabled = false;
  return CUPTI_SUCCESS;
}
EXPORT void fake_cupti_hold(int held) { g_held = held != 0; }
EXPORT int fake_cupti_subscribed() { return g_callback.load() != nullptr ? 1 : 0; }
EXPORT int fake_cupti_refused_subscribes() { return g_refused_subscribes.load(); }
EXPORT int fake_cupti_app_thread_subscribe_calls() { return g_app_thread_subscribe_calls.load(); }
// The driver domain's callback ids are 1 .. CUPTI_DRIVER_TRACE_CBID_SIZE - 1 (cupti_driver_cbid.h:
// 0 is CUPTI_DRIVER_TRACE_CBID_INVALID). cuptiEnableCallback: "Enable or disabled callbacks for a
// subscriber for a specific domain and callback ID", CUPTI_ERROR_INVALID_PARAMETER "if ... cbid is
// invalid"; cuptiEnableDomain: "Enable or disabled all callbacks for a specific domain". Their
// effect is kept per id (fake_cupti_enabled reads it back).
EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  LogCall("cuptiEnableCallback");
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return CUPTI_SUCCESS;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_INVALID || cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  g_enabled[cbid] = enable != 0;
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle,
                                     CUpti_CallbackDomain domain) {
  LogCall("cuptiEnableDomain");
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    for (uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
      g_enabled[cbid] = enable != 0;
    }
  }
  return CUPTI_SUCCESS;
}
// 1 when the driver callback `cbid` is enabled (by cuptiEnableCallback or cuptiEnableDomain).
EXPORT int fake_cupti_enabled(int cbid) {
  return cbid > 0 && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && g_enabled[cbid] ? 1 : 0;
}
EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain, uint32_t, const char** name) {
  *name = "cuFakeCall";
  return CUPTI_SUCCESS;
}
// FAKE_CUPTI_VERSION=<n> reports another API version (cupti_version.h: 28 is CUDA 12.9 Update 1,
// 130000 CUDA 13.0).
namespace {
uint32_t ReportedVersion() {
  const char* text = std::getenv("FAKE_CUPTI_VERSION");
  return text != nullptr ? static_cast<uint32_t>(std::strtoul(text, nullptr, 10)) : 130001;
}
}  // namespace
EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  LogCall("cuptiGetVersion");
  *version = ReportedVersion();
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiGetResultString(CUptiResult, const char** str) {
  *str = "fake CUPTI error";
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiGetDeviceId(CUcontext, uint32_t* id) { *id = 0; return CUPTI_SUCCESS; }
// cupti_activity.h: a process-unique context id, and a stream id unique within its context. One
// context here; a stream's id is derived from its handle, the NULL stream's is 7.
EXPORT CUptiResult cuptiGetContextId(CUcontext, uint32_t* id) { *id = 1; return CUPTI_SUCCESS; }
EXPORT CUptiResult cuptiGetStreamIdEx(CUcontext, CUstream stream, uint8_t, uint32_t* id) {
  *id = stream == nullptr ? 7u : static_cast<uint32_t>(reinterpret_cast<uintptr_t>(stream) >> 3);
  return CUPTI_SUCCESS;
}
bool ActivityHeld() {
  const char* held = std::getenv("FAKE_CUPTI_ACTIVITY");
  return held != nullptr && std::strcmp(held, "held") == 0;
}
EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  LogCall("cuptiActivityEnable");
  if (!UseFamily(1) || ActivityHeld()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  SetKind(kind, true);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityEnable_v2(CUpti_SubscriberHandle, CUpti_ActivityKind kind, void*) {
  LogCall("cuptiActivityEnable_v2");
  if (!UseFamily(2) || ActivityHeld()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  SetKind(kind, true);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityDisable_v2(CUpti_SubscriberHandle, CUpti_ActivityKind kind, void*) {
  LogCall("cuptiActivityDisable_v2");
  if (!UseFamily(2)) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  SetKind(kind, false);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size,
                                             void* value) {
  LogCall("cuptiActivitySetAttribute");
  if (size == nullptr || value == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (attr == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER) {
    if (*size < sizeof(uint8_t)) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    g_zeroed_out.store(*static_cast<uint8_t*>(value) != 0);
  }
  return CUPTI_SUCCESS;
}
// cupti_activity.h (CUDA 13.0): cuptiActivityEnableAllSyncRecords(uint8_t enable).
EXPORT CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t enable) {
  LogCall("cuptiActivityEnableAllSyncRecords");
  g_all_sync_records.store(enable != 0);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityRegisterCallbacks_v2(CUpti_SubscriberHandle, RequestedV2 requested,
                                                     CompletedV2 completed) {
  LogCall("cuptiActivityRegisterCallbacks_v2");
  if (!UseFamily(2)) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_buffer_requested_v2 = requested;
  g_buffer_completed_v2 = completed;
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  LogCall("cuptiActivityDisable");
  SetKind(kind, false);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                  CUpti_BuffersCallbackCompleteFunc completed) {
  LogCall("cuptiActivityRegisterCallbacks");
  if (!UseFamily(1)) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_buffer_requested = requested;
  g_buffer_completed = completed;
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  LogCall("cuptiActivityFlushAll");
  const bool forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
  if (forced) LogCall("cuptiActivityFlushAll(forced)");
  if (const char* mode = std::getenv("FAKE_CUPTI_FLUSH"); mode != nullptr) {
    const std::string_view m(mode);
    if (m == "hang" || (m == "hang-forced" && forced)) {
      g_flush_hanging.store(true);
      for (;;) SleepMs(3600 * 1000);
    }
    if (m.substr(0, 5) == "slow:") SleepMs(std::strtol(mode + 5, nullptr, 10));
  }
  DeliverTiming(forced);
  CompletePollerBuffers();
  return CUPTI_SUCCESS;
}
// The records of a buffer as DeliverTiming writes them: kernel records back to back.
CUptiResult NextRecord(uint8_t* buffer, size_t valid_size, CUpti_Activity** record) {
  size_t at = 0;
  if (*record != nullptr) {
    at = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer) +
         RecordBytes();
  }
  if (at + RecordBytes() > valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + at);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid_size,
                                              CUpti_Activity** record) {
  if (g_family.load() == 2) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  return NextRecord(buffer, valid_size, record);
}
EXPORT CUptiResult cuptiActivityGetNextRecord_v2(CUpti_SubscriberHandle, uint8_t* buffer,
                                                 size_t valid_size, CUpti_Activity** record) {
  if (g_family.load() != 2) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  return NextRecord(buffer, valid_size, record);
}
EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  LogCall("cuptiActivityGetNumDroppedRecords");
  if (g_family.load() == 2) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *dropped = g_dropped.exchange(0);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityGetNumDroppedRecords_v2(CUpti_SubscriberHandle, CUcontext, uint32_t,
                                                        size_t* dropped) {
  LogCall("cuptiActivityGetNumDroppedRecords_v2");
  if (g_family.load() != 2) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *dropped = g_dropped.exchange(0);
  return CUPTI_SUCCESS;
}

// Fires `count` cuLaunchKernel entry and exit callbacks (block 256, dynamic smem 0, grid `grid`)
// as the driver would for a successful runtime launch, with correlation ids 1, 2, ... over the
// process. Returns how many reached an enabled callback.
EXPORT int fake_cupti_launch_shape(int count, unsigned grid, unsigned block, unsigned dyn_smem);
EXPORT int fake_cupti_launch_grid(int count, unsigned grid) {
  return fake_cupti_launch_shape(count, grid, 256, 0);
}
EXPORT int fake_cupti_launch(int count) { return fake_cupti_launch_grid(count, 132); }
// The same with block (`block`, 1, 1) and `dyn_smem` bytes of dynamic shared memory (cuda.h,
// cuLaunchKernel_params: blockDimX, sharedMemBytes): each (block, dyn_smem) a launch
// configuration of its own of the one function.
EXPORT int fake_cupti_launch_shape(int count, unsigned grid, unsigned block, unsigned dyn_smem) {
  if (g_callback == nullptr || !g_enabled[CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel]) return 0;
  cuLaunchKernel_params params{};
  params.f = reinterpret_cast<CUfunction>(0xF00D);
  params.gridDimX = grid;
  params.gridDimY = 1;
  params.gridDimZ = 1;
  params.blockDimX = block;
  params.blockDimY = 1;
  params.blockDimZ = 1;
  params.sharedMemBytes = dyn_smem;
  CUresult result = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.functionName = "cuLaunchKernel";
  data.functionParams = &params;
  data.functionReturnValue = &result;
  data.symbolName = "_Z6vecaddPKfS0_Pfi";
  data.context = reinterpret_cast<CUcontext>(0xC0);
  uint64_t shared = 0;  // correlationData: the entry's word, for the exit
  data.correlationData = &shared;
  const bool timing_mode = ReadTimingMode().on;
  t_app_thread = true;
  static std::once_flag pollers;
  std::call_once(pollers, StartPollers);
  if (const char* flush = std::getenv("FAKE_CUPTI_FLUSH");
      flush != nullptr && std::string_view(flush) == "hang") {
    for (int waited = 0; !g_flush_hanging.load() && waited < 2000; ++waited) SleepMs(1);
  }
  for (int i = 0; i < count; ++i) {
    // One id per launch, never repeated in the process: cupti_callbacks.h, correlationId: "this
    // ID will equal the correlation ID in the CUpti_ActivityAPI record corresponding to the CUDA
    // driver function call"; cupti_activity.h, CUpti_ActivityKernel10.correlationId: "Each kernel
    // execution is assigned a unique correlation ID". Numbered 1, 2, ... over every call
    // (FAKE_CUPTI_FIRST_CORRELATION_ID on), wrapping at 2^32.
    data.correlationId = NextCorrelationId();
    shared = 0;
    ++t_in_callback;
    data.callbackSite = CUPTI_API_ENTER;
    // The subscriber at this callback (it may unsubscribe between two: no more callbacks then).
    CUpti_CallbackFunc callback = g_callback.load();
    void* userdata = g_userdata.load();
    if (callback != nullptr && g_enabled[CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel]) {
      callback(userdata, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
               &data);
    }
    --t_in_callback;
    // The launch itself: collected only while a kernel kind is enabled (see the top).
    if (timing_mode && g_kernels_enabled.load()) {
      std::lock_guard<std::mutex> lock(g_timed_mutex);
      long none = 0;
      g_first_timed_ms.compare_exchange_strong(none, NowMs());
      g_timed.push_back({data.correlationId, grid});
    }
    ++t_in_callback;
    data.callbackSite = CUPTI_API_EXIT;
    callback = g_callback.load();
    userdata = g_userdata.load();
    if (callback != nullptr && g_enabled[CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel]) {
      callback(userdata, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
               &data);
    }
    --t_in_callback;
  }
  return count;
}

// `rounds` times: the exit callback of a cuCtxDestroy_v2 of the launches' context, then one
// launch in it, as a program that makes and destroys a context in a loop does (the driver API
// reference gives both calls callbacks: cupti_driver_cbid.h, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2;
// cuda.h: cuCtxDestroy_v2_params {CUcontext ctx}). Each round makes the injector forget what it
// knew of the context and its functions and learn it again: its slow paths, under its locks.
// Returns the rounds fired.
EXPORT int fake_cupti_churn(int rounds) {
  if (g_callback == nullptr || !g_enabled[CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2]) return 0;
  for (int i = 0; i < rounds; ++i) {
    cuCtxDestroy_v2_params params{};
    params.ctx = reinterpret_cast<CUcontext>(0xC0);
    CUresult result = CUDA_SUCCESS;
    CUpti_CallbackData data{};
    data.callbackSite = CUPTI_API_EXIT;
    data.functionName = "cuCtxDestroy_v2";
    data.functionParams = &params;
    data.functionReturnValue = &result;
    data.context = reinterpret_cast<CUcontext>(0xC0);
    g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2,
               &data);
    fake_cupti_launch(1);
  }
  return rounds;
}

// A driver call `cbid` without parameters that returned `code`, on the context the launches use:
// its enter and exit callbacks ("The callback is at the entry of the API call" / "at the exit":
// cupti_callbacks.h, CUpti_ApiCallbackSite) when the call's callback is enabled. Returns 1 when it
// was called back, 0 when not.
EXPORT int fake_cupti_call(int cbid, int code) {
  if (g_callback == nullptr || fake_cupti_enabled(cbid) == 0) return 0;
  auto result = static_cast<CUresult>(code);
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_ENTER;
  data.functionName = "cuFakeCall";
  data.context = reinterpret_cast<CUcontext>(0xC0);
  data.correlationId = NextCorrelationId();
  const auto id = static_cast<CUpti_CallbackId>(cbid);
  g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, id, &data);
  data.callbackSite = CUPTI_API_EXIT;
  data.functionReturnValue = &result;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, id, &data);
  return 1;
}

// A cuStreamSynchronize of the launches' stream (the NULL stream) that waits `ms` milliseconds,
// as a program waiting for a kernel that does not end: its enter callback, then after `ms` its
// exit callback, on the calling thread, with one correlation id (cupti_callbacks.h,
// CUpti_CallbackData: callbackSite CUPTI_API_ENTER / CUPTI_API_EXIT; functionParams a
// cuStreamSynchronize_params {CUstream hStream}). Returns 1 when the callback was enabled.
EXPORT int fake_cupti_synchronize(int ms) {
  if (g_callback == nullptr || !g_enabled[CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize]) return 0;
  cuStreamSynchronize_params params{};
  CUresult result = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.functionName = "cuStreamSynchronize";
  data.functionParams = &params;
  data.functionReturnValue = &result;
  data.context = reinterpret_cast<CUcontext>(0xC0);
  data.correlationId = NextCorrelationId();
  data.callbackSite = CUPTI_API_ENTER;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
             &data);
  SleepMs(ms);
  data.callbackSite = CUPTI_API_EXIT;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
             &data);
  return 1;
}

// Fires the exit callback of a cuCtxSynchronize that returned `code`, on the context the
// launches use, as the driver does when a kernel faulted. Returns 1 when a callback was enabled.
EXPORT int fake_cupti_fail(int code) {
  if (g_callback == nullptr || !g_enabled[CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize]) return 0;
  auto result = static_cast<CUresult>(code);
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_EXIT;
  data.functionName = "cuCtxSynchronize";
  data.functionReturnValue = &result;
  data.context = reinterpret_cast<CUcontext>(0xC0);
  data.correlationId = 100000;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
             &data);
  return 1;
}
