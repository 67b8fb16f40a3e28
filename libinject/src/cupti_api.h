// The CUPTI entry points the injected library calls, as a table of function pointers: the seam
// between the library and CUPTI. In a process, LoadCuptiApi() opens libcupti with dlopen (the
// injected library has no link-time dependency on it, so the user need not set
// LD_LIBRARY_PATH); tests fill the table with fakes.
#ifndef CUFLIGHT_LIBINJECT_SRC_CUPTI_API_H_
#define CUFLIGHT_LIBINJECT_SRC_CUPTI_API_H_

#include <cupti.h>

#include <cstddef>
#include <string>
#include <vector>

namespace cuflight::inject {

// The subscriber-scoped ("_v2") buffer callbacks of CUPTI 13.2+ (cupti_activity.h,
// CUpti_BuffersCallbackRequestFunc_v2 / CUpti_BuffersCallbackCompleteFunc_v2). The 13.0 headers
// this library builds against lack them: the last parameter is a CUpti_BufferCallbackRequestInfo*
// / CUpti_BufferCallbackCompleteInfo*, which the library never reads (it uses predefined records,
// not user-defined ones), so it is a void* here. The completion callback names no context or
// stream: the dropped-record count is the subscriber's.
using BuffersRequestedV2 = void(CUPTIAPI*)(uint8_t** buffer, size_t* size, size_t* max_records,
                                           void* request_info);
using BuffersCompletedV2 = void(CUPTIAPI*)(uint8_t* buffer, size_t size, size_t valid_size,
                                           void* complete_info);

struct CuptiApi {
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  // Optional (CUPTI 12.6+): names the subscriber and reports the holder of a refused one.
  CUptiResult (*SubscribeV2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                             CUpti_SubscriberParams*) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*EnableCallback)(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                CUpti_CallbackId) = nullptr;
  CUptiResult (*GetVersion)(uint32_t* version) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult (*GetDeviceId)(CUcontext, uint32_t*) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t flag) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t* buffer, size_t valid_size,
                                       CUpti_Activity** record) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t stream_id,
                                              size_t* dropped) = nullptr;
  CUptiResult (*Finalize)() = nullptr;  // optional
  // Optional: every callback of a domain (api_error events need every driver call's exit).
  CUptiResult (*EnableDomain)(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain) =
      nullptr;
  // Optional: the API name of a callback id.
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t cbid, const char** name) = nullptr;
  // Optional: the ids CUPTI's activity records use for a context and a stream
  // (CUpti_ActivityKernel10.contextId / streamId), so launch-callback events name the same ones.
  CUptiResult (*GetContextId)(CUcontext, uint32_t* id) = nullptr;
  CUptiResult (*GetStreamIdEx)(CUcontext, CUstream, uint8_t per_thread_stream,
                               uint32_t* id) = nullptr;
  // Optional (in the CUDA 13.0 headers, cupti_activity.h): with 0, stream and event queries whose
  // work has not completed make no CUPTI_ACTIVITY_KIND_SYNCHRONIZATION record ("By default, the
  // record is generated for all CUDA events and stream irrespective of whether the operations
  // have been completed").
  CUptiResult (*ActivityEnableAllSyncRecords)(uint8_t enable) = nullptr;
  // Optional: an activity attribute (cupti_activity.h, CUpti_ActivityAttribute).
  CUptiResult (*ActivitySetAttribute)(CUpti_ActivityAttribute, size_t* value_size,
                                      void* value) = nullptr;
  // Optional (cupti_activity.h): CUPTI's id of an executable graph, for the stall event of a hang
  // inside a graph launch.
  CUptiResult (*GetGraphExecId)(CUgraphExec, uint32_t* id) = nullptr;

  // Optional: the subscriber-scoped activity API (CUPTI docs, "Multiple Subscribers": every
  // subscriber must use it for several CUPTI tools to trace one process; CUDA 13.3+, driver
  // r610+). Resolved at run time. The activity configuration is a CUpti_ActivityConfig*; the
  // library passes NULL (predefined records).
  CUptiResult (*ActivityRegisterCallbacksV2)(CUpti_SubscriberHandle, BuffersRequestedV2,
                                             BuffersCompletedV2) = nullptr;
  CUptiResult (*ActivityEnableV2)(CUpti_SubscriberHandle, CUpti_ActivityKind,
                                  void* config) = nullptr;
  CUptiResult (*ActivityDisableV2)(CUpti_SubscriberHandle, CUpti_ActivityKind,
                                   void* config) = nullptr;
  CUptiResult (*ActivityGetNextRecordV2)(CUpti_SubscriberHandle, uint8_t* buffer,
                                         size_t valid_size, CUpti_Activity** record) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecordsV2)(CUpti_SubscriberHandle, CUcontext,
                                                uint32_t stream_id, size_t* dropped) = nullptr;

  // Set once timing uses the subscriber-scoped activity API (before its buffer callbacks are
  // registered): the buffer walk and the dropped-record count then go through the _v2 calls of
  // this subscriber. The two families cannot be mixed in one process ("V1 to V2 API Migration":
  // CUPTI then returns CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).
  CUpti_SubscriberHandle activity_subscriber = nullptr;

  // The next record of an activity buffer, through the family in use.
  CUptiResult NextRecord(uint8_t* buffer, size_t valid_size, CUpti_Activity** record) const {
    return activity_subscriber != nullptr
               ? ActivityGetNextRecordV2(activity_subscriber, buffer, valid_size, record)
               : ActivityGetNextRecord(buffer, valid_size, record);
  }
  // Enables or disables collecting an activity kind, through the family in use;
  // CUPTI_ERROR_NOT_SUPPORTED when that family's call was not resolved.
  CUptiResult SetActivityKind(CUpti_ActivityKind kind, bool enable) const {
    if (activity_subscriber != nullptr) {
      const auto call = enable ? ActivityEnableV2 : ActivityDisableV2;
      return call != nullptr ? call(activity_subscriber, kind, nullptr) : CUPTI_ERROR_NOT_SUPPORTED;
    }
    const auto call = enable ? ActivityEnable : ActivityDisable;
    return call != nullptr ? call(kind) : CUPTI_ERROR_NOT_SUPPORTED;
  }
  // CUPTI's dropped-record count (reset on every read), through the family in use.
  CUptiResult DroppedRecords(CUcontext context, uint32_t stream_id, size_t* dropped) const {
    return activity_subscriber != nullptr
               ? ActivityGetNumDroppedRecordsV2(activity_subscriber, context, stream_id, dropped)
               : ActivityGetNumDroppedRecords(context, stream_id, dropped);
  }
};

// The first CUPTI with multi-subscriber activity tracing (CUPTI docs, "Recommended
// Initialization Workflow (CUDA 13.3+)"; 13.2's subscriber-scoped activity API was a preview).
inline constexpr uint32_t kCuptiVersionMultiSubscriber = 130300;

// The first driver with multi-subscriber activity tracing, as cuDriverGetVersion reports it. The
// CUPTI docs, "Legacy Initialization (CUDA 13.2 and earlier)": "For applications running on CUDA
// 13.2 or older, or with drivers older than r610, CUPTI limits activity tracing to a single
// subscriber". cuDriverGetVersion gives the CUDA version a driver supports (1000 * major +
// 10 * minor, cuda.h), not its branch; r610 is the branch of CUDA 13.3 (the first release with
// multi-subscriber tracing, "Recommended Initialization Workflow (CUDA 13.3+)"), so a driver
// reporting 13.3 or later is r610 or later, and one reporting 13.2 or earlier is older.
inline constexpr int kDriverVersionMultiSubscriber = 13030;

// Whether timing uses the subscriber-scoped activity API: CUPTI 13.3 or later whose library has
// every _v2 entry point the library calls, on a driver that supports CUDA 13.3 or later
// (kDriverVersionMultiSubscriber; 0, unknown, is taken as older). Otherwise the unversioned
// (global) API throughout. A refused multi-subscriber cuptiSubscribe_v2 still falls back to the
// unversioned API (Injector::Subscribe): the driver check only avoids asking.
bool UsesSubscriberActivityApi(const CuptiApi& api, uint32_t cupti_version, int driver_version);

// What process_start's `cupti_activity_api` says of the family in use (schema/v1).
inline constexpr const char* kActivityApiSubscriber = "subscriber";  // the _v2 calls
inline constexpr const char* kActivityApiGlobal = "global";          // the unversioned calls

// The oldest CUPTI whose activity record layout this build reads (CUpti_ActivityKernel10 of the
// CUDA 13.0 headers). cupti_version.h: from CUDA 13.0 the API version is xxyyzz (130000 for 13.0);
// CUDA 12.x reported 19..28.
inline constexpr uint32_t kCuptiApiVersionForActivityLayout = 130000;

// Kernel activity record layouts. A libcupti writes kernel records (CUPTI_ACTIVITY_KIND_KERNEL,
// _CONCURRENT_KERNEL) in the newest CUpti_ActivityKernelN it knows, whatever headers its client
// was built with, and the 13.0 headers have no call that reports a record's layout or size (no
// cuptiActivityGetStructSize; the record layouts of CUPTI 13.2's user-defined records are for
// records a client composes itself, through the _v2 API). So the layout follows from the CUPTI
// API version, by the CUPTI release notes ("Updates in CUDA 13.1": priority added,
// CUpti_ActivityKernel10 "replaced by the new CUpti_ActivityKernel11"; "Updates in CUDA 13.4":
// sourceGraphId and sourceGraphNodeId added, CUpti_ActivityKernel12 "replaced by
// CUpti_ActivityKernel13"; CUpti_ActivityKernel12, "adds execution model", is new in CUPTI
// Python 13.3.0 and absent from the C notes, so it is taken from 13.3):
//
//   API version         record             what it adds after isDeviceLaunched
//   130000 .. 130099    Kernel10 (216 B)   -
//   130100 .. 130299    Kernel11           int32_t priority
//   130300 .. 130399    Kernel12           + uint32_t executionModel
//   130400 .. 130499    Kernel13           + uint32_t sourceGraphId, padding6, uint64_t
//                                            sourceGraphNodeId
//
// The API reference (structCUpti__ActivityKernel11/12/13.html) lists Kernel11-13's members in
// Kernel10's order up to isDeviceLaunched, the new ones after it; with every member naturally
// aligned (CUpti_Activity: "all activity record types are padded and aligned to ensure that each
// member of the record is naturally aligned") each field before isDeviceLaunched is at the same
// offset in all four. Every field this library reads lies there (kKernelRecordBytesRead), so a
// Kernel11-13 record is read through the Kernel10 view; cuptiActivityGetNextRecord, not this
// library, steps from one record to the next. A CUPTI past 13.4 may have moved a field: its
// kernel records are not read (timing off, one line), rather than read at a guessed offset.
inline constexpr uint32_t kCuptiApiVersionNewestKnownLayout = 130499;

// The CUpti_ActivityKernelN a CUPTI of this API version writes (10..13), or 0 when this build
// does not know the layout (older than 13.0, or newer than 13.4).
int KernelRecordVersion(uint32_t cupti_api_version) noexcept;

// The bytes of a kernel record the library reads: everything before isDeviceLaunched, the
// common prefix of CUpti_ActivityKernel10..13 (its last field read is maxActiveClusters).
inline constexpr size_t kKernelRecordBytesRead = offsetof(CUpti_ActivityKernel10, isDeviceLaunched);
static_assert(kKernelRecordBytesRead == 208, "cupti_activity.h (CUDA 13.0), CUpti_ActivityKernel10");
static_assert(offsetof(CUpti_ActivityKernel10, maxActiveClusters) + sizeof(uint32_t) ==
              kKernelRecordBytesRead);

// What CuptiCandidates searches beyond the fixed places.
struct CuptiSearch {
  const char* env_path = nullptr;   // $CUFLIGHT_CUPTI_PATH
  const char* cuda_home = nullptr;  // $CUDA_HOME
  const char* cuda_path = nullptr;  // $CUDA_PATH
  // Paths of the shared objects already loaded in the process (dl_iterate_phdr order).
  std::vector<std::string> loaded_objects;
  // Python environments: $VIRTUAL_ENV and $CONDA_PREFIX.
  const char* virtual_env = nullptr;
  const char* conda_prefix = nullptr;
};

// Where LoadCuptiApi looks for libcupti, in order:
//  1. a libcupti the process has already loaded (a PyTorch wheel's, another tool's): a second
//     copy of CUPTI in one process is never loaded;
//  2. $CUFLIGHT_CUPTI_PATH (a file);
//  3. the dynamic linker's search (libcupti.so.13, libcupti.so);
//  4. pip wheels: for each `.../site-packages/` or `.../dist-packages/` directory holding a loaded
//     object (torch, a CUDA wheel), then $VIRTUAL_ENV/lib/python3*/site-packages: CUDA 13 wheels'
//     nvidia/cu13/lib/libcupti.so.13, then nvidia/cuda_cupti/lib/libcupti.so.13; conda:
//     $CONDA_PREFIX/lib/libcupti.so.13;
//  5. the toolkit's standard places under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda
//     (extras/CUPTI/lib64, lib64, lib, targets/x86_64-linux/lib), then /usr/lib/x86_64-linux-gnu.
// No duplicates; pure (the $VIRTUAL_ENV python3* directories are globbed).
std::vector<std::string> CuptiCandidates(const CuptiSearch& search);

// The paths of the shared objects loaded in this process.
std::vector<std::string> LoadedObjects();

// Opens the first candidate that loads and resolves the table. On failure returns false with
// *error naming what was tried. *loaded_from gets the path that worked.
bool LoadCuptiApi(CuptiApi* api, std::string* loaded_from, std::string* error);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CUPTI_API_H_
