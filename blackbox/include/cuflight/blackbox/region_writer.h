// The producer's side of the black box (region_layout.h): makes the region and writes into it.
//
// Threads: AddFunction is the slow path of a function's first launch (any thread; a mutex,
// nothing allocated). AnnounceDevice, Commit, PublishState and ReleaseJournal belong to the one
// thread that consumes the launch ring (the sender thread). The ring itself is the MpscRing laid
// over ring_control() and ring_slots().
#ifndef CUFLIGHT_BLACKBOX_REGION_WRITER_H_
#define CUFLIGHT_BLACKBOX_REGION_WRITER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "cuflight/blackbox/kernel_event.h"
#include "cuflight/blackbox/region_layout.h"
#include "cuflight/occupancy/device_limits.h"

namespace cuflight::blackbox {

struct RegionOptions {
  uint32_t ring_capacity = 0;     // the launch ring's: a power of two in [2, 2^31]
  uint32_t journal_capacity = 0;  // rounded up to a power of two, at least 2
  uint32_t function_capacity = 32768;
  uint64_t names_bytes = uint64_t{16} << 20;
  int32_t pid = 0;
};

// What a device descriptor holds besides the limits.
struct DeviceFacts {
  std::string_view name;
  std::string_view uuid;
  occupancy::DeviceLimits limits;
};

class RegionWriter {
 public:
  // The bytes a region with `options` takes (a multiple of 4096); 0 when the options are out of
  // range or the region would be larger than kMaxRegionBytes.
  static uint64_t RegionBytes(const RegionOptions& options) noexcept;

  // Makes the memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING), sizes it, seals it (F_SEAL_SHRINK,
  // F_SEAL_GROW, F_SEAL_SEAL), maps it shared and writes the header. Returns nullptr and sets
  // *error ("memfd_create: Function not implemented", ...) when any step fails. Never throws.
  static std::unique_ptr<RegionWriter> Create(const RegionOptions& options,
                                              std::string* error) noexcept;
  // The same over `memory` (RegionBytes(options) bytes, 64-byte aligned, zeroed, outliving the
  // writer) instead of a memfd: for tests and the fuzzer's seeds. nullptr when out of range.
  static std::unique_ptr<RegionWriter> Over(void* memory, const RegionOptions& options) noexcept;

  ~RegionWriter();
  RegionWriter(const RegionWriter&) = delete;
  RegionWriter& operator=(const RegionWriter&) = delete;

  // The memfd to pass to the collector; -1 over caller memory or after CloseAfterFork.
  int fd() const noexcept { return fd_; }
  std::span<const uint8_t> bytes() const noexcept { return {base_, size_}; }
  // The ring's storage: kRingControlBytes of control words, ring_capacity slots of
  // kRingSlotBytes (64-byte aligned).
  void* ring_control() const noexcept;
  void* ring_slots() const noexcept;
  uint32_t ring_capacity() const noexcept { return ring_capacity_; }

  // Describes a function the driver read on `device` (and the device, the first time), for the
  // records of its launches. Returns the descriptor's index, or kNoFunctionDescriptor when the
  // descriptor table or the names area is full or `device` is out of range (the launches are
  // still sent; only a recovery cannot make them). Any thread; takes a mutex.
  uint32_t AddFunction(const FunctionFacts& function, int32_t device,
                       const DeviceFacts& device_facts) noexcept;
  // Functions that got no descriptor (full). Any thread.
  uint64_t functions_refused() const noexcept {
    return functions_refused_.load(std::memory_order_relaxed);
  }

  // The sender thread. Its device event for `ordinal` got `seq` (valid once a state with the
  // device's bit in announced_devices is published).
  void AnnounceDevice(int32_t ordinal, uint64_t seq, int64_t ts_ns) noexcept;
  // The sender thread, after it made the kernel event of the record at `ring_pos` and handed
  // its line to the transport under `seq`: journals the record and publishes `state` with it
  // (one step: design point 3). The oldest entry is forgotten when the journal is full.
  void Commit(uint64_t seq, uint64_t ring_pos, const void* record, const SeqState& state) noexcept;
  // The sender thread: publishes `state` alone (after any other seq it used, and after a record
  // it handled without journaling).
  void PublishState(const SeqState& state) noexcept;
  // The sender thread: forgets the journal entries whose seq is at most `written_seq` (the
  // transport wrote their lines completely).
  void ReleaseJournal(uint64_t written_seq) noexcept;
  // Entries forgotten before their line was written (the journal was full). Any thread.
  uint64_t journal_overwritten() const noexcept {
    return journal_overwritten_.load(std::memory_order_relaxed);
  }

  // A fork()ed child: closes the parent's memfd (the child makes its own region). Nothing else
  // is touched; async-signal-safe.
  void CloseAfterFork() noexcept;

 private:
  RegionWriter(uint8_t* base, size_t size, int fd, bool mapped) noexcept;
  void Init(const RegionOptions& options) noexcept;
  RegionHeader* header() const noexcept { return reinterpret_cast<RegionHeader*>(base_); }
  void DescribeDevice(int32_t device, const DeviceFacts& facts) noexcept;

  uint8_t* const base_;
  const size_t size_;
  int fd_;
  const bool mapped_;
  uint32_t ring_capacity_ = 0;
  uint32_t journal_mask_ = 0;
  JournalEntry* journal_ = nullptr;
  FunctionDescriptor* functions_ = nullptr;
  char* names_ = nullptr;
  DeviceDescriptor* devices_ = nullptr;

  std::mutex mu_;  // AddFunction
  uint32_t function_capacity_ = 0;
  uint32_t functions_used_ = 0;  // under mu_
  uint64_t names_bytes_ = 0;
  uint64_t names_used_ = 0;  // under mu_
  std::atomic<uint64_t> functions_refused_{0};

  // The sender thread's.
  uint64_t version_ = 0;
  uint64_t journal_head_ = 0;
  uint64_t journal_tail_ = 0;
  std::atomic<uint64_t> journal_overwritten_{0};
};

}  // namespace cuflight::blackbox

#endif  // CUFLIGHT_BLACKBOX_REGION_WRITER_H_
