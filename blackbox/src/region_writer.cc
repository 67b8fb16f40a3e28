#include "cuflight/blackbox/region_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <new>

namespace cuflight::blackbox {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Where each area lies for `o` (offsets from the region's start). False when out of range.
struct Areas {
  uint64_t ring_control, ring_slots, journal, functions, names, devices, total;
  uint32_t journal_capacity;
};

bool Place(const RegionOptions& o, Areas* a) {
  if (o.ring_capacity < 2 || !std::has_single_bit(o.ring_capacity)) return false;
  if (o.function_capacity == 0 || o.function_capacity > (uint32_t{1} << 24)) return false;
  if (o.names_bytes == 0 || o.names_bytes > kMaxRegionBytes) return false;
  const uint32_t journal = std::bit_ceil(std::clamp<uint32_t>(o.journal_capacity, 2, 1u << 24));
  a->journal_capacity = journal;
  a->ring_control = kHeaderBytes;
  a->ring_slots = AlignUp(a->ring_control + kRingControlBytes, 64);
  const uint64_t ring_bytes = uint64_t{o.ring_capacity} * kRingSlotBytes;
  if (ring_bytes > kMaxRegionBytes) return false;
  a->journal = AlignUp(a->ring_slots + ring_bytes, 64);
  a->functions = AlignUp(a->journal + uint64_t{journal} * sizeof(JournalEntry), 64);
  a->names = AlignUp(a->functions + uint64_t{o.function_capacity} * sizeof(FunctionDescriptor), 64);
  a->devices = AlignUp(a->names + o.names_bytes, 64);
  a->total = AlignUp(a->devices + uint64_t{kMaxDevices} * sizeof(DeviceDescriptor), kPage);
  return a->total <= kMaxRegionBytes;
}

template <typename T>
void StoreRelease(T& word, T value) {
  std::atomic_ref<T>(word).store(value, std::memory_order_release);
}
template <typename T>
void StoreRelaxed(T& word, T value) {
  std::atomic_ref<T>(word).store(value, std::memory_order_relaxed);
}

// Copies `text` into `out` (NUL-terminated, cut to fit).
template <size_t N>
void CopyText(char (&out)[N], std::string_view text) {
  const size_t n = std::min(text.size(), N - 1);
  std::memcpy(out, text.data(), n);
  std::memset(out + n, 0, N - n);
}

}  // namespace

uint64_t RegionWriter::RegionBytes(const RegionOptions& options) noexcept {
  Areas a{};
  return Place(options, &a) ? a.total : 0;
}

RegionWriter::RegionWriter(uint8_t* base, size_t size, int fd, bool mapped) noexcept
    : base_(base), size_(size), fd_(fd), mapped_(mapped) {}

RegionWriter::~RegionWriter() {
  if (mapped_) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

std::unique_ptr<RegionWriter> RegionWriter::Create(const RegionOptions& options,
                                                   std::string* error) noexcept {
  const uint64_t bytes = RegionBytes(options);
  if (bytes == 0) {
    *error = "the ring (" + std::to_string(options.ring_capacity) +
             " slots) does not fit in a black box of at most " +
             std::to_string(kMaxRegionBytes >> 20) + " MiB";
    return nullptr;
  }
  const auto fail = [error](const char* what) {
    *error = std::string(what) + ": " + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
    return nullptr;
  };
  const int fd = memfd_create("cuflight-blackbox", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return fail("memfd_create");
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return fail("ftruncate");
  }
  // Shrinking would make the collector's reads fault (SIGBUS): sealed before anyone sees it.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return fail("sealing the memfd");
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    errno = err;
    return fail("mmap");
  }
  std::unique_ptr<RegionWriter> writer(
      new (std::nothrow) RegionWriter(static_cast<uint8_t*>(base), bytes, fd, true));
  if (writer == nullptr) {
    munmap(base, bytes);
    close(fd);
    *error = "out of memory";
    return nullptr;
  }
  writer->Init(options);
  return writer;
}

std::unique_ptr<RegionWriter> RegionWriter::Over(void* memory,
                                                 const RegionOptions& options) noexcept {
  const uint64_t bytes = RegionBytes(options);
  if (bytes == 0 || memory == nullptr) return nullptr;
  std::unique_ptr<RegionWriter> writer(
      new (std::nothrow) RegionWriter(static_cast<uint8_t*>(memory), bytes, -1, false));
  if (writer != nullptr) writer->Init(options);
  return writer;
}

void RegionWriter::Init(const RegionOptions& options) noexcept {
  Areas a{};
  Place(options, &a);  // checked by the callers
  RegionHeader* h = header();
  h->version = kRegionVersion;
  h->header_bytes = kHeaderBytes;
  h->region_bytes = size_;
  h->pid = options.pid;
  h->ring_control_offset = a.ring_control;
  h->ring_slots_offset = a.ring_slots;
  h->ring_capacity = options.ring_capacity;
  h->ring_slot_bytes = kRingSlotBytes;
  h->ring_record_offset = kRingSlotRecordOffset;
  h->ring_record_bytes = kLaunchRecordBytes;
  h->journal_offset = a.journal;
  h->journal_capacity = a.journal_capacity;
  h->journal_entry_bytes = sizeof(JournalEntry);
  h->functions_offset = a.functions;
  h->function_capacity = options.function_capacity;
  h->function_entry_bytes = sizeof(FunctionDescriptor);
  h->names_offset = a.names;
  h->names_bytes = options.names_bytes;
  h->devices_offset = a.devices;
  h->device_capacity = kMaxDevices;
  h->device_entry_bytes = sizeof(DeviceDescriptor);
  ring_capacity_ = options.ring_capacity;
  journal_mask_ = a.journal_capacity - 1;
  journal_ = reinterpret_cast<JournalEntry*>(base_ + a.journal);
  functions_ = reinterpret_cast<FunctionDescriptor*>(base_ + a.functions);
  names_ = reinterpret_cast<char*>(base_ + a.names);
  devices_ = reinterpret_cast<DeviceDescriptor*>(base_ + a.devices);
  function_capacity_ = options.function_capacity;
  names_bytes_ = options.names_bytes;
  StoreRelease(h->magic, kRegionMagic);  // last: the header is whole
}

void* RegionWriter::ring_control() const noexcept { return base_ + header()->ring_control_offset; }

void* RegionWriter::ring_slots() const noexcept { return base_ + header()->ring_slots_offset; }

void RegionWriter::DescribeDevice(int32_t device, const DeviceFacts& facts) noexcept {
  DeviceDescriptor& d = devices_[device];
  if (std::atomic_ref<uint32_t>(d.described).load(std::memory_order_relaxed) != 0) return;
  const occupancy::DeviceLimits& l = facts.limits;
  d.ordinal = device;
  d.cc_major = l.cc_major;
  d.cc_minor = l.cc_minor;
  d.sm_count = l.sm_count;
  d.max_threads_per_block = l.max_threads_per_block;
  d.max_threads_per_sm = l.max_threads_per_sm;
  d.max_blocks_per_sm = l.max_blocks_per_sm;
  d.regs_per_sm = l.regs_per_sm;
  d.regs_per_block = l.regs_per_block;
  d.smem_per_sm = l.smem_per_sm;
  d.smem_per_block = l.smem_per_block;
  d.smem_per_block_optin = l.smem_per_block_optin;
  d.reserved_smem_per_block = l.reserved_smem_per_block;
  d.warp_size = l.warp_size;
  d.max_cluster_size = l.max_cluster_size;
  d.max_cluster_size_non_portable = l.max_cluster_size_non_portable;
  CopyText(d.name, facts.name);
  CopyText(d.uuid, facts.uuid);
  StoreRelease(d.described, uint32_t{1});
}

uint32_t RegionWriter::AddFunction(const FunctionFacts& f, int32_t device,
                                   const DeviceFacts& device_facts) noexcept {
  if (device < 0 || device >= static_cast<int32_t>(kMaxDevices)) {
    functions_refused_.fetch_add(1, std::memory_order_relaxed);
    return kNoFunctionDescriptor;
  }
  std::lock_guard<std::mutex> lock(mu_);
  // The device first, even when the function finds no room: the sender makes its device event
  // before the first kernel event on it, and a recovery must know that seq's event.
  DescribeDevice(device, device_facts);
  const uint64_t text = uint64_t{f.name.size()} + f.demangled.size();
  if (functions_used_ == function_capacity_ || f.name.size() > UINT32_MAX ||
      f.demangled.size() > UINT32_MAX || text > names_bytes_ - names_used_) {
    functions_refused_.fetch_add(1, std::memory_order_relaxed);
    return kNoFunctionDescriptor;
  }
  const uint32_t index = functions_used_;
  FunctionDescriptor& d = functions_[index];
  d.id = f.key;
  d.device = device;
  d.num_regs = f.num_regs;
  d.static_smem = f.static_smem;
  d.local_bytes = f.local_bytes;
  d.const_bytes = f.const_bytes;
  d.max_threads_per_block = f.max_threads_per_block;
  d.attributes_ok = f.attributes_ok ? 1 : 0;
  d.non_portable_cluster_allowed = f.non_portable_cluster_allowed ? 1 : 0;
  d.name_offset = names_used_;
  d.name_bytes = static_cast<uint32_t>(f.name.size());
  d.demangled_bytes = static_cast<uint32_t>(f.demangled.size());
  if (!f.name.empty()) std::memcpy(names_ + names_used_, f.name.data(), f.name.size());
  if (!f.demangled.empty()) {
    std::memcpy(names_ + names_used_ + f.name.size(), f.demangled.data(), f.demangled.size());
  }
  names_used_ += text;
  ++functions_used_;
  RegionHeader* h = header();
  StoreRelease(h->names_committed, names_used_);
  StoreRelease(h->functions_committed, functions_used_);  // last: the descriptor is whole
  return index;
}

void RegionWriter::AnnounceDevice(int32_t ordinal, uint64_t seq, int64_t ts_ns) noexcept {
  if (ordinal < 0 || ordinal >= static_cast<int32_t>(kMaxDevices)) return;
  DeviceDescriptor& d = devices_[ordinal];
  StoreRelaxed(d.announced_ts_ns, ts_ns);
  StoreRelease(d.announced, seq + 1);
}

void RegionWriter::Commit(uint64_t seq, uint64_t ring_pos, const void* record,
                          const SeqState& state) noexcept {
  RegionHeader* h = header();
  if (journal_head_ - journal_tail_ > journal_mask_) {  // full: forget the oldest
    ++journal_tail_;
    journal_overwritten_.fetch_add(1, std::memory_order_relaxed);
    StoreRelease(h->journal_tail, journal_tail_);
  }
  JournalEntry& e = journal_[journal_head_ & journal_mask_];
  StoreRelaxed(e.commit, uint64_t{0});
  // The entry is not whole from here until its commit word says so.
  std::atomic_thread_fence(std::memory_order_release);
  e.seq = seq;
  e.ring_pos = ring_pos;
  e.state_version = version_ + 1;
  e.state = state;
  std::memcpy(&e.record, record, sizeof(e.record));
  StoreRelease(e.commit, journal_head_ + 1);
  ++journal_head_;
  StoreRelease(h->journal_head, journal_head_);
  PublishState(state);
}

void RegionWriter::PublishState(const SeqState& state) noexcept {
  RegionHeader* h = header();
  const uint64_t version = version_ + 1;
  SeqState& slot = h->seq_state[version & 1];
  StoreRelaxed(slot.seq_base, state.seq_base);
  StoreRelaxed(slot.handled_pos, state.handled_pos);
  StoreRelaxed(slot.announced_devices, state.announced_devices);
  StoreRelease(h->state_version, version);  // the slot is whole before it is current
  version_ = version;
}

void RegionWriter::ReleaseJournal(uint64_t written_seq) noexcept {
  const uint64_t before = journal_tail_;
  while (journal_tail_ < journal_head_ &&
         journal_[journal_tail_ & journal_mask_].seq <= written_seq) {
    ++journal_tail_;
  }
  if (journal_tail_ != before) StoreRelease(header()->journal_tail, journal_tail_);
}

void RegionWriter::CloseAfterFork() noexcept {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace cuflight::blackbox
