// What the library knows about each launched function (CUfunction or CUkernel handle), read
// once from the driver on its first launch and shared, lock-free, by every later launch.
//
// Design:
//  1. Open addressing over a fixed array, allocated once. A slot is claimed for a handle by CAS
//     on its key (0 = empty) and never given back, so a handle keeps its slot and its counters
//     for the life of the process.
//  2. The slot's FunctionInfo is published with a release store and read with an acquire load;
//     once published a FunctionInfo never changes and is never freed before the table, so the
//     sender thread may hold pointers to it in ring records.
//  3. Attributes can change (cuFuncSetAttribute, cuKernelSetAttribute) and handles can be reused
//     after a module or library unload: Invalidate()/InvalidateAll() clear the published pointer
//     and the next launch reads the driver again. Only the first launch after that takes the
//     slow path. The two attributes programs set between launches (the dynamic shared memory
//     limit and the carveout) are kept in the slot as they are set instead, and other attribute
//     sets invalidate only when the value differs from the published one: a library that sets
//     attributes before every launch stays on the fast path and publishes nothing new.
//  4. Creating a FunctionInfo allocates (names, the owner list under a mutex): that is the slow
//     path, once per function. The hot path (Find on a published slot) is a few loads.
#ifndef CUFLIGHT_LIBINJECT_SRC_FUNCTION_TABLE_H_
#define CUFLIGHT_LIBINJECT_SRC_FUNCTION_TABLE_H_

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cuflight::inject {

struct FunctionInfo {
  uint64_t handle = 0;  // as passed to the launch (CUfunction, or a CUkernel)
  // False when the driver refused an attribute: no occupancy can be computed for the function.
  bool attributes_ok = false;
  int32_t num_regs = 0;                // CU_FUNC_ATTRIBUTE_NUM_REGS
  int64_t static_smem = 0;             // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
  int64_t local_bytes = 0;             // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
  int64_t const_bytes = 0;             // CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES
  int32_t max_threads_per_block = 0;   // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
  int64_t max_dyn_smem = -1;           // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int32_t carveout = -1;               // CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
  // The CUfunction `handle` resolved to when it is a CUkernel (cuKernelGetFunction in the
  // context of the first launch); 0 when `handle` is a CUfunction itself.
  uint64_t resolved_function = 0;
  uint32_t required_cluster[3] = {0, 0, 0};  // CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_* (__cluster_dims__)
  bool non_portable_cluster_allowed = false; // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
  bool accepted = true;                // passes CUFLIGHT_INCLUDE / CUFLIGHT_EXCLUDE
  std::string name;                    // mangled
  std::string demangled;               // "" when the name is not a C++ mangled name
  // The driver's resident blocks for the configuration this function was last launched with
  // (not a cluster launch), so that a launch repeating it looks nothing up: see
  // Recorder::DriverBlocks. 0: none yet. Written and read by launching threads, relaxed: the word
  // is self-contained.
  mutable std::atomic<uint64_t> last_driver_answer{0};
};

class FunctionTable {
 public:
  struct Slot {
    std::atomic<uint64_t> key{0};
    std::atomic<const FunctionInfo*> info{nullptr};
    std::atomic<uint64_t> launches{0};  // every launch seen, recorded or not
    std::atomic<uint64_t> filtered{0};  // launches not recorded: name filter or sampling
    // Set by cuFuncSetBlockShape / cuFuncSetSharedSize, read by the legacy cuLaunch* calls.
    std::atomic<uint32_t> legacy_block[3] = {1, 1, 1};
    std::atomic<uint32_t> legacy_smem{0};
    // For the CUfunction a CUkernel resolved to in some context: that CUkernel's handle, whose
    // slot holds the FunctionInfo (an attribute set through either handle concerns both).
    std::atomic<uint64_t> alias{0};
    // MAX_DYNAMIC_SHARED_SIZE_BYTES and PREFERRED_SHARED_MEMORY_CARVEOUT as last set through
    // cuFuncSetAttribute / cuKernelSetAttribute; kNotSet: the FunctionInfo's values hold. The
    // setting call gives the value, so no re-read (and no new FunctionInfo) is needed.
    std::atomic<int32_t> set_max_dyn_smem{kNotSet};
    std::atomic<int32_t> set_carveout{kNotSet};
  };
  static constexpr int32_t kNotSet = INT32_MIN;

  // Room for `capacity` functions (rounded up to a power of two, at least 64).
  explicit FunctionTable(size_t capacity);
  FunctionTable(const FunctionTable&) = delete;
  FunctionTable& operator=(const FunctionTable&) = delete;

  // The slot of `handle`, claiming a free one on first sight; nullptr when the table is full
  // (kMaxProbe slots tried). Lock-free, allocation-free.
  Slot* FindOrClaim(uint64_t handle) noexcept;
  // The slot of `handle`, or nullptr when it has none. Lock-free, allocation-free.
  Slot* Find(uint64_t handle) noexcept;

  // Publishes `info` for the slot and returns the FunctionInfo now published. The table owns
  // every FunctionInfo it is given, also one that lost a race with another thread.
  const FunctionInfo* Publish(Slot* slot, std::unique_ptr<FunctionInfo> info);

  // The next launch of `handle` (or of every function) re-reads the driver.
  void Invalidate(uint64_t handle) noexcept;
  void InvalidateAll() noexcept;

  uint64_t TotalLaunches() const noexcept;
  uint64_t TotalFiltered() const noexcept;
  size_t capacity() const { return mask_ + 1; }

  static constexpr int kMaxProbe = 64;

 private:
  static uint64_t Hash(uint64_t handle) noexcept;

  std::unique_ptr<Slot[]> slots_;
  size_t mask_ = 0;
  std::mutex owned_mu_;
  std::vector<std::unique_ptr<FunctionInfo>> owned_;
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_FUNCTION_TABLE_H_
