#include "function_table.h"

#include <algorithm>
#include <bit>
#include <new>


namespace cuflight::inject {
namespace {

std::atomic<uint64_t> g_next_function_info_id{1};

// Index into Slot::since_read / Slot::overridden.
constexpr int kMaxDynSmem = 0;
constexpr int kCarveout = 1;

int SettableIndex(CUfunction_attribute attribute) {
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: return kMaxDynSmem;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: return kCarveout;
    default: return -1;
  }
}

// True when `info` already holds `value` for `attribute`, or does not depend on the attribute:
// setting it changes nothing the FunctionInfo holds.
bool HoldsAttribute(const FunctionInfo& info, CUfunction_attribute attribute, int value) {
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
      return info.required_cluster[0] == static_cast<uint32_t>(value);
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
      return info.required_cluster[1] == static_cast<uint32_t>(value);
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      return info.required_cluster[2] == static_cast<uint32_t>(value);
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      return info.non_portable_cluster_allowed == (value != 0);
    default:
      return true;
  }
}

}  // namespace

uint64_t NextFunctionInfoId() noexcept {
  return g_next_function_info_id.fetch_add(1, std::memory_order_relaxed);
}

FunctionTable::FunctionTable(size_t capacity) {
  const size_t n = std::bit_ceil(capacity < 64 ? size_t{64} : capacity);
  slots_ = std::make_unique<Slot[]>(n);
  mask_ = n - 1;
  live_.reserve(n);  // claims never allocate
  retired_.reserve(256);
}

FunctionTable::~FunctionTable() {
  for (Slot* slot : live_) {
    delete reinterpret_cast<FunctionInfo*>(slot->info.load(std::memory_order_relaxed) & ~kStale);
  }
  for (Retired& r : retired_) delete r.info;
}

FunctionTable::Slot* FunctionTable::FindOrClaim(uint64_t handle, int32_t device,
                                                uint64_t context) noexcept {
  if (handle == kEmpty || handle >= kRetiring) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (Slot* slot = Find(handle, device); slot != nullptr) return slot;
  Slot* reuse = nullptr;
  size_t index = Hash(handle, device) & mask_;
  for (int probe = 0; probe < kMaxProbe; ++probe, index = (index + 1) & mask_) {
    const uint64_t key = slots_[index].key.load(std::memory_order_relaxed);
    if (key == kTombstone || key == kEmpty) {
      reuse = &slots_[index];
      break;
    }
  }
  if (reuse == nullptr || live_.size() == live_.capacity()) return nullptr;
  Slot& s = *reuse;
  // Nothing pins a free slot (design point 5), and lookups read these only after the key.
  s.device.store(device, std::memory_order_relaxed);
  s.info.store(0, std::memory_order_relaxed);
  s.base.store(s.launches.load(std::memory_order_relaxed), std::memory_order_relaxed);
  s.set_max_dyn_smem.store(kNotSet, std::memory_order_relaxed);
  s.set_carveout.store(kNotSet, std::memory_order_relaxed);
  for (auto& b : s.legacy_block) b.store(1, std::memory_order_relaxed);
  s.legacy_smem.store(0, std::memory_order_relaxed);
  s.alias.store(0, std::memory_order_relaxed);
  s.since_read[0] = s.since_read[1] = kNotSet;
  s.overridden[0] = s.overridden[1] = kNotSet;
  s.owner[static_cast<int>(Owner::kModule)] = 0;
  s.owner[static_cast<int>(Owner::kLibrary)] = 0;
  s.owner[static_cast<int>(Owner::kContext)] = context;
  live_.push_back(&s);  // within the reserved capacity: no allocation
  s.key.store(handle, std::memory_order_release);
  return &s;
}

const FunctionInfo* FunctionTable::Publish(Slot* slot, std::unique_ptr<FunctionInfo> info,
                                           uint32_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  const uintptr_t word = slot->info.load(std::memory_order_relaxed);
  if (word != 0 && (word & kStale) == 0) {
    return reinterpret_cast<const FunctionInfo*>(word);  // another thread read it first
  }
  if (slot->key.load(std::memory_order_relaxed) != info->handle ||
      slot->device.load(std::memory_order_relaxed) != info->device) {
    return nullptr;  // removed while the driver was read: the function is gone
  }
  if (slot->set_generation.load(std::memory_order_relaxed) == generation) {
    // Every set through the handle so far is in what the driver said.
    slot->since_read[0] = slot->since_read[1] = kNotSet;
    RecomputeSet(slot);
  }
  FunctionInfo* raw = info.release();
  live_infos_.fetch_add(1, std::memory_order_relaxed);
  // What the read found adds to what the entry knew (the library of a CUkernel's CUfunction
  // comes from the CUkernel: FunctionTable::Alias).
  for (const auto& [owner, value] : {std::pair{Owner::kModule, raw->module},
                                    std::pair{Owner::kLibrary, raw->library},
                                    std::pair{Owner::kContext, raw->context}}) {
    if (value != 0) slot->owner[static_cast<int>(owner)] = value;
  }
  slot->info.store(reinterpret_cast<uintptr_t>(raw), std::memory_order_seq_cst);
  if (word != 0) RetireLocked(reinterpret_cast<FunctionInfo*>(word & ~kStale), slot, false);
  return raw;
}

void FunctionTable::Alias(uint64_t alias, const FunctionInfo& kernel_info) noexcept {
  Slot* slot = FindOrClaim(alias, kernel_info.device, kernel_info.context);
  if (slot == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (slot->key.load(std::memory_order_relaxed) != alias) return;
  slot->alias.store(kernel_info.handle, std::memory_order_release);
  slot->owner[static_cast<int>(Owner::kModule)] = kernel_info.module;
  slot->owner[static_cast<int>(Owner::kLibrary)] = kernel_info.library;
  slot->owner[static_cast<int>(Owner::kContext)] = kernel_info.context;
}

void FunctionTable::RecomputeSet(Slot* slot) noexcept {
  for (int i : {kMaxDynSmem, kCarveout}) {
    const int32_t value =
        slot->overridden[i] != kNotSet ? slot->overridden[i] : slot->since_read[i];
    (i == kMaxDynSmem ? slot->set_max_dyn_smem : slot->set_carveout)
        .store(value, std::memory_order_relaxed);
  }
}

uint64_t FunctionTable::AttributeSet(uint64_t handle, int32_t device, SetBy by,
                                     CUfunction_attribute attribute, int value) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  Slot* slot = Find(handle, device);
  if (slot == nullptr) return 0;
  slot->set_generation.fetch_add(1, std::memory_order_relaxed);
  if (const int i = SettableIndex(attribute); i >= 0) {
    (by == SetBy::kHandle ? slot->since_read : slot->overridden)[i] = value;
    RecomputeSet(slot);
  } else {
    const uintptr_t word = slot->info.load(std::memory_order_relaxed);
    const auto* info = reinterpret_cast<const FunctionInfo*>(word & ~kStale);
    if (info != nullptr && !HoldsAttribute(*info, attribute, value)) {
      slot->info.store(word | kStale, std::memory_order_release);
    }
  }
  return slot->alias.load(std::memory_order_relaxed);
}

void FunctionTable::InvalidateAll() noexcept {
  for (size_t i = 0; i <= mask_; ++i) {
    Slot& slot = slots_[i];
    const uint64_t key = slot.key.load(std::memory_order_acquire);
    if (key == kEmpty || key >= kRetiring) continue;
    uintptr_t word = slot.info.load(std::memory_order_acquire);
    while (word != 0 && (word & kStale) == 0 &&
           !slot.info.compare_exchange_weak(word, word | kStale, std::memory_order_acq_rel)) {
    }
  }
}

void FunctionTable::AfterForkInChild() noexcept {
  new (&mu_) std::mutex();
  // No launch is in flight in the child: only the forking thread exists, and it is in fork(), not
  // in a callback. The pins the parent's threads held are never released here, so every slot
  // counts them finished; and the slots of removed entries are reusable at once (a parent that
  // removes entries faster than its sender thread reclaims them would otherwise leave the child
  // probe chains of kRetiring slots, and its first launches no slot). Their FunctionInfos are
  // freed by the child's first Reclaim: nothing in the child refers to them.
  for (size_t i = 0; i <= mask_; ++i) {
    slots_[i].finished.store(slots_[i].launches.load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
  }
  for (Retired& r : retired_) {
    if (r.frees_slot) r.slot->key.store(kTombstone, std::memory_order_relaxed);
    r.frees_slot = false;
    r.quiescent = true;
    r.ring = nullptr;
    r.epoch = 0;
  }
  InvalidateAll();
}

void FunctionTable::RetireLocked(FunctionInfo* info, Slot* slot, bool frees_slot) {
  try {
    retired_.push_back(Retired{info, slot, frees_slot});
    retired_count_.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
    // No memory to remember it: the FunctionInfo (and slot) are never freed, which is safe.
  }
}

void FunctionTable::RemoveLocked(size_t live_index) {
  Slot* slot = live_[live_index];
  // seq_cst: ordered after the pins of the launches that still saw the key (design point 5).
  slot->key.store(kRetiring, std::memory_order_seq_cst);
  const uintptr_t word = slot->info.exchange(0, std::memory_order_seq_cst);
  live_[live_index] = live_.back();
  live_.pop_back();
  RetireLocked(reinterpret_cast<FunctionInfo*>(word & ~kStale), slot, true);
}

size_t FunctionTable::Remove(Owner owner, uint64_t value) noexcept {
  if (value == 0) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const int o = static_cast<int>(owner);
  // A library's kernels resolve to CUfunctions in modules the library loaded in each context
  // (cuLibraryGetModule); those go with it.
  uint64_t modules[16];
  size_t module_count = 0;
  if (owner == Owner::kLibrary) {
    for (Slot* slot : live_) {
      const uint64_t module = slot->owner[static_cast<int>(Owner::kModule)];
      if (slot->owner[o] != value || module == 0 || module_count == std::size(modules)) continue;
      if (std::find(modules, modules + module_count, module) == modules + module_count) {
        modules[module_count++] = module;
      }
    }
  }
  const auto in_modules = [&](uint64_t module) {
    const uint64_t* begin = modules;
    const uint64_t* end = modules + module_count;
    return module != 0 && std::find(begin, end, module) != end;
  };
  size_t removed = 0;
  for (size_t i = live_.size(); i-- > 0;) {
    Slot* slot = live_[i];
    if (slot->owner[o] == value || in_modules(slot->owner[static_cast<int>(Owner::kModule)])) {
      RemoveLocked(i);  // swaps the last live entry into i: already looked at
      ++removed;
    }
  }
  return removed;
}

size_t FunctionTable::RemoveDevice(int32_t device) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  size_t removed = 0;
  for (size_t i = live_.size(); i-- > 0;) {
    if (live_[i]->device.load(std::memory_order_relaxed) == device) {
      RemoveLocked(i);
      ++removed;
    }
  }
  return removed;
}

void FunctionTable::FreeLocked(Retired& r) noexcept {
  if (r.info != nullptr) {
    delete r.info;
    live_infos_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (r.frees_slot) r.slot->key.store(kTombstone, std::memory_order_release);
  retired_count_.fetch_sub(1, std::memory_order_relaxed);
}

void FunctionTable::Reclaim(const LaunchRing& ring) noexcept {
  if (retired_count_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  // (a): no launch in flight on the slot. `finished` first, then `launches`: equal means none was
  // in flight when `launches` was read, and every pin taken before that is released.
  bool any_new = false;
  for (Retired& r : retired_) {
    if (r.quiescent) continue;
    const uint64_t finished = r.slot->finished.load(std::memory_order_acquire);
    if (r.slot->launches.load(std::memory_order_seq_cst) == finished) {
      r.ring = nullptr;  // marks "seen now"; the epoch follows
      r.quiescent = true;
      any_new = true;
    }
  }
  if (any_new) {
    // (b) starts here: every record of those launches is below this claim position.
    const uint64_t claimed = ring.claimed();
    for (Retired& r : retired_) {
      if (r.quiescent && r.ring == nullptr) {
        r.ring = &ring;
        r.epoch = claimed;
      }
    }
  }
  const uint64_t popped = ring.popped();
  auto kept = std::remove_if(retired_.begin(), retired_.end(), [&](Retired& r) {
    if (!r.quiescent || (r.ring == &ring && r.epoch > popped)) return false;
    FreeLocked(r);
    return true;
  });
  retired_.erase(kept, retired_.end());
}

size_t FunctionTable::live_entries() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

uint64_t FunctionTable::TotalLaunches() const noexcept {
  uint64_t total = 0;
  for (size_t i = 0; i <= mask_; ++i) total += slots_[i].launches.load(std::memory_order_relaxed);
  return total;
}

uint64_t FunctionTable::TotalFiltered() const noexcept {
  uint64_t total = 0;
  for (size_t i = 0; i <= mask_; ++i) total += slots_[i].filtered.load(std::memory_order_relaxed);
  return total;
}

}  // namespace cuflight::inject
