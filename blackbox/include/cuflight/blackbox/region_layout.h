// The black box: the shared memory region in which a producer (the injected library) keeps what
// it has recorded and not yet sent, so that the collector can read it when the producer dies
// without a word (SIGKILL, the OOM killer). docs/protocol.md, "The black box", is the prose
// version of this file; this file is the contract.
//
// Design (after Perfetto's shared memory buffer between a producer and its tracing service):
//  1. A memfd (memfd_create, MFD_CLOEXEC | MFD_ALLOW_SEALING) of region_bytes, sealed against
//     shrinking and growing, mapped shared by the producer and passed to the collector with
//     SCM_RIGHTS on every Unix-socket connection, along with the connection's first bytes. The
//     collector reads it with pread(2), never mapping it (a hole stays unallocated), and only
//     after the producer died.
//  2. What it holds, each at an offset the header gives:
//       header     RegionHeader (kHeaderBytes): the layout, then the live words below
//       ring       the launch ring's control words and slots: the CUPTI callbacks write every
//                  recorded launch there (an ordinary MPSC ring, cuflight/inject/ring.h)
//       journal    the records the sender thread has made events of whose lines had not yet
//                  been written to the socket, with the seq each got
//       functions  one descriptor per function the producer read (attributes, name offsets),
//                  appended on the slow path of a function's first launch, never changed
//       names      the descriptors' names: mangled then demangled, appended
//       devices    one descriptor per device ordinal (its limits, name, UUID), and whether and
//                  under which seq the sender sent its device event
//  3. Seq accounting. The sender thread's progress is one state: `seq_base` (its next seq minus
//     the ring drops it has accounted for), `handled_pos` (the ring position below which it has
//     handled every record) and `announced_devices` (the devices whose device event it made; each
//     device descriptor holds that event's seq). It publishes each new state under the next
//     `state_version`, in the header's slot state_version & 1 (so that a kill at any instruction
//     leaves a whole state), and a journal entry carries the state its record's handling ends
//     with (journal entry and state are one step). The current state is the one with the highest
//     version, in the header or in a whole journal entry. The committed ring records at and
//     above its handled_pos get, in ring order, the seqs seq_base + ring_dropped, +1, ... (a
//     device event first for a device not announced): what the sender would have given them.
//  4. Torn writes. A ring slot is committed when its turn word is its position + 1 (written
//     last, release); a journal entry when its commit word is its index + 1; a function
//     descriptor when its index is below functions_committed; a device descriptor when
//     described is 1. Anything else was being written when the producer died: counted, not used.
//  5. Everything is the producer's native layout: little-endian LP64 (x86-64, aarch64).
#ifndef CUFLIGHT_BLACKBOX_REGION_LAYOUT_H_
#define CUFLIGHT_BLACKBOX_REGION_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuflight/blackbox/launch_record.h"

namespace cuflight::blackbox {

inline constexpr uint64_t kRegionMagic = 0x31584f424b4c4643;  // "CFLKBOX1" in memory order
inline constexpr uint32_t kRegionVersion = 1;
inline constexpr uint32_t kHeaderBytes = 4096;
// The collector refuses a larger region: a producer cannot make it map more than this.
inline constexpr uint64_t kMaxRegionBytes = uint64_t{64} << 20;
inline constexpr uint32_t kMaxDevices = 64;  // device ordinals [0, 64), as the injected library's

// The ring (cuflight/inject/ring.h, MpscRing over external storage): its control words, then
// ring_capacity slots of kRingSlotBytes, each an 8-byte turn word followed by a WireLaunchRecord.
inline constexpr uint32_t kRingControlBytes = 512;
inline constexpr uint32_t kRingEnqueueOffset = 0;    // u64: positions claimed by producers
inline constexpr uint32_t kRingDequeueOffset = 128;  // u64: positions the consumer freed
inline constexpr uint32_t kRingDroppedOffset = 384;  // u64: pushes refused (full, closed)
inline constexpr uint32_t kRingSlotBytes = 128;
inline constexpr uint32_t kRingSlotRecordOffset = 8;

struct SeqState {
  uint64_t seq_base = 0;           // the sender's next seq minus the ring drops it accounted for
  uint64_t handled_pos = 0;        // ring positions below this were handled by the sender
  uint64_t announced_devices = 0;  // bit d: the device event of ordinal d was made
};
static_assert(sizeof(SeqState) == 24);

struct RegionHeader {
  // Fixed when the region is made, before it is passed to anyone.
  uint64_t magic;         // kRegionMagic (written last)
  uint32_t version;       // kRegionVersion
  uint32_t header_bytes;  // kHeaderBytes
  uint64_t region_bytes;  // the memfd's size
  int32_t pid;            // the producer's pid, as its events carry it
  uint32_t reserved0;
  uint64_t ring_control_offset;
  uint64_t ring_slots_offset;
  uint32_t ring_capacity;       // a power of two, >= 2
  uint32_t ring_slot_bytes;     // kRingSlotBytes
  uint32_t ring_record_offset;  // kRingSlotRecordOffset
  uint32_t ring_record_bytes;   // kLaunchRecordBytes
  uint64_t journal_offset;
  uint32_t journal_capacity;     // a power of two, >= 2
  uint32_t journal_entry_bytes;  // sizeof(JournalEntry)
  uint64_t functions_offset;
  uint32_t function_capacity;
  uint32_t function_entry_bytes;  // sizeof(FunctionDescriptor)
  uint64_t names_offset;
  uint64_t names_bytes;
  uint64_t devices_offset;
  uint32_t device_capacity;     // kMaxDevices
  uint32_t device_entry_bytes;  // sizeof(DeviceDescriptor)

  // Live, written by the producer while it runs (atomically, release), at kLiveOffset.
  alignas(64) uint64_t state_version;  // seq_state[state_version & 1] is current
  SeqState seq_state[2];
  uint64_t journal_head;         // entries appended (index of the next)
  uint64_t journal_tail;         // entries below are forgotten (their lines were written)
  uint64_t names_committed;      // bytes of the names area in use
  uint32_t functions_committed;  // descriptors in use
  uint32_t reserved2;
};
inline constexpr size_t kLiveOffset = 128;
static_assert(std::is_standard_layout_v<RegionHeader> &&
              std::is_trivially_copyable_v<RegionHeader>);
static_assert(offsetof(RegionHeader, version) == 8);
static_assert(offsetof(RegionHeader, region_bytes) == 16);
static_assert(offsetof(RegionHeader, pid) == 24);
static_assert(offsetof(RegionHeader, ring_control_offset) == 32);
static_assert(offsetof(RegionHeader, ring_slots_offset) == 40);
static_assert(offsetof(RegionHeader, ring_capacity) == 48);
static_assert(offsetof(RegionHeader, journal_offset) == 64);
static_assert(offsetof(RegionHeader, functions_offset) == 80);
static_assert(offsetof(RegionHeader, names_offset) == 96);
static_assert(offsetof(RegionHeader, names_bytes) == 104);
static_assert(offsetof(RegionHeader, devices_offset) == 112);
static_assert(offsetof(RegionHeader, device_capacity) == 120);
static_assert(offsetof(RegionHeader, state_version) == kLiveOffset);
static_assert(offsetof(RegionHeader, seq_state) == kLiveOffset + 8);
static_assert(offsetof(RegionHeader, journal_head) == kLiveOffset + 56);
static_assert(offsetof(RegionHeader, journal_tail) == kLiveOffset + 64);
static_assert(offsetof(RegionHeader, names_committed) == kLiveOffset + 72);
static_assert(offsetof(RegionHeader, functions_committed) == kLiveOffset + 80);
static_assert(sizeof(RegionHeader) == 256 && sizeof(RegionHeader) <= kHeaderBytes);

// A ring record the sender thread made a kernel event of, kept until the event's line is written.
struct JournalEntry {
  uint64_t commit;    // index + 1 once the entry is whole (written last); 0 while it is written
  uint64_t seq;       // the kernel event's seq
  uint64_t ring_pos;  // the record's ring position
  uint64_t state_version;  // the state the record's handling ends with (design point 3)
  SeqState state;
  WireLaunchRecord record;
};
static_assert(std::is_standard_layout_v<JournalEntry> && sizeof(JournalEntry) == 176);
static_assert(offsetof(JournalEntry, state) == 32);
static_assert(offsetof(JournalEntry, record) == 56);

// A function as the driver described it at its first launch on one device (FunctionInfo).
struct FunctionDescriptor {
  uint64_t id;  // FunctionInfo::id
  int32_t device;
  int32_t num_regs;
  int64_t static_smem;
  int64_t local_bytes;
  int64_t const_bytes;
  int32_t max_threads_per_block;
  uint8_t attributes_ok;                 // 0 or 1
  uint8_t non_portable_cluster_allowed;  // 0 or 1
  uint8_t reserved[2];
  uint64_t name_offset;  // into the names area: the mangled name, then the demangled one
  uint32_t name_bytes;
  uint32_t demangled_bytes;
};
static_assert(std::is_standard_layout_v<FunctionDescriptor> && sizeof(FunctionDescriptor) == 64);
static_assert(offsetof(FunctionDescriptor, name_offset) == 48);

// A device (DeviceInfo) and its device event.
struct DeviceDescriptor {
  uint32_t described;  // 1 once the rest is whole (written last, release); 0 before
  int32_t ordinal;
  // occupancy::DeviceLimits, field for field.
  int32_t cc_major;
  int32_t cc_minor;
  int32_t sm_count;
  int32_t max_threads_per_block;
  int32_t max_threads_per_sm;
  int32_t max_blocks_per_sm;
  int32_t regs_per_sm;
  int32_t regs_per_block;
  int64_t smem_per_sm;
  int64_t smem_per_block;
  int64_t smem_per_block_optin;
  int64_t reserved_smem_per_block;
  int32_t warp_size;
  int32_t max_cluster_size;
  int32_t max_cluster_size_non_portable;
  int32_t reserved;
  // The sender thread's device event: its seq + 1 (0: not sent), and its ts_ns.
  uint64_t announced;
  int64_t announced_ts_ns;
  char name[256];  // NUL-terminated
  char uuid[64];   // NUL-terminated
  uint8_t pad[88];
};
static_assert(std::is_standard_layout_v<DeviceDescriptor> && sizeof(DeviceDescriptor) == 512);
static_assert(offsetof(DeviceDescriptor, announced) == 88);
static_assert(offsetof(DeviceDescriptor, name) == 104);

}  // namespace cuflight::blackbox

#endif  // CUFLIGHT_BLACKBOX_REGION_LAYOUT_H_
