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

// A copy of the T at `offset` (checked by the caller to lie within `bytes`).
template <typename T>
T Snapshot(std::span<const uint8_t> bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
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

RegionError CheckHeader(std::span<const uint8_t> bytes, const RegionHeader& h,
                        std::string* message) {
  if (h.magic != kRegionMagic) {
    *message = "not a cuflight black box (magic)";
    return RegionError::kBadMagic;
  }
  if (h.version != kRegionVersion) {
    *message = Text("layout version", h.version) + ", this collector reads " +
               std::to_string(kRegionVersion);
    return RegionError::kBadVersion;
  }
  if (h.region_bytes > bytes.size()) {
    *message = Text("the region says it has", h.region_bytes) + " bytes, it has " +
               std::to_string(bytes.size());
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

class Recovery {
 public:
  Recovery(std::span<const uint8_t> bytes, const RegionHeader& h, const RecoveryOptions& options)
      : bytes_(bytes), h_(h), options_(options), builder_(256) {}

  RecoveryResult Run(const std::function<void(uint64_t, std::string_view)>& emit);

 private:
  bool ReadState();
  void PlanJournal();
  bool PlanRing();
  void PlanAnnouncedDevices();
  void Make(const Plan& plan, const std::function<void(uint64_t, std::string_view)>& emit);
  bool MakeKernel(const Plan& plan, std::string_view* line);
  bool MakeDevice(int32_t ordinal, uint64_t seq, int64_t ts_ns, std::string_view* line);
  const DeviceDescriptor* Device(int32_t ordinal);
  const occupancy::DeviceContext* Engine(int32_t ordinal);
  bool Emitted(uint64_t seq) const { return options_.after_seq && seq <= *options_.after_seq; }
  std::string_view Encoded(size_t n) {
    if (n == 0 || n > options_.max_line_bytes) return {};
    return {line_.data(), n};
  }

  std::span<const uint8_t> bytes_;
  const RegionHeader h_;
  const RecoveryOptions& options_;
  RecoveryResult result_;
  uint64_t version_ = 0;
  SeqState state_;
  uint64_t first_ring_seq_ = 0;
  std::vector<Plan> before_;  // journal entries and announced devices, seqs below the ring's
  std::vector<Plan> ring_;    // the ring's, in seq order
  struct JournalPick {
    uint64_t seq;
    WireLaunchRecord record;
  };
  std::vector<JournalPick> journal_;

  // Device descriptors (snapshots) and engines, made once each.
  std::optional<DeviceDescriptor> devices_[kMaxDevices];
  bool device_read_[kMaxDevices] = {};
  std::optional<occupancy::DeviceContext> engines_[kMaxDevices];
  bool engine_made_[kMaxDevices] = {};

  KernelEventBuilder builder_;
  std::vector<char> line_;
  std::string names_;  // the names area, copied once
  uint64_t emitted_bytes_ = 0;
};

bool Recovery::ReadState() {
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
  return true;
}

void Recovery::PlanJournal() {
  const uint64_t jhead = h_.journal_head;
  const uint64_t jtail = h_.journal_tail;
  const uint64_t mask = h_.journal_capacity - 1;
  // [jtail, jhead], the entry at jhead too: whole if the producer died between its commit word
  // and the head's store.
  for (uint64_t n = 0; n <= jhead - jtail; ++n) {
    const uint64_t j = jtail + n;
    const JournalEntry e =
        Snapshot<JournalEntry>(bytes_, h_.journal_offset + (j & mask) * sizeof(JournalEntry));
    if (e.commit != j + 1) {
      if (j < jhead) ++result_.torn;
      continue;
    }
    if (e.state_version > version_) {  // its handling ended after the header's state
      version_ = e.state_version;
      state_ = e.state;
    }
    WireLaunchRecord record;
    if (!DecodeRecord(reinterpret_cast<const uint8_t*>(&e) + offsetof(JournalEntry, record),
                      &record) ||
        (!journal_.empty() && e.seq <= journal_.back().seq)) {
      ++result_.invalid;
      continue;
    }
    journal_.push_back({e.seq, record});
  }
}

bool Recovery::PlanRing() {
  const uint64_t control = h_.ring_control_offset;
  const auto enqueued = Snapshot<uint64_t>(bytes_, control + kRingEnqueueOffset);
  const auto dequeued = Snapshot<uint64_t>(bytes_, control + kRingDequeueOffset);
  const auto dropped = Snapshot<uint64_t>(bytes_, control + kRingDroppedOffset);
  const uint64_t start = std::max(dequeued, state_.handled_pos);
  if (dequeued > enqueued || state_.handled_pos > enqueued || enqueued - start > h_.ring_capacity ||
      __builtin_add_overflow(state_.seq_base, dropped, &first_ring_seq_)) {
    result_.error = RegionError::kBadState;
    result_.message = "ring positions " + std::to_string(dequeued) + ", " +
                      std::to_string(state_.handled_pos) + ", " + std::to_string(enqueued) +
                      " (consumed, handled, claimed) and seq base " +
                      std::to_string(state_.seq_base) + " cannot hold";
    return false;
  }
  const uint64_t mask = h_.ring_capacity - 1;
  uint64_t next = first_ring_seq_;
  uint64_t announced = state_.announced_devices;
  for (uint64_t pos = start; pos < enqueued; ++pos) {
    const uint64_t slot = h_.ring_slots_offset + (pos & mask) * kRingSlotBytes;
    if (Snapshot<uint64_t>(bytes_, slot) != pos + 1) {
      ++result_.torn;  // claimed, never committed: the callback had not returned
      continue;
    }
    uint8_t raw[kLaunchRecordBytes];
    std::memcpy(raw, bytes_.data() + slot + kRingSlotRecordOffset, sizeof(raw));
    Plan plan;
    if (!DecodeRecord(raw, &plan.record)) {
      plan.kind = Plan::kInvalid;
    } else if (plan.record.kind == RecordKind::kLaunch) {
      plan.kind = Plan::kKernel;
      // The sender makes a device's event before its first kernel event.
      const int32_t device = plan.record.device;
      if (device >= 0 && device < static_cast<int32_t>(kMaxDevices) &&
          (announced >> device & 1) == 0 && Device(device) != nullptr) {
        announced |= uint64_t{1} << device;
        Plan d;
        d.kind = Plan::kDevice;
        d.device = device;
        d.ts_ns = plan.record.ts_ns;
        d.seq = next++;
        ring_.push_back(d);
      }
    } else {
      plan.kind = Plan::kLost;  // an api_error: its names come from the driver, not recoverable
    }
    if (next == UINT64_MAX) break;
    plan.seq = next++;
    ring_.push_back(plan);
  }
  result_.end_seq = next;
  return true;
}

void Recovery::PlanAnnouncedDevices() {
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
    before_.push_back(plan);
  }
  for (const JournalPick& j : journal_) {
    if (j.seq >= first_ring_seq_) {
      ++result_.invalid;  // a seq the state says was not used yet
      continue;
    }
    Plan plan;
    plan.kind = Plan::kKernel;
    plan.seq = j.seq;
    plan.record = j.record;
    before_.push_back(plan);
  }
  std::stable_sort(before_.begin(), before_.end(),
                   [](const Plan& a, const Plan& b) { return a.seq < b.seq; });
}

const DeviceDescriptor* Recovery::Device(int32_t ordinal) {
  if (ordinal < 0 || ordinal >= static_cast<int32_t>(kMaxDevices)) return nullptr;
  if (!device_read_[ordinal]) {
    device_read_[ordinal] = true;
    const auto d = Snapshot<DeviceDescriptor>(
        bytes_, h_.devices_offset + uint64_t(ordinal) * sizeof(DeviceDescriptor));
    if (d.described == 1 && d.ordinal == ordinal &&
        std::memchr(d.name, '\0', sizeof(d.name)) != nullptr &&
        std::memchr(d.uuid, '\0', sizeof(d.uuid)) != nullptr) {
      devices_[ordinal] = d;
    }
  }
  return devices_[ordinal] ? &*devices_[ordinal] : nullptr;
}

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

const occupancy::DeviceContext* Recovery::Engine(int32_t ordinal) {
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

bool Recovery::MakeDevice(int32_t ordinal, uint64_t seq, int64_t ts_ns, std::string_view* line) {
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

bool Recovery::MakeKernel(const Plan& plan, std::string_view* line) {
  const WireLaunchRecord& r = plan.record;
  if (r.function_desc == kNoFunctionDescriptor) return false;  // the table was full
  if (r.function_desc >= h_.functions_committed) {
    ++result_.invalid;
    return false;
  }
  const auto f = Snapshot<FunctionDescriptor>(
      bytes_, h_.functions_offset + uint64_t{r.function_desc} * sizeof(FunctionDescriptor));
  uint64_t names_end = 0;
  if (f.device != r.device || f.attributes_ok > 1 || f.non_portable_cluster_allowed > 1 ||
      __builtin_add_overflow(f.name_offset, uint64_t{f.name_bytes} + f.demangled_bytes,
                             &names_end) ||
      names_end > h_.names_committed) {
    ++result_.invalid;
    return false;
  }
  // A line holds at least the names: longer ones cannot be made (checked before any copy).
  if (uint64_t{f.name_bytes} + f.demangled_bytes > options_.max_line_bytes) return false;
  const occupancy::DeviceContext* engine = Engine(r.device);
  if (engine == nullptr) return false;
  if (names_.size() != h_.names_committed) {  // once: a copy of the names area in use
    names_.assign(reinterpret_cast<const char*>(bytes_.data() + h_.names_offset),
                  h_.names_committed);
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
  facts.name = names.substr(f.name_offset, f.name_bytes);
  facts.demangled = names.substr(f.name_offset + f.name_bytes, f.demangled_bytes);
  schema::KernelEvent event;
  if (!builder_.Build(r, facts, *engine, &event)) return false;
  event.header.ts_ns = r.ts_ns;
  event.header.pid = options_.pid;
  event.header.seq = plan.seq;
  event.recovered = true;
  *line = Encoded(schema::Encode(event, line_.data(), line_.size()));
  return !line->empty();
}

void Recovery::Make(const Plan& plan, const std::function<void(uint64_t, std::string_view)>& emit) {
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

RecoveryResult Recovery::Run(const std::function<void(uint64_t, std::string_view)>& emit) {
  if (!ReadState()) return result_;
  PlanJournal();
  if (!PlanRing()) return result_;
  PlanAnnouncedDevices();
  line_.resize(std::min<size_t>(options_.max_line_bytes, size_t{16} << 20) + 1);
  uint64_t last = 0;
  bool any = false;
  for (const std::vector<Plan>* plans : {&before_, &ring_}) {
    for (const Plan& plan : *plans) {
      if (any && plan.seq <= last) {  // two entries claim one seq: the first stands
        ++result_.invalid;
        continue;
      }
      any = true;
      last = plan.seq;
      Make(plan, emit);
    }
  }
  if (any && last >= result_.end_seq) result_.end_seq = last + 1;
  return result_;
}

}  // namespace

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

RegionError CheckRegion(std::span<const uint8_t> bytes, std::string* message) {
  if (bytes.size() < kHeaderBytes) {
    *message = "shorter than a black box header";
    return RegionError::kTooSmall;
  }
  return CheckHeader(bytes, Snapshot<RegionHeader>(bytes, 0), message);
}

RecoveryResult Recover(std::span<const uint8_t> bytes, const RecoveryOptions& options,
                       const std::function<void(uint64_t seq, std::string_view line)>& emit) {
  RecoveryResult result;
  if (bytes.size() < kHeaderBytes) {
    result.error = RegionError::kTooSmall;
    result.message = "shorter than a black box header";
    return result;
  }
  // One snapshot of the header: what was checked is what is used.
  const auto header = Snapshot<RegionHeader>(bytes, 0);
  result.error = CheckHeader(bytes, header, &result.message);
  if (result.error != RegionError::kNone) return result;
  Recovery recovery(bytes.first(header.region_bytes), header, options);
  return recovery.Run(emit);
}

}  // namespace cuflight::blackbox
