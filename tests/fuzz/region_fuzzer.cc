// libFuzzer target: the collector's black box reader (cuflight::blackbox::Recover) on damaged
// regions. A valid region is built once (functions, a device, journal entries, records in the
// ring, as the injected library leaves them); each input is a list of patches to a copy of it:
//   byte 0: after_seq (0xff: none; else its value mod 8)
//   then, repeatedly: a 2-byte little-endian offset (scaled onto the region, the first pages
//   more densely), a length byte n (n mod 16 + 1) and n bytes written there.
// abort() when the reader breaks a promise: emits out of seq order, at or below after_seq, a line
// without its '\n', longer than max_line_bytes or past max_total_bytes in all, or ends the stream
// before a seq it emitted. AddressSanitizer catches reads outside the region.
//
// Build and run: scripts/fuzz run --fuzzer region_fuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "cuflight/blackbox/region_layout.h"
#include "cuflight/blackbox/region_reader.h"
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/inject/ring.h"
#include "cuflight/occupancy/device_presets.h"
#include "cuflight/schema/validator.h"

namespace {

using namespace cuflight::blackbox;  // NOLINT(google-build-using-namespace)
using Ring = cuflight::inject::MpscRing<WireLaunchRecord>;

[[noreturn]] void Broken(const char* what) {
  std::fprintf(stderr, "region_fuzzer: %s\n", what);
  std::abort();
}

std::vector<uint8_t> MakeBaseline() {
  RegionOptions options;
  options.ring_capacity = 8;
  options.journal_capacity = 4;
  options.function_capacity = 4;
  options.names_bytes = 256;
  options.pid = 4242;
  const uint64_t size = RegionWriter::RegionBytes(options);
  void* memory = std::aligned_alloc(4096, size);
  std::memset(memory, 0, size);
  auto writer = RegionWriter::Over(memory, options);
  Ring ring(8, Ring::Storage{writer->ring_control(), writer->ring_slots()});
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
  const uint32_t k = writer->AddFunction(f, 0, device);
  f.num_regs = 64;
  f.name = "_Z4gemmv";
  f.demangled = "gemm()";
  const uint32_t g = writer->AddFunction(f, 0, device);
  writer->PublishState({1, 0, 0});
  for (uint64_t i = 0; i < 7; ++i) {
    WireLaunchRecord r;
    r.ts_ns = 1'732'000'000'000'000'000 + static_cast<int64_t>(i);
    r.correlation_id = 100 + i;
    r.grid[0] = 264;
    r.block[0] = i == 3 ? 1024 : 256;
    r.cluster[0] = i == 5 ? 2 : 0;
    r.function_desc = i % 2 == 0 ? k : g;
    r.kind = i == 6 ? RecordKind::kApiError : RecordKind::kLaunch;
    r.driver_max_active_blocks = static_cast<int16_t>(i == 4 ? 3 : -1);
    ring.TryPush(r);
  }
  writer->AnnounceDevice(0, 1, 1);
  writer->PublishState({2, 0, 1});
  for (uint64_t seq = 2; seq <= 4; ++seq) {
    WireLaunchRecord r;
    uint64_t pos = 0;
    ring.TryPeek(&r, &pos);
    writer->Commit(seq, pos, &r, {seq + 1, pos + 1, 1});
    ring.Consume();
  }
  writer->ReleaseJournal(2);
  std::vector<uint8_t> bytes(static_cast<const uint8_t*>(memory),
                             static_cast<const uint8_t*>(memory) + size);
  writer.reset();
  std::free(memory);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<uint8_t> baseline = MakeBaseline();
  if (size == 0) return 0;
  std::vector<uint8_t> region = baseline;
  RecoveryOptions options;
  if (data[0] != 0xff) options.after_seq = data[0] % 8;
  options.max_line_bytes = 4096;
  options.max_total_bytes = 64 << 10;
  size_t i = 1;
  while (i + 3 <= size) {
    const uint32_t raw = uint32_t{data[i]} | uint32_t{data[i + 1]} << 8;
    // Half the offsets land in the first 8 KiB (header, ring control and slots, journal),
    // the rest anywhere.
    const size_t at = raw < 0x8000 ? raw % 8192 : (raw - 0x8000) * region.size() / 0x8000;
    const size_t n = data[i + 2] % 16 + 1;
    i += 3;
    for (size_t k = 0; k < n && i < size; ++k, ++i) {
      if (at + k < region.size()) region[at + k] = data[i];
    }
  }
  // A region shorter than it says it is, now and then.
  const size_t length = (size % 7 == 0) ? region.size() / 2 : region.size();
  uint64_t last = 0;
  bool any = false;
  uint64_t total = 0;
  const RecoveryResult result = Recover(std::span<const uint8_t>(region.data(), length), options,
                                        [&](uint64_t seq, std::string_view line) {
                                          if (any && seq <= last) Broken("seqs out of order");
                                          if (options.after_seq && seq <= *options.after_seq)
                                            Broken("a seq the log holds");
                                          if (line.empty() || line.back() != '\n')
                                            Broken("a line without its newline");
                                          if (line.size() > options.max_line_bytes)
                                            Broken("a line past max_line_bytes");
                                          total += line.size();
                                          if (total > options.max_total_bytes)
                                            Broken("past max_total_bytes");
                                          // What the collector does next with it.
                                          cuflight::schema::LineInfo info;
                                          cuflight::schema::ValidateError error;
                                          (void)cuflight::schema::Validate(line, &info, &error);
                                          any = true;
                                          last = seq;
                                        });
  if (result.error == RegionError::kNone && any && result.end_seq <= last) {
    Broken("the stream ends before a seq it emitted");
  }
  if (result.error != RegionError::kNone && any) Broken("events emitted with an error");
  return 0;
}
