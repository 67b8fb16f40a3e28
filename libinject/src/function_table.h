// What the library knows about each launched function, per device: read from the driver at its
// first launch there, shared lock-free by every later launch, and freed once the code it describes
// is gone and nothing can still see it.
//
// Design:
//  1. Keys. An entry is keyed by (handle, device ordinal). A CUfunction lives in one context, so
//     it has one entry. A CUkernel (context-independent loading, how the runtime launches) has one
//     entry per device it runs on: each device has its own compiled code (registers, shared
//     memory) and its own cuKernelSetAttribute values (cuda.h, cuKernelSetAttribute: "for the
//     requested device dev").
//  2. Open addressing over a fixed array, allocated once. Lookups are lock-free (an acquire load
//     of the key, then the device). Claims, publications, attribute sets, removals and reclamation
//     take the table's mutex: they are the slow path (a first launch, a setting call, an unload).
//     Claims check for the key under the mutex, so a key is never in two slots. A removed
//     entry's slot is marked retiring (lookups probe past it, claims skip it) and, once freed (5),
//     becomes a tombstone that the next claim along its probe sequence reuses. A slot never
//     becomes empty again, so a lookup stops at the first empty slot, and the table never grows.
//  3. The published FunctionInfo is a word (pointer | kStale) stored with release and read with
//     acquire. A FunctionInfo never changes. A setting call that changes an attribute the
//     FunctionInfo holds marks it stale: the next launch reads the driver again and publishes a
//     replacement, and the stale one is retired (5). The two attributes programs set between
//     launches (dynamic shared memory limit, carveout) are kept in the slot as they are set
//     instead (no re-read, nothing allocated, however often a library sets them).
//  4. Ownership. Each entry remembers what frees its function: its module, its library (a
//     CUkernel, or the CUfunction of one) and the context of the launch that read it. Remove()
//     drops the entries of an unloaded module or library or of a destroyed context, and only
//     those; the slot becomes reusable later (5), so a handle the driver reuses gets a fresh entry.
//     A list of live entries makes removal cost the live entries, not the capacity.
//  5. Reclamation. A launch pins the slot it uses (Acquire: `launches` is incremented, then the key
//     is checked again and the FunctionInfo loaded, all seq_cst) and unpins it when the callback
//     is done (`finished`, release). A retired FunctionInfo, or a removed entry's slot, is freed
//     only when
//       (a) the slot was seen with no launch in flight after the retirement: every callback that
//           could have loaded the old FunctionInfo is done, and its record, if any, is in the
//           ring; and then
//       (b) the consumer of the ring has handled every record claimed before (a): the ring's
//           claim position read after (a) is at or below its pop position.
//     Reclaim() runs on the ring's consumer (the sender thread) between records. Nothing on the
//     sender side keys a cache by a FunctionInfo's address: FunctionInfo::id is never reused.
//     A slot of a function several threads launch without pause may wait a while for (a); it is
//     freed at the first moment none of them is inside the callback.
//  6. Counters. `launches` and `filtered` stay in the slot across owners; the totals sum all
//     slots. A launch's ordinal among its function's launches (for sampling) counts from the
//     entry's claim.
#ifndef CUFLIGHT_LIBINJECT_SRC_FUNCTION_TABLE_H_
#define CUFLIGHT_LIBINJECT_SRC_FUNCTION_TABLE_H_

#include <cuda.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuflight/blackbox/launch_record.h"
#include "launch_ring.h"
#include "mix64.h"

namespace cuflight::inject {

// A process-wide counter from 1: a FunctionInfo's id. Thread-safe, lock-free.
uint64_t NextFunctionInfoId() noexcept;

struct FunctionInfo {
  // Unique in the process and never reused (an address can be, once the FunctionInfo is freed):
  // what caches key a function by.
  uint64_t id = NextFunctionInfoId();
  uint64_t handle = 0;  // as passed to the launch (CUfunction, or a CUkernel)
  int32_t device = -1;  // the device ordinal the attributes describe
  bool is_kernel = false;  // `handle` is a CUkernel
  // False when the driver refused an attribute: no occupancy can be computed for the function.
  bool attributes_ok = false;
  int32_t num_regs = 0;                // CU_FUNC_ATTRIBUTE_NUM_REGS
  int64_t static_smem = 0;             // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
  int64_t local_bytes = 0;             // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
  int64_t const_bytes = 0;             // CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES
  int32_t max_threads_per_block = 0;   // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
  int64_t max_dyn_smem = -1;           // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int32_t carveout = -1;               // CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
  // The CUfunction a CUkernel resolved to (cuKernelGetFunction, in the launch's context when it
  // was current at the read); 0 when `handle` is a CUfunction itself or it was not resolved.
  uint64_t resolved_function = 0;
  uint32_t required_cluster[3] = {0, 0, 0};  // CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_* (__cluster_dims__)
  bool non_portable_cluster_allowed = false; // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
  bool accepted = true;                // passes CUFLIGHT_INCLUDE / CUFLIGHT_EXCLUDE
  // What frees the function (design point 4); 0: unknown.
  uint64_t context = 0;  // the launch's context at the read
  uint64_t module = 0;   // cuFuncGetModule (of resolved_function for a CUkernel)
  uint64_t library = 0;  // cuKernelGetLibrary, for a CUkernel
  std::string name;                    // mangled
  std::string demangled;               // "" when the name is not a C++ mangled name
  // The driver's resident blocks for the configuration this function was last launched with
  // (not a cluster launch), so that a launch repeating it looks nothing up: see
  // Recorder::DriverBlocks. 0: none yet. Written and read by launching threads, relaxed: the word
  // is self-contained.
  mutable std::atomic<uint64_t> last_driver_answer{0};
  // The function's descriptor in the black box (its launch records carry it, for a collector
  // that recovers them); blackbox::kNoFunctionDescriptor: none.
  uint32_t desc_index = blackbox::kNoFunctionDescriptor;
};

class FunctionTable {
 public:
  static constexpr int32_t kNotSet = INT32_MIN;
  static constexpr int kMaxProbe = 64;

  // Which handle a setting call named.
  enum class SetBy {
    kHandle,  // the entry's own handle (cuFuncSetAttribute on a CUfunction, cuKernelSetAttribute)
    // cuFuncSetAttribute on the CUfunction a CUkernel entry resolved to: "attributes set using
    // cuFuncSetAttribute() will override the attribute set by this API irrespective of whether
    // the call to cuFuncSetAttribute() is made before or after this API call" (cuda.h,
    // cuKernelSetAttribute).
    kResolvedFunction,
  };

  // What frees a function (design point 4).
  enum class Owner { kModule, kLibrary, kContext };

  // Two cache lines: what every launch reads and writes, then what setting calls and removals use.
  struct alignas(64) Slot {
    std::atomic<uint64_t> key{0};    // handle, or kEmpty / kTombstone / kRetiring
    std::atomic<int32_t> device{-1};
    std::atomic<uint32_t> set_generation{0};  // bumped by every setting call (under the mutex)
    std::atomic<uintptr_t> info{0};  // const FunctionInfo* | kStale; 0: not read yet
    std::atomic<uint64_t> launches{0};  // pins taken (every launch counted here), all owners
    std::atomic<uint64_t> finished{0};  // pins released
    std::atomic<uint64_t> filtered{0};  // launches not recorded: name filter or sampling
    std::atomic<uint64_t> base{0};      // `launches` when the entry was claimed
    // MAX_DYNAMIC_SHARED_SIZE_BYTES and PREFERRED_SHARED_MEMORY_CARVEOUT as the setting calls
    // left them (the override if any, else the latest set since the read); kNotSet: the
    // FunctionInfo's value holds.
    std::atomic<int32_t> set_max_dyn_smem{kNotSet};
    std::atomic<int32_t> set_carveout{kNotSet};

    // Set by cuFuncSetBlockShape / cuFuncSetSharedSize, read by the legacy cuLaunch* calls.
    std::atomic<uint32_t> legacy_block[3] = {1, 1, 1};
    std::atomic<uint32_t> legacy_smem{0};
    // For the CUfunction a CUkernel resolved to: that CUkernel's handle, whose entry on the same
    // device holds the FunctionInfo (a setting call through either handle concerns it).
    std::atomic<uint64_t> alias{0};

   private:
    friend class FunctionTable;
    // Under the table's mutex.
    int32_t since_read[2] = {kNotSet, kNotSet};  // set through the handle after the last read
    int32_t overridden[2] = {kNotSet, kNotSet};  // SetBy::kResolvedFunction
    uint64_t owner[3] = {0, 0, 0};               // by Owner
  };
  static_assert(sizeof(Slot) == 128);

  // A launch's hold on a slot (design point 5): while it lives, the FunctionInfo it loaded stays
  // allocated and the slot keeps its owner. Movable; unpins when destroyed.
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& other) noexcept
        : slot_(std::exchange(other.slot_, nullptr)), ordinal_(other.ordinal_), word_(other.word_) {}
    Pin& operator=(Pin&& other) noexcept {
      if (this != &other) {
        Release();
        slot_ = std::exchange(other.slot_, nullptr);
        ordinal_ = other.ordinal_;
        word_ = other.word_;
      }
      return *this;
    }
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin() { Release(); }

    Slot* slot() const { return slot_; }
    // This launch's number among the launches of the entry's function, from 0.
    uint64_t ordinal() const { return ordinal_; }
    // The published FunctionInfo; nullptr when none was read yet or it is stale.
    const FunctionInfo* info() const {
      return (word_ & kStale) != 0 ? nullptr : reinterpret_cast<const FunctionInfo*>(word_);
    }
    // The published FunctionInfo, stale or not.
    const FunctionInfo* any_info() const {
      return reinterpret_cast<const FunctionInfo*>(word_ & ~kStale);
    }
    // Gives the pin up as if the launch had never counted here (it goes to another entry).
    void Drop() noexcept {
      if (slot_ != nullptr) slot_->launches.fetch_sub(1, std::memory_order_release);
      slot_ = nullptr;
    }

   private:
    friend class FunctionTable;
    Pin(Slot* slot, uint64_t ordinal, uintptr_t word)
        : slot_(slot), ordinal_(ordinal), word_(word) {}
    void Release() noexcept {
      if (slot_ != nullptr) slot_->finished.fetch_add(1, std::memory_order_release);
      slot_ = nullptr;
    }

    Slot* slot_ = nullptr;
    uint64_t ordinal_ = 0;
    uintptr_t word_ = 0;
  };

  // Room for `capacity` entries (rounded up to a power of two, at least 64).
  explicit FunctionTable(size_t capacity);
  ~FunctionTable();
  FunctionTable(const FunctionTable&) = delete;
  FunctionTable& operator=(const FunctionTable&) = delete;

  // The slot of (handle, device), or nullptr. Lock-free, allocation-free; the slot may be removed
  // concurrently: read a FunctionInfo only through Acquire().
  Slot* Find(uint64_t handle, int32_t device) noexcept;
  // The pinned slot of (handle, device); an empty Pin when there is none. Lock-free,
  // allocation-free (the launch hot path). `hint`, when not null, is a slot of this table that
  // held the entry before (the calling thread's last launch: launch_place.h): it is pinned and
  // checked first, as a slot found by hashing is, and looked up only when it holds another entry.
  Pin Acquire(uint64_t handle, int32_t device, Slot* hint = nullptr) noexcept;

  // The slot of (handle, device), claiming one on first sight for a function of `context`;
  // nullptr when the table is full (kMaxProbe slots tried) or `handle` is 0. Takes the mutex;
  // allocation-free.
  Slot* FindOrClaim(uint64_t handle, int32_t device, uint64_t context) noexcept;

  // Publishes `info` (read by the caller after it saw the slot's set_generation equal
  // `generation`) and returns the FunctionInfo now published: `info`, or the one another thread
  // published first. A stale FunctionInfo it replaces is retired. Settings made through the handle
  // before `generation` are in `info` and are forgotten; later ones and overrides are kept.
  // Takes the mutex; the table owns `info` from here on.
  const FunctionInfo* Publish(Slot* slot, std::unique_ptr<FunctionInfo> info, uint32_t generation);
  // Makes `alias` (the CUfunction `kernel_info` resolved to) lead to the entry of the CUkernel:
  // claims the CUfunction's slot on kernel_info's device, owned as kernel_info is.
  void Alias(uint64_t alias, const FunctionInfo& kernel_info) noexcept;

  // A successful cuFuncSetAttribute / cuKernelSetAttribute of `attribute` to `value`, concerning
  // the entry of (handle, device) through `by`. The dynamic shared memory limit and the carveout
  // are kept in the slot; another attribute the FunctionInfo holds with another value marks it
  // stale. Returns the entry's alias (the CUkernel a CUfunction resolved from), 0 when none or
  // when there is no such entry. Takes the mutex.
  uint64_t AttributeSet(uint64_t handle, int32_t device, SetBy by, CUfunction_attribute attribute,
                        int value) noexcept;
  // The next launch of every function reads the driver again. Lock-free.
  void InvalidateAll() noexcept;
  // fork() around the table (pthread_atfork): BeforeFork takes the mutex in the forking thread,
  // so that no other thread is half-way through a change when the child's copy is made;
  // AfterForkInParent releases it. AfterForkInChild makes the mutex anew (held or not: only the
  // forking thread exists in the child), forgets the pins of the parent's threads, makes the
  // slots of removed entries reusable, and every function is read again there.
  void BeforeFork() noexcept { mu_.lock(); }
  void AfterForkInParent() noexcept { mu_.unlock(); }
  void AfterForkInChild() noexcept;

  // Removes every entry `owner` `value` frees (for a library, also the entries of the modules
  // its entries were found in); returns how many. Takes the mutex.
  size_t Remove(Owner owner, uint64_t value) noexcept;
  // Removes every entry of `device` (a context of it went away and which one is not known).
  size_t RemoveDevice(int32_t device) noexcept;

  // Frees what was retired and can no longer be seen (design point 5). On the consumer of
  // `ring`, between records (it must hold no record popped before); takes the mutex. Entries
  // retired with another ring's positions (a fork child's new ring) are freed.
  void Reclaim(const LaunchRing& ring) noexcept;

  uint64_t TotalLaunches() const noexcept;
  uint64_t TotalFiltered() const noexcept;
  size_t capacity() const { return mask_ + 1; }
  size_t live_entries() const noexcept;
  // FunctionInfos allocated and not yet freed (published or retired).
  size_t live_infos() const noexcept { return live_infos_.load(std::memory_order_relaxed); }
  // Retired FunctionInfos and slots not yet freed.
  size_t retired() const noexcept { return retired_count_.load(std::memory_order_relaxed); }

 private:
  static constexpr uintptr_t kStale = 1;
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kTombstone = ~uint64_t{0};        // reusable; probing goes on
  static constexpr uint64_t kRetiring = ~uint64_t{0} - 1;     // removed, not yet reusable

  struct Retired {
    FunctionInfo* info = nullptr;  // owned; nullptr: a slot without one
    Slot* slot = nullptr;
    bool frees_slot = false;
    bool quiescent = false;  // (a) seen; `epoch` and `ring` hold
    uint64_t epoch = 0;
    const LaunchRing* ring = nullptr;
  };

  static uint64_t Hash(uint64_t handle, int32_t device) noexcept;
  // Pins `slot` for (handle, device); an empty Pin when it holds another entry.
  static Pin TryPin(Slot* slot, uint64_t handle, int32_t device) noexcept;
  void RemoveLocked(size_t live_index);
  void RetireLocked(FunctionInfo* info, Slot* slot, bool frees_slot);
  void FreeLocked(Retired& retired) noexcept;
  static void RecomputeSet(Slot* slot) noexcept;

  std::unique_ptr<Slot[]> slots_;
  size_t mask_ = 0;
  mutable std::mutex mu_;
  std::vector<Slot*> live_;        // claimed slots, not removed (under mu_)
  std::vector<Retired> retired_;   // under mu_
  std::atomic<size_t> retired_count_{0};
  std::atomic<size_t> live_infos_{0};
};

// The lookups of every launch, inline.

inline FunctionTable::Slot* FunctionTable::Find(uint64_t handle, int32_t device) noexcept {
  if (handle == kEmpty || handle >= kRetiring) return nullptr;
  size_t index = Hash(handle, device) & mask_;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) & mask_) {
    Slot& slot = slots_[index];
    const uint64_t key = slot.key.load(std::memory_order_acquire);
    if (key == kEmpty) return nullptr;
    if (key == handle && slot.device.load(std::memory_order_relaxed) == device) return &slot;
  }
  return nullptr;
}

inline FunctionTable::Pin FunctionTable::TryPin(Slot* slot, uint64_t handle,
                                                int32_t device) noexcept {
  // Pin first, then check that the slot is still this entry's (design point 5): a remover
  // that changed the key afterwards sees the pin in `launches`.
  const uint64_t ticket = slot->launches.fetch_add(1, std::memory_order_seq_cst);
  if (slot->key.load(std::memory_order_seq_cst) == handle &&
      slot->device.load(std::memory_order_relaxed) == device) {
    return Pin(slot, ticket - slot->base.load(std::memory_order_relaxed),
               slot->info.load(std::memory_order_seq_cst));
  }
  slot->launches.fetch_sub(1, std::memory_order_release);  // another entry's, or removed
  return Pin();
}

inline FunctionTable::Pin FunctionTable::Acquire(uint64_t handle, int32_t device,
                                                 Slot* hint) noexcept {
  // A hint spares the hash and the probe. It is pinned and checked as a slot found by hashing
  // is: a slot is never freed while the table lives (design point 2), so a stale hint is only
  // the slot of another entry or of a removed one, and the pin is given back.
  if (hint != nullptr && handle != kEmpty && handle < kRetiring) {
    if (Pin pin = TryPin(hint, handle, device); pin.slot() != nullptr) return pin;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second: removed meanwhile, look again
    Slot* slot = Find(handle, device);
    if (slot == nullptr) return Pin();
    if (Pin pin = TryPin(slot, handle, device); pin.slot() != nullptr) return pin;
  }
  return Pin();
}

inline uint64_t FunctionTable::Hash(uint64_t handle, int32_t device) noexcept {
  return Mix64(handle ^ (static_cast<uint64_t>(static_cast<uint32_t>(device) + 1) << 56));
}

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_FUNCTION_TABLE_H_
