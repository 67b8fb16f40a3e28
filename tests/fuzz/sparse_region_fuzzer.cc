// libFuzzer target: the collector's recovery as the collector runs it, on arbitrary regions in a
// memfd (sparse, as a producer's is: only what it wrote is allocated), read through
// cuflight::blackbox::FdSource a step at a time (RegionRecovery::Step), as
// collector/daemon/collector.cc does. Each input makes one region:
//   bytes 0-3: its layout: ring capacity 2 << (b0 % 17) (up to 131,072 slots, 16 MiB), journal
//              capacity 2 << (b1 % 15), 1 + 64 * b2 function descriptors, names area
//              4096 << (b3 % 14) bytes (halved until the region fits in kMaxRegionBytes)
//   byte 4:    after_seq (bit 7: none; else its value mod 8)
//   byte 5:    each Step's budget: 1 << (b5 % 13) entries, 1 KiB << (b5 / 16) bytes of lines
//   byte 6:    claims written into the header and ring: bit 0 every ring slot in use, bit 1 the
//              whole names area committed, bit 2 a full journal, bit 3 every descriptor in use
//   then, repeatedly: a 3-byte little-endian offset (below 0x800000: into the first 32 KiB,
//              where the header, the ring's words and the first slots are; else scaled onto the
//              region), a length byte n (n mod 32 + 1) and n bytes, written with pwrite.
// The region starts as the injected library leaves one: a function, a device announced under
// seq 1 and four committed launches in the ring.
// abort() when a promise is broken:
//   - memory: the heap grows during the recovery by more than the reader's documented bound
//     (region_reader.h: two line buffers of max_line_bytes and about 100 KiB, plus the source's
//     window), whatever the region claims (measured with the sanitizer's malloc and free hooks);
//   - pages: the memfd has more pages allocated after the recovery than before it (reading a
//     hole must allocate nothing, fstat st_blocks);
//   - the stream: seqs out of order or at or below after_seq, a line without its '\n' or longer
//     than max_line_bytes, the stream's end before a seq emitted, events with an error;
//   - progress: more Steps than the region has entries.
//
// Build and run: scripts/fuzz run --fuzzer sparse_region_fuzzer.
#include <sanitizer/allocator_interface.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "cuflight/blackbox/region_layout.h"
#include "cuflight/blackbox/region_reader.h"
#include "cuflight/blackbox/region_source.h"
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/occupancy/device_presets.h"

namespace {

using namespace cuflight::blackbox;  // NOLINT(google-build-using-namespace)

[[noreturn]] void Broken(const char* what) {
  std::fprintf(stderr, "sparse_region_fuzzer: %s\n", what);
  std::abort();
}

// Net heap bytes allocated while `tracking`, and their most.
std::atomic<bool> tracking{false};
std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};

void OnMalloc(const volatile void*, size_t size) {
  if (!tracking.load(std::memory_order_relaxed)) return;
  const int64_t now = live.fetch_add(static_cast<int64_t>(size)) + static_cast<int64_t>(size);
  if (now > peak.load(std::memory_order_relaxed)) peak.store(now, std::memory_order_relaxed);
}

void OnFree(const volatile void* p) {
  if (!tracking.load(std::memory_order_relaxed) || p == nullptr) return;
  live.fetch_sub(static_cast<int64_t>(__sanitizer_get_allocated_size(p)));
}

uint64_t AllocatedBlocks(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) Broken("fstat");
  return static_cast<uint64_t>(st.st_blocks);
}

void Write(int fd, uint64_t offset, const void* bytes, size_t n) {
  if (pwrite(fd, bytes, n, static_cast<off_t>(offset)) != static_cast<ssize_t>(n)) {
    Broken("pwrite");
  }
}

constexpr size_t kMaxLineBytes = 16 << 10;
// region_reader.h: one line buffer and one function's names (each at most max_line_bytes), the
// device descriptors (64 x 512 bytes), their engines and a 256-entry occupancy cache (about
// 100 KiB together); FdSource's window. 64 KiB of slack for the containers' own rounding.
constexpr int64_t kMemoryBound =
    2 * (kMaxLineBytes + 1) + (100 << 10) + FdSource::kWindowBytes + (64 << 10);

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  __sanitizer_install_malloc_and_free_hooks(OnMalloc, OnFree);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 7) return 0;
  RegionOptions o;
  o.ring_capacity = uint32_t{2} << (data[0] % 17);
  o.journal_capacity = uint32_t{2} << (data[1] % 15);
  o.function_capacity = 1 + 64 * uint32_t{data[2]};
  o.names_bytes = uint64_t{4096} << (data[3] % 14);
  o.pid = 4242;
  while (RegionWriter::RegionBytes(o) == 0 && o.names_bytes > 4096) o.names_bytes /= 2;
  std::string error;
  auto region = RegionWriter::Create(o, &error);
  if (region == nullptr) return 0;  // a layout that does not fit
  const int fd = region->fd();
  const auto h = *reinterpret_cast<const RegionHeader*>(region->bytes().data());

  // What the injected library leaves: a function, its device announced, four launches.
  DeviceFacts device;
  device.name = "NVIDIA H100 80GB HBM3";
  device.uuid = "GPU-8f6a7b3e-1c2d-4e5f-9a0b-123456789abc";
  device.limits = cuflight::occupancy::FindDevicePreset("h100-sxm")->limits;
  FunctionFacts f;
  f.key = 1;
  f.attributes_ok = true;
  f.num_regs = 32;
  f.max_threads_per_block = 1024;
  f.name = "_Z6kernelPfi";
  f.demangled = "kernel(float*, int)";
  const uint32_t k = region->AddFunction(f, 0, device);
  region->AnnounceDevice(0, 1, 1);
  region->PublishState({2, 0, 1});
  const uint64_t records = std::min<uint64_t>(4, o.ring_capacity);
  for (uint64_t pos = 0; pos < records; ++pos) {
    uint8_t slot[kRingSlotBytes] = {};
    const uint64_t turn = pos + 1;
    WireLaunchRecord r;
    r.ts_ns = 1'732'000'000'000'000'000 + static_cast<int64_t>(pos);
    r.correlation_id = 100 + pos;
    r.grid[0] = 264;
    r.block[0] = 256;
    r.function_desc = k;
    std::memcpy(slot, &turn, sizeof(turn));
    std::memcpy(slot + kRingSlotRecordOffset, &r, sizeof(r));
    Write(fd, h.ring_slots_offset + pos * kRingSlotBytes, slot, sizeof(slot));
  }
  Write(fd, h.ring_control_offset + kRingEnqueueOffset, &records, sizeof(records));

  // The claims.
  const uint8_t claims = data[6];
  if ((claims & 1) != 0) {
    const uint64_t all = o.ring_capacity;
    Write(fd, h.ring_control_offset + kRingEnqueueOffset, &all, sizeof(all));
  }
  if ((claims & 2) != 0) {
    Write(fd, offsetof(RegionHeader, names_committed), &h.names_bytes, sizeof(h.names_bytes));
  }
  if ((claims & 4) != 0) {
    const uint64_t head = h.journal_capacity;
    Write(fd, offsetof(RegionHeader, journal_head), &head, sizeof(head));
  }
  if ((claims & 8) != 0) {
    Write(fd, offsetof(RegionHeader, functions_committed), &h.function_capacity,
          sizeof(h.function_capacity));
  }
  // The patches.
  const uint64_t region_bytes = region->bytes().size();
  size_t i = 7;
  while (i + 4 <= size) {
    const uint32_t raw =
        uint32_t{data[i]} | uint32_t{data[i + 1]} << 8 | uint32_t{data[i + 2]} << 16;
    const uint64_t at =
        raw < 0x800000 ? raw % 32768 : uint64_t{raw - 0x800000} * region_bytes / 0x800000;
    size_t n = data[i + 3] % 32 + 1;
    i += 4;
    n = std::min({n, size - i, static_cast<size_t>(region_bytes - std::min(at, region_bytes))});
    if (n > 0) Write(fd, at, data + i, n);
    i += n;
  }

  RecoveryOptions options;
  if ((data[4] & 0x80) == 0) options.after_seq = data[4] % 8;
  options.max_line_bytes = kMaxLineBytes;
  options.max_total_bytes = 1 << 20;
  RegionRecovery::Budget budget;
  budget.entries = uint64_t{1} << (data[5] % 13);
  budget.bytes = uint64_t{1024} << (data[5] / 16);
  // Each Step does at least one entry's work or passes a phase: no more Steps than entries
  // (the journal is read twice) and phases, as the header says after the patches.
  RegionHeader patched{};
  if (pread(fd, &patched, sizeof(patched), 0) != static_cast<ssize_t>(sizeof(patched))) {
    Broken("pread");
  }
  const uint64_t max_steps =
      uint64_t{patched.ring_capacity} + 2 * (uint64_t{patched.journal_capacity} + 1) + 8;

  const uint64_t blocks = AllocatedBlocks(fd);
  uint64_t last = 0;
  bool any = false;
  uint64_t total = 0;
  bool done = false;
  uint64_t steps = 0;
  live = 0;
  peak = 0;
  tracking = true;
  {
    FdSource source(fd, region_bytes);
    RegionRecovery recovery(&source, options);
    const RegionRecovery::Emit emit = [&](uint64_t seq, std::string_view line) {
      if (any && seq <= last) Broken("seqs out of order");
      if (options.after_seq && seq <= *options.after_seq) Broken("a seq the log holds");
      if (line.empty() || line.back() != '\n') Broken("a line without its newline");
      if (line.size() > options.max_line_bytes) Broken("a line past max_line_bytes");
      total += line.size();
      if (total > options.max_total_bytes) Broken("past max_total_bytes");
      any = true;
      last = seq;
    };
    while (!done) {
      if (++steps > max_steps) {
        std::fprintf(stderr, "sparse_region_fuzzer: %llu steps, ring %u, journal %u\n",
                     static_cast<unsigned long long>(steps), patched.ring_capacity,
                     patched.journal_capacity);
        Broken("more steps than the region has entries");
      }
      done = recovery.Step(budget, emit);
    }
    const RecoveryResult& result = recovery.result();
    if (result.error == RegionError::kNone && any && result.end_seq <= last) {
      Broken("the stream ends before a seq it emitted");
    }
    if (result.error != RegionError::kNone && any) Broken("events emitted with an error");
  }
  tracking = false;
  if (peak.load() > kMemoryBound) {
    std::fprintf(stderr, "sparse_region_fuzzer: the heap grew by %lld bytes (bound %lld)\n",
                 static_cast<long long>(peak.load()), static_cast<long long>(kMemoryBound));
    Broken("memory beyond the reader's bound");
  }
  if (AllocatedBlocks(fd) != blocks) Broken("reading the region allocated its pages");
  return 0;
}
