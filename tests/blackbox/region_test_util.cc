#include "region_test_util.h"

#include <gtest/gtest.h>

#include <cstring>

#include "cuflight/occupancy/device_presets.h"

namespace cuflight::blackbox::testing {

WireLaunchRecord Launch(uint64_t correlation, uint32_t desc, int8_t device) {
  WireLaunchRecord r;
  r.ts_ns = 1'732'000'000'000'000'000 + static_cast<int64_t>(correlation);
  r.context = 1;
  r.stream = 7;
  r.correlation_id = correlation;
  r.function = 0xdead0000 + desc;  // the producer's pointer: meaningless to a reader
  r.grid[0] = 264;
  r.block[0] = 256;
  r.tid = 4243;
  r.function_desc = desc;
  r.device = device;
  r.api = LaunchApi::kLaunchKernel;
  return r;
}

WireLaunchRecord ApiError(uint64_t correlation) {
  WireLaunchRecord r;
  r.kind = RecordKind::kApiError;
  r.ts_ns = 1'732'000'000'000'000'000 + static_cast<int64_t>(correlation);
  r.correlation_id = correlation;
  r.cbid = 17;
  r.result = 2;  // CUDA_ERROR_OUT_OF_MEMORY
  return r;
}

FunctionFacts Kernel32() {
  FunctionFacts f;
  f.key = 11;
  f.attributes_ok = true;
  f.num_regs = 32;
  f.max_threads_per_block = 1024;
  f.name = "_Z6kernelPfi";
  f.demangled = "kernel(float*, int)";
  return f;
}

FunctionFacts Gemm64() {
  FunctionFacts f;
  f.key = 12;
  f.attributes_ok = true;
  f.num_regs = 64;
  f.local_bytes = 16;
  f.const_bytes = 128;
  f.max_threads_per_block = 1024;
  f.name = "_Z4gemmv";
  f.demangled = "gemm()";
  return f;
}

DeviceFacts H100() {
  DeviceFacts d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.uuid = "GPU-8f6a7b3e-1c2d-4e5f-9a0b-123456789abc";
  d.limits = occupancy::FindDevicePreset("h100-sxm")->limits;
  return d;
}

TestRegion::TestRegion(uint32_t ring_capacity, uint32_t journal_capacity,
                       uint32_t function_capacity, uint64_t names_bytes) {
  RegionOptions options;
  options.ring_capacity = ring_capacity;
  options.journal_capacity = journal_capacity;
  options.function_capacity = function_capacity;
  options.names_bytes = names_bytes;
  options.pid = 4242;
  size = RegionWriter::RegionBytes(options);
  EXPECT_GT(size, 0u);
  memory.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, size)));
  std::memset(memory.get(), 0, size);
  writer = RegionWriter::Over(memory.get(), options);
  EXPECT_NE(writer, nullptr);
  ring = std::make_unique<Ring>(ring_capacity,
                                Ring::Storage{writer->ring_control(), writer->ring_slots()});
}

Recovered RecoverAll(std::span<const uint8_t> bytes, std::optional<uint64_t> after_seq,
                     int32_t pid) {
  Recovered out;
  RecoveryOptions options;
  options.after_seq = after_seq;
  options.pid = pid;
  out.result = Recover(bytes, options, [&out](uint64_t seq, std::string_view line) {
    out.seqs.push_back(seq);
    schema::DecodeResult d = schema::Decode(line);
    EXPECT_TRUE(d.ok()) << d.message << ": " << line;
    if (d.ok()) {
      EXPECT_EQ(schema::HeaderOf(d.event).seq, seq);
      out.events.push_back(std::move(d.event));
    }
  });
  return out;
}

}  // namespace cuflight::blackbox::testing
