// Where a launch runs, as the recorder resolves it from the launch's context and stream: the
// context's device, the stream's own context and that context's device, the stream's CUPTI ids
// and the SM count of the context the launch may use. Four shared lookups (DeviceTable,
// StreamTable, StreamIds, ContextSms), each a hash and a few atomic loads, that give the same
// answer for every launch on one stream until a stream or context goes away.
//
// Design:
//  1. One place per thread, the last one resolved, in ThisThread (own_calls.h: the one
//     thread_local a launch's callback touches, so keeping it costs no __tls_get_addr). A thread
//     launching on the stream of its previous launch, as a training loop or an inference server's
//     worker does, compares five words and reads nothing shared but the recorder's generation.
//  2. Valid while the recorder and its generation are those it was resolved under. The recorder
//     (Recorder::place_generation_) bumps its generation after it forgets a stream
//     (cuStreamDestroy), a context (teardown, primary context reset or release) or everything
//     (after the library was off CUPTI), once its tables have forgotten: a launch after that
//     reads the new generation and resolves again from the tables, so a stream handle the driver
//     reuses for a stream of another context never gives the old context's device, ids or SM
//     count. A launch racing with the destruction of its own stream is the application's
//     undefined behaviour (cuda.h, cuStreamDestroy), as it is for the tables themselves.
//  3. Filled by reading the generation first, then the tables: a forget that lands between the
//     two leaves a place tagged with the old generation, which the next launch does not use.
//  4. Only a complete answer is kept (the device known and, on a non-NULL stream, its context
//     known; the launch's context named, not NULL): what the tables would ask the driver again
//     is asked again.
//  5. Beside the place, the slot of the thread's last launched function: a hint that spares the
//     function table's hash and probe, checked after pinning as any slot is (function_table.h).
//  6. The recorder is named by an id never reused in the process (Recorder::instance_id_), not
//     by its address: a recorder made after another one died (a fork child's, a test's) at the
//     same address never takes the dead one's place. 0: no place.
#ifndef CUFLIGHT_LIBINJECT_SRC_LAUNCH_PLACE_H_
#define CUFLIGHT_LIBINJECT_SRC_LAUNCH_PLACE_H_

#include <cstdint>

namespace cuflight::inject {

struct LaunchPlace {
  // The key: whose, under which generation, and the launch's context, stream and entry point.
  uint64_t recorder = 0;  // Recorder::instance_id_; 0: empty
  uint64_t generation = 0;
  uint64_t context = 0;   // the launch's CUcontext (the calling thread's current one)
  uint64_t stream = 0;    // the launch's CUstream handle
  bool per_thread_default_stream = false;  // a _ptsz entry point
  // The answer.
  int32_t device = -1;         // the ordinal of `context` (Recorder::ResolveDevice)
  uint64_t stream_context = 0; // the stream's context (Recorder::StreamContext); 0: NULL stream
  int32_t stream_device = -1;  // the ordinal of stream_context, or `device` when it is 0 or `context`
  // The stream's CUPTI ids (StreamIds::Lookup) as asked with ids_context: the stream's context,
  // or `context` on the NULL stream.
  uint64_t ids_context = 0;
  uint32_t context_id = 0xffffffffu;
  uint32_t stream_id = 0xffffffffu;
  int32_t sm_count = 0;  // ContextSms::Of(ids_context, stream): 0 when the driver cannot say

  // The slot of the thread's last launched function in the recorder's FunctionTable, the hint
  // FunctionTable::Acquire pins and checks first (a FunctionTable::Slot*, which cannot be named
  // here). Apart from the place's key: a thread launching one function on several streams keeps
  // it. Valid while function_recorder is the recorder's id (the table lives as long as it).
  uint64_t function_recorder = 0;
  void* function_slot = nullptr;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_LAUNCH_PLACE_H_
