#include "cuflight/blackbox/region_reader.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <vector>

#include "cuflight/blackbox/kernel_event.h"
#include "cuflight/blackbox/launch_record.h"
#include "cuflight/blackbox/region_layout.h"
#include "cuflight/occupancy/engine.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/events.h"

namespace cuflight::blackbox {
namespace {

// A copy of the T at `offset` (checked by the caller to lie within the source).
template <typename T>
T Snapshot(RegionSource& source, uint64_t offset) {
  T value;
  source.Read(offset, &value, sizeof(T));
  return value;
}

std::string Text(const char* what, uint64_t value) {
  return std::string(what) + " " + std::to_string(value);
}

// [offset, offset + count * size) lies within [lo, hi); sets *end.
bool Area(uint64_t offset, uint64_t count, uint64_t size, uint64_t lo, uint64_t hi, uint64_t* end) {
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, size, &bytes)) return false;
  if (offset < lo || offset % 64 != 0 || __builtin_add_overflow(offset, bytes, end)) return false;
  return *end <= hi;
}

RegionError CheckHeader(uint64_t bytes, const RegionHeader& h, std::string* message) {
  if (h.magic != kRegionMagic) {
    *message = "not a cuflight black box (magic)";
    return RegionError::kBadMagic;
  }
  if (h.version != kRegionVersion) {
    *message = Text("layout version", h.version) + ", this collector reads " +
               std::to_string(kRegionVersion);
    return RegionError::kBadVersion;
  }
  if (h.region_bytes > bytes) {
    *message =
        Text("the region says it has", h.region_bytes) + " bytes, it has " + std::to_string(bytes);
    return RegionError::kTooSmall;
  }
  *message = "";
  if (h.header_bytes != kHeaderBytes) {
    *message = Text("header_bytes", h.header_bytes);
  } else if (h.ring_capacity < 2 || !std::has_single_bit(h.ring_capacity)) {
    *message = Text("ring_capacity", h.ring_capacity);
  } else if (h.ring_slot_bytes != kRingSlotBytes || h.ring_record_offset != kRingSlotRecordOffset ||
             h.ring_record_bytes != kLaunchRecordBytes) {
    *message = "ring slot layout";
  } else if (h.journal_capacity < 2 || !std::has_single_bit(h.journal_capacity) ||
             h.journal_entry_bytes != sizeof(JournalEntry)) {
    *message = Text("journal_capacity", h.journal_capacity);
  } else if (h.function_capacity == 0 || h.function_entry_bytes != sizeof(FunctionDescriptor)) {
    *message = Text("function_capacity", h.function_capacity);
  } else if (h.device_capacity != kMaxDevices || h.device_entry_bytes != sizeof(DeviceDescriptor)) {
    *message = Text("device_capacity", h.device_capacity);
  }
  if (!message->empty()) return RegionError::kBadLayout;
  // The areas in their order, each after the previous one, all within the region.
  const uint64_t size = h.region_bytes;
  uint64_t end = 0;
  if (!Area(h.ring_control_offset, 1, kRingControlBytes, kHeaderBytes, size, &end) ||
      !Area(h.ring_slots_offset, h.ring_capacity, kRingSlotBytes, end, size, &end) ||
      !Area(h.journal_offset, h.journal_capacity, sizeof(JournalEntry), end, size, &end) ||
      !Area(h.functions_offset, h.function_capacity, sizeof(FunctionDescriptor), end, size, &end) ||
      !Area(h.names_offset, 1, h.names_bytes, end, size, &end) ||
      !Area(h.devices_offset, kMaxDevices, sizeof(DeviceDescriptor), end, size, &end)) {
    *message = "an area lies outside the region or overlaps another";
    return RegionError::kBadLayout;
  }
  return RegionError::kNone;
}

// What recovery will make under one seq.
struct Plan {
  // kLost: a seq the producer used for what cannot be made (an api_error record).
  enum Kind : uint8_t { kKernel, kDevice, kLost, kInvalid } kind = kLost;
  uint64_t seq = 0;
  int32_t device = -1;        // kDevice
  int64_t ts_ns = 0;          // kDevice
  WireLaunchRecord record{};  // kKernel
};

// A launch record read from raw bytes: every field whose type has fewer values than its bytes
// (enums, bool) is checked before the typed record is made.
bool DecodeRecord(const uint8_t* raw, WireLaunchRecord* out) {
  const uint8_t api = raw[offsetof(WireLaunchRecord, api)];
  const uint8_t flags = raw[offsetof(WireLaunchRecord, launch_flags)];
  const uint8_t kind = raw[offsetof(WireLaunchRecord, kind)];
  if (api >= kLaunchApiCount || (flags & ~kLaunchFlagsKnown) != 0 || kind > 1) return false;
  // The checked bytes hold valid values: the copy is a valid object.
  std::memcpy(static_cast<void*>(out), raw, sizeof(*out));
  return true;
}

}  // namespace

// The recovery as a sequence of steps (region_reader.h): the phases below, each resumable at
// the entry it reached. Nothing it holds grows with what the region claims: journal entries and
// ring slots are read (and re-read) through the source one at a time, in seq order, never
// collected.
class RegionRecovery::Impl {
 public:
  Impl(RegionSource& source, const RegionHeader& h, const RecoveryOptions& options)
      : source_(source), h_(h), options_(options), builder_(256) {}

  bool Step(const Budget& budget, const Emit& emit);
  const RecoveryResult& result() const { return result_; }
  RecoveryResult& mutable_result() { return result_; }

 private:
  enum class Phase : uint8_t {
    kState,        // the header's live words
    kScanJournal,  // [journal_tail, journal_head]: the newest state a whole entry carries
    kPlan,         // the ring's positions and first seq, the devices announced before it
    kJournal,      // the journal's kernel events and the announced devices, in seq order
    kRing,         // the ring's records (and the device events they need), in seq order
    kDone,
  };

  template <typename T>
  T Read(uint64_t offset) {
    return Snapshot<T>(source_, offset);
  }
  // From entry `index` of an area of `capacity` entries of `entry_bytes` at `area`: how many
  // entries in a row have their first word (a commit or turn word) in a hole, never written.
  uint64_t HoleEntries(uint64_t area, uint64_t index, uint64_t entry_bytes, uint64_t capacity);
  bool ReadState();
  uint64_t ScanJournal();
  bool PlanRing();
  void PlanAnnouncedDevices();
  uint64_t JournalStep(const Emit& emit);
  uint64_t RingStep(const Emit& emit);
  void Emit(const Plan& plan, const RegionRecovery::Emit& emit);
  void Make(const Plan& plan, const RegionRecovery::Emit& emit);
  bool MakeKernel(const Plan& plan, std::string_view* line);
  bool MakeDevice(int32_t ordinal, uint64_t seq, int64_t ts_ns, std::string_view* line);
  const DeviceDescriptor* Device(int32_t ordinal);
  const occupancy::DeviceContext* Engine(int32_t ordinal);
  bool Emitted(uint64_t seq) const { return options_.after_seq && seq <= *options_.after_seq; }
  std::string_view Encoded(size_t n) {
    if (n == 0 || n > options_.max_line_bytes) return {};
    return {line_.data(), n};
  }

  RegionSource& source_;
  const RegionHeader h_;
  const RecoveryOptions options_;
  RecoveryResult result_;
  Phase phase_ = Phase::kState;
  uint64_t version_ = 0;
  SeqState state_;
  uint64_t first_ring_seq_ = 0;

  // kScanJournal, kJournal: journal entries done (the next index is journal_tail + this; the
  // indices may wrap past 2^64, the count does not); the last seq taken from the journal.
  uint64_t journal_done_ = 0;
  std::optional<uint64_t> journal_last_seq_;
  // The devices announced before the ring (at most kMaxDevices), in seq order, and the next.
  std::vector<Plan> announced_;
  size_t next_announced_ = 0;
  // kRing: the ring's words, the next position and the next seq.
  uint64_t ring_start_ = 0;
  uint64_t enqueued_ = 0;
  uint64_t pos_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t announced_bits_ = 0;
  // Every plan goes through Emit in seq order; two claiming one seq: the first stands.
  bool any_ = false;
  uint64_t last_ = 0;

  // Device descriptors (snapshots) and engines, made once each.
  std::optional<DeviceDescriptor> devices_[kMaxDevices];
  bool device_read_[kMaxDevices] = {};
  std::optional<occupancy::DeviceContext> engines_[kMaxDevices];
  bool engine_made_[kMaxDevices] = {};

  KernelEventBuilder builder_;
  std::vector<char> line_;
  // The names of the function last made (its descriptor's index and name fields).
  std::string names_;
  std::optional<FunctionDescriptor> names_of_;
  uint32_t names_desc_ = 0;
  uint64_t emitted_bytes_ = 0;
};

uint64_t RegionRecovery::Impl::HoleEntries(uint64_t area, uint64_t index, uint64_t entry_bytes,
                                           uint64_t capacity) {
  const uint64_t at = area + index * entry_bytes;
  const uint64_t data = source_.NextData(at);
  if (data < at + sizeof(uint64_t)) return 0;
  // Entries [index, through) have their first word wholly below `data`.
  const uint64_t through = (data - sizeof(uint64_t) - area) / entry_bytes + 1;
  return std::min(through, capacity) - index;
}

bool RegionRecovery::Impl::ReadState() {
  const uint64_t jhead = h_.journal_head;
  const uint64_t jtail = h_.journal_tail;
  if (jtail > jhead || jhead - jtail > h_.journal_capacity ||
      h_.functions_committed > h_.function_capacity || h_.names_committed > h_.names_bytes) {
    result_.error = RegionError::kBadState;
    result_.message = "journal " + std::to_string(jtail) + ".." + std::to_string(jhead) +
                      ", functions " + std::to_string(h_.functions_committed) + ", names " +
                      std::to_string(h_.names_committed) + ": beyond their capacities";
    return false;
  }
  version_ = h_.state_version;
  state_ = h_.seq_state[version_ & 1];
  journal_done_ = 0;
  return true;
}

// [jtail, jhead], the entry at jhead too: whole if the producer died between its commit word and
// the head's store. One entry (or one run of never-written ones) per call.
uint64_t RegionRecovery::Impl::ScanJournal() {
  const uint64_t entries = h_.journal_head - h_.journal_tail + 1;  // at most capacity + 1
  if (journal_done_ >= entries) {
    phase_ = Phase::kPlan;
    return 1;
  }
  const uint64_t j = h_.journal_tail + journal_done_;
  const uint64_t mask = h_.journal_capacity - 1;
  const uint64_t holes =
      HoleEntries(h_.journal_offset, j & mask, sizeof(JournalEntry), h_.journal_capacity);
  if (holes > 0) {
    journal_done_ += std::min(holes, entries - journal_done_);
    return 1;
  }
  const auto e = Read<JournalEntry>(h_.journal_offset + (j & mask) * sizeof(JournalEntry));
  if (e.commit == j + 1 && e.state_version > version_) {  // its handling ended after the header's
    version_ = e.state_version;
    state_ = e.state;
  }
  ++journal_done_;
  return 1;
}

bool RegionRecovery::Impl::PlanRing() {
  const uint64_t control = h_.ring_control_offset;
  enqueued_ = Read<uint64_t>(control + kRingEnqueueOffset);
  const auto dequeued = Read<uint64_t>(control + kRingDequeueOffset);
  const auto dropped = Read<uint64_t>(control + kRingDroppedOffset);
  ring_start_ = std::max(dequeued, state_.handled_pos);
  if (dequeued > enqueued_ || state_.handled_pos > enqueued_ ||
      enqueued_ - ring_start_ > h_.ring_capacity ||
      __builtin_add_overflow(state_.seq_base, dropped, &first_ring_seq_)) {
    result_.error = RegionError::kBadState;
    result_.message = "ring positions " + std::to_string(dequeued) + ", " +
                      std::to_string(state_.handled_pos) + ", " + std::to_string(enqueued_) +
                      " (consumed, handled, claimed) and seq base " +
                      std::to_string(state_.seq_base) + " cannot hold";
    return false;
  }
  pos_ = ring_start_;
  next_seq_ = first_ring_seq_;
  announced_bits_ = state_.announced_devices;
  return true;
}

void RegionRecovery::Impl::PlanAnnouncedDevices() {
  for (int32_t d = 0; d < static_cast<int32_t>(kMaxDevices); ++d) {
    if ((state_.announced_devices >> d & 1) == 0) continue;
    const DeviceDescriptor* desc = Device(d);
    if (desc == nullptr || desc->announced == 0) {
      ++result_.invalid;  // announced in the state, no seq in its descriptor
      continue;
    }
    const uint64_t seq = desc->announced - 1;
    if (seq >= first_ring_seq_) {
      ++result_.invalid;
      continue;
    }
    Plan plan;
    plan.kind = Plan::kDevice;
    plan.device = d;
    plan.ts_ns = desc->announced_ts_ns;
    plan.seq = seq;
    announced_.push_back(plan);
  }
  std::stable_sort(announced_.begin(), announced_.end(),
                   [](const Plan& a, const Plan& b) { return a.seq < b.seq; });
  journal_done_ = 0;
}

// The journal's next entry (or run of never-written ones), after the announced devices whose
// seqs come first.
uint64_t RegionRecovery::Impl::JournalStep(const RegionRecovery::Emit& emit) {
  // [jtail, jhead]: the last one (at jhead) may not have begun, so it is not counted torn.
  const uint64_t entries = h_.journal_head - h_.journal_tail + 1;
  if (journal_done_ >= entries) {
    while (next_announced_ < announced_.size()) Emit(announced_[next_announced_++], emit);
    phase_ = Phase::kRing;
    return 1;
  }
  const uint64_t j = h_.journal_tail + journal_done_;
  const uint64_t mask = h_.journal_capacity - 1;
  const uint64_t holes =
      HoleEntries(h_.journal_offset, j & mask, sizeof(JournalEntry), h_.journal_capacity);
  if (holes > 0) {
    const uint64_t skipped = std::min(holes, entries - journal_done_);
    result_.torn += std::min(skipped, entries - 1 - journal_done_);
    journal_done_ += skipped;
    return 1;
  }
  const bool last = journal_done_ + 1 == entries;
  ++journal_done_;
  const auto e = Read<JournalEntry>(h_.journal_offset + (j & mask) * sizeof(JournalEntry));
  if (e.commit != j + 1) {
    if (!last) ++result_.torn;
    return 1;
  }
  Plan plan;
  plan.kind = Plan::kKernel;
  if (!DecodeRecord(reinterpret_cast<const uint8_t*>(&e) + offsetof(JournalEntry, record),
                    &plan.record) ||
      (journal_last_seq_ && e.seq <= *journal_last_seq_)) {
    ++result_.invalid;
    return 1;
  }
  journal_last_seq_ = e.seq;
  if (e.seq >= first_ring_seq_) {
    ++result_.invalid;  // a seq the state says was not used yet
    return 1;
  }
  while (next_announced_ < announced_.size() && announced_[next_announced_].seq <= e.seq) {
    Emit(announced_[next_announced_++], emit);
  }
  plan.seq = e.seq;
  Emit(plan, emit);
  return 1;
}

// The ring's next position (or run of never-written slots): committed records at and above
// handled_pos get the seqs the sender would have given them (design point 3).
uint64_t RegionRecovery::Impl::RingStep(const RegionRecovery::Emit& emit) {
  // The stream's end is the seq after the last, a uint64_t: the highest seq that can be given is
  // UINT64_MAX - 1. A forged state whose next seq is near UINT64_MAX ends the ring where the seqs
  // end (here, or below, between a record's device event and its own), so that no seq emitted
  // wraps and the end stays above every one (end_seq > last emitted).
  if (pos_ >= enqueued_ || next_seq_ == UINT64_MAX) {
    result_.end_seq = next_seq_;
    phase_ = Phase::kDone;
    return 1;
  }
  const uint64_t mask = h_.ring_capacity - 1;
  const uint64_t holes =
      HoleEntries(h_.ring_slots_offset, pos_ & mask, kRingSlotBytes, h_.ring_capacity);
  if (holes > 0) {  // claimed, never written: as torn as a slot whose callback had not returned
    const uint64_t skipped = std::min(holes, enqueued_ - pos_);
    result_.torn += skipped;
    pos_ += skipped;
    return 1;
  }
  const uint64_t pos = pos_++;
  uint8_t slot[kRingSlotBytes];
  source_.Read(h_.ring_slots_offset + (pos & mask) * kRingSlotBytes, slot, sizeof(slot));
  uint64_t turn = 0;
  std::memcpy(&turn, slot, sizeof(turn));
  if (turn != pos + 1) {
    ++result_.torn;  // claimed, never committed: the callback had not returned
    return 1;
  }
  Plan plan;
  if (!DecodeRecord(slot + kRingSlotRecordOffset, &plan.record)) {
    plan.kind = Plan::kInvalid;
  } else if (plan.record.kind == RecordKind::kLaunch) {
    plan.kind = Plan::kKernel;
    // The sender makes a device's event before its first kernel event.
    const int32_t device = plan.record.device;
    if (device >= 0 && device < static_cast<int32_t>(kMaxDevices) &&
        (announced_bits_ >> device & 1) == 0 && Device(device) != nullptr) {
      announced_bits_ |= uint64_t{1} << device;
      Plan d;
      d.kind = Plan::kDevice;
      d.device = device;
      d.ts_ns = plan.record.ts_ns;
      d.seq = next_seq_++;
      Emit(d, emit);
    }
  } else {
    plan.kind = Plan::kLost;  // an api_error: its names come from the driver, not recoverable
  }
  if (next_seq_ == UINT64_MAX) {
    result_.end_seq = next_seq_;
    phase_ = Phase::kDone;
    return 1;
  }
  plan.seq = next_seq_++;
  Emit(plan, emit);
  return 1;
}

const DeviceDescriptor* RegionRecovery::Impl::Device(int32_t ordinal) {
  if (ordinal < 0 || ordinal >= static_cast<int32_t>(kMaxDevices)) return nullptr;
  if (!device_read_[ordinal]) {
    device_read_[ordinal] = true;
    const auto d =
        Read<DeviceDescriptor>(h_.devices_offset + uint64_t(ordinal) * sizeof(DeviceDescriptor));
    if (d.described == 1 && d.ordinal == ordinal &&
        std::memchr(d.name, '\0', sizeof(d.name)) != nullptr &&
        std::memchr(d.uuid, '\0', sizeof(d.uuid)) != nullptr) {
      devices_[ordinal] = d;
    }
  }
  return devices_[ordinal] ? &*devices_[ordinal] : nullptr;
}

namespace {

occupancy::DeviceLimits LimitsOf(const DeviceDescriptor& d) {
  occupancy::DeviceLimits l;
  l.cc_major = d.cc_major;
  l.cc_minor = d.cc_minor;
  l.sm_count = d.sm_count;
  l.max_threads_per_block = d.max_threads_per_block;
  l.max_threads_per_sm = d.max_threads_per_sm;
  l.max_blocks_per_sm = d.max_blocks_per_sm;
  l.regs_per_sm = d.regs_per_sm;
  l.regs_per_block = d.regs_per_block;
  l.smem_per_sm = d.smem_per_sm;
  l.smem_per_block = d.smem_per_block;
  l.smem_per_block_optin = d.smem_per_block_optin;
  l.reserved_smem_per_block = d.reserved_smem_per_block;
  l.warp_size = d.warp_size;
  l.max_cluster_size = d.max_cluster_size;
  l.max_cluster_size_non_portable = d.max_cluster_size_non_portable;
  return l;
}

}  // namespace

const occupancy::DeviceContext* RegionRecovery::Impl::Engine(int32_t ordinal) {
  const DeviceDescriptor* d = Device(ordinal);
  if (d == nullptr) return nullptr;
  if (!engine_made_[ordinal]) {
    engine_made_[ordinal] = true;
    // The injected library made its engine from the same limits (DeviceContext::Make), or
    // recorded no launch on the device.
    engines_[ordinal] = occupancy::DeviceContext::Make(LimitsOf(*d));
  }
  return engines_[ordinal] ? &*engines_[ordinal] : nullptr;
}

bool RegionRecovery::Impl::MakeDevice(int32_t ordinal, uint64_t seq, int64_t ts_ns,
                                      std::string_view* line) {
  const DeviceDescriptor* d = Device(ordinal);
  if (d == nullptr) return false;
  schema::DeviceEvent event;
  BuildDeviceEvent(ordinal, d->name, d->uuid, LimitsOf(*d), &event);
  event.header.ts_ns = ts_ns;
  event.header.pid = options_.pid;
  event.header.seq = seq;
  event.recovered = true;
  *line = Encoded(schema::Encode(event, line_.data(), line_.size()));
  return !line->empty();
}

bool RegionRecovery::Impl::MakeKernel(const Plan& plan, std::string_view* line) {
  const WireLaunchRecord& r = plan.record;
  if (r.function_desc == kNoFunctionDescriptor) return false;  // the table was full
  if (r.function_desc >= h_.functions_committed) {
    ++result_.invalid;
    return false;
  }
  const auto f = Read<FunctionDescriptor>(h_.functions_offset +
                                          uint64_t{r.function_desc} * sizeof(FunctionDescriptor));
  const uint64_t names_bytes = uint64_t{f.name_bytes} + f.demangled_bytes;
  uint64_t names_end = 0;
  if (f.device != r.device || f.attributes_ok > 1 || f.non_portable_cluster_allowed > 1 ||
      __builtin_add_overflow(f.name_offset, names_bytes, &names_end) ||
      names_end > h_.names_committed) {
    ++result_.invalid;
    return false;
  }
  // A line holds at least the names: longer ones cannot be made (checked before any read).
  if (names_bytes > options_.max_line_bytes) return false;
  const occupancy::DeviceContext* engine = Engine(r.device);
  if (engine == nullptr) return false;
  // Only this function's names are read (a region may claim its whole names area in use), and
  // kept for the launches of the same function that follow.
  if (!names_of_ || names_desc_ != r.function_desc || names_of_->name_offset != f.name_offset ||
      names_of_->name_bytes != f.name_bytes || names_of_->demangled_bytes != f.demangled_bytes) {
    names_.resize(names_bytes);
    source_.Read(h_.names_offset + f.name_offset, names_.data(), names_bytes);
    names_of_ = f;
    names_desc_ = r.function_desc;
  }
  const std::string_view names(names_);
  FunctionFacts facts;
  facts.key = r.function_desc;  // unique within this region, whatever ids it claims
  facts.attributes_ok = f.attributes_ok == 1;
  facts.num_regs = f.num_regs;
  facts.static_smem = f.static_smem;
  facts.local_bytes = f.local_bytes;
  facts.const_bytes = f.const_bytes;
  facts.max_threads_per_block = f.max_threads_per_block;
  facts.non_portable_cluster_allowed = f.non_portable_cluster_allowed == 1;
  facts.name = names.substr(0, f.name_bytes);
  facts.demangled = names.substr(f.name_bytes, f.demangled_bytes);
  schema::KernelEvent event;
  if (!builder_.Build(r, facts, *engine, &event)) return false;
  event.header.ts_ns = r.ts_ns;
  event.header.pid = options_.pid;
  event.header.seq = plan.seq;
  event.recovered = true;
  *line = Encoded(schema::Encode(event, line_.data(), line_.size()));
  return !line->empty();
}

void RegionRecovery::Impl::Emit(const Plan& plan, const RegionRecovery::Emit& emit) {
  if (any_ && plan.seq <= last_) {  // two entries claim one seq: the first stands
    ++result_.invalid;
    return;
  }
  any_ = true;
  last_ = plan.seq;
  Make(plan, emit);
}

void RegionRecovery::Impl::Make(const Plan& plan, const RegionRecovery::Emit& emit) {
  if (Emitted(plan.seq)) return;  // the log has it
  std::string_view line;
  bool made = false;
  switch (plan.kind) {
    case Plan::kKernel:
      made = MakeKernel(plan, &line);
      if (made) ++result_.kernels;
      break;
    case Plan::kDevice:
      made = MakeDevice(plan.device, plan.seq, plan.ts_ns, &line);
      if (made) ++result_.devices;
      break;
    case Plan::kLost:
      break;
    case Plan::kInvalid:
      ++result_.invalid;
      break;
  }
  if (!made || emitted_bytes_ + line.size() > options_.max_total_bytes) {
    ++result_.unrecoverable;
    return;
  }
  emitted_bytes_ += line.size();
  emit(plan.seq, line);
}

bool RegionRecovery::Impl::Step(const Budget& budget, const RegionRecovery::Emit& emit) {
  uint64_t entries = 0;
  const uint64_t bytes_before = emitted_bytes_;
  while (phase_ != Phase::kDone && entries < budget.entries &&
         emitted_bytes_ - bytes_before < budget.bytes) {
    switch (phase_) {
      case Phase::kState:
        phase_ = ReadState() ? Phase::kScanJournal : Phase::kDone;
        break;
      case Phase::kScanJournal:
        entries += ScanJournal();
        break;
      case Phase::kPlan:
        if (!PlanRing()) {
          phase_ = Phase::kDone;
          break;
        }
        PlanAnnouncedDevices();
        line_.resize(std::min<size_t>(options_.max_line_bytes, size_t{16} << 20) + 1);
        phase_ = Phase::kJournal;
        break;
      case Phase::kJournal:
        entries += JournalStep(emit);
        break;
      case Phase::kRing:
        entries += RingStep(emit);
        if (phase_ == Phase::kDone && any_ && last_ >= result_.end_seq) {
          result_.end_seq = last_ + 1;
        }
        break;
      case Phase::kDone:
        break;
    }
  }
  if (phase_ == Phase::kDone) {  // what it held is not needed any more
    line_ = {};
    names_ = {};
  }
  return phase_ == Phase::kDone;
}

RegionRecovery::RegionRecovery(RegionSource* source, const RecoveryOptions& options) {
  if (source->size() < kHeaderBytes) {
    error_.error = RegionError::kTooSmall;
    error_.message = "shorter than a black box header";
    return;
  }
  // One snapshot of the header: what was checked is what is used.
  const auto header = Snapshot<RegionHeader>(*source, 0);
  error_.error = CheckHeader(source->size(), header, &error_.message);
  if (error_.error != RegionError::kNone) return;
  impl_ = std::make_unique<Impl>(*source, header, options);
}

RegionRecovery::~RegionRecovery() = default;

bool RegionRecovery::Step(const Budget& budget, const Emit& emit) {
  return impl_ == nullptr || impl_->Step(budget, emit);
}

const RecoveryResult& RegionRecovery::result() const {
  return impl_ == nullptr ? error_ : impl_->result();
}

std::string_view RegionErrorName(RegionError error) {
  switch (error) {
    case RegionError::kNone:
      return "none";
    case RegionError::kTooSmall:
      return "too_small";
    case RegionError::kBadMagic:
      return "bad_magic";
    case RegionError::kBadVersion:
      return "bad_version";
    case RegionError::kBadLayout:
      return "bad_layout";
    case RegionError::kBadState:
      return "bad_state";
  }
  return "unknown";
}

RegionError CheckRegion(RegionSource& source, std::string* message) {
  if (source.size() < kHeaderBytes) {
    *message = "shorter than a black box header";
    return RegionError::kTooSmall;
  }
  return CheckHeader(source.size(), Snapshot<RegionHeader>(source, 0), message);
}

RegionError CheckRegion(std::span<const uint8_t> bytes, std::string* message) {
  SpanSource source(bytes);
  return CheckRegion(source, message);
}

RecoveryResult Recover(RegionSource& source, const RecoveryOptions& options,
                       const RegionRecovery::Emit& emit) {
  RegionRecovery recovery(&source, options);
  const RegionRecovery::Budget all{UINT64_MAX, UINT64_MAX};
  // Bounded: every step advances through the region's entries, at most ring_capacity +
  // journal_capacity + 1 of them and the phases between.
  while (!recovery.Step(all, emit)) {
  }
  return recovery.result();
}

RecoveryResult Recover(std::span<const uint8_t> bytes, const RecoveryOptions& options,
                       const RegionRecovery::Emit& emit) {
  SpanSource source(bytes);
  return Recover(source, options, emit);
}

}  // namespace cuflight::blackbox
