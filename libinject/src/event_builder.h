// Sender-thread side of a launch: LaunchRecord (or a CUPTI kernel activity record of a graph
// node) + FunctionInfo + DeviceInfo -> the kernel event, with occupancy from the engine through
// the occupancy cache. A launch's event is blackbox::KernelEventBuilder's, the code the collector
// uses for the launches it recovers from a dead process's black box. Runs on the sender thread
// only; allocation-free.
#ifndef CUFLIGHT_LIBINJECT_SRC_EVENT_BUILDER_H_
#define CUFLIGHT_LIBINJECT_SRC_EVENT_BUILDER_H_

#include <cupti.h>

#include <atomic>
#include <cstdint>

#include "cuflight/blackbox/kernel_event.h"
#include "cuflight/occupancy/engine.h"
#include "cuflight/schema/events.h"
#include "device_table.h"
#include "function_table.h"
#include "launch_record.h"

namespace cuflight::inject {

// The CUPTI kernel activity record this build reads (CUPTI 13).
using KernelActivity = CUpti_ActivityKernel10;

class EventBuilder {
 public:
  explicit EventBuilder(size_t cache_capacity = 4096) : kernel_(cache_capacity) {}

  // Fills *out (whose header the caller sets) for a recorded launch. The string views point into
  // the FunctionInfo. Returns false when occupancy cannot be computed (the device or function
  // lacks the facts; the recorder does not record such launches). *wave (when not null): the
  // wave its waves were counted in (blackbox::KernelEventBuilder::Build).
  bool BuildKernel(const LaunchRecord& record, const DeviceInfo& device, schema::KernelEvent* out,
                   schema::WaveShape* wave = nullptr) noexcept;

  // Fills *out for a kernel that ran as a node of a graph, from its activity record. `name` and
  // `demangled` are views the caller keeps alive while the event is encoded. *wave as
  // BuildKernel's.
  bool BuildGraphKernel(const KernelActivity& activity, const DeviceInfo& device,
                        std::string_view name, std::string_view demangled,
                        schema::KernelEvent* out, schema::WaveShape* wave = nullptr) noexcept;

  // The kernel_time event of any kernel activity record.
  static void BuildKernelTime(const KernelActivity& activity, schema::KernelTimeEvent* out) noexcept;

  // What the kernel event needs of `f` (the views point into it).
  static blackbox::FunctionFacts FactsOf(const FunctionInfo& f) noexcept;

  uint64_t cache_hits() const { return kernel_.cache_hits(); }
  uint64_t cache_misses() const { return kernel_.cache_misses(); }
  // Kernel events built whose driver block count differed from the engine's.
  // Any thread (the sender's stats are read elsewhere too).
  uint64_t disagreements() const { return kernel_.disagreements(); }

 private:
  blackbox::KernelEventBuilder kernel_;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_EVENT_BUILDER_H_
