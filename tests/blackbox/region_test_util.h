// A producer's black box in test memory: the writer over a zeroed buffer, the launch ring over
// its storage, and records as the injected library's recorder makes them.
#ifndef CUFLIGHT_TESTS_BLACKBOX_REGION_TEST_UTIL_H_
#define CUFLIGHT_TESTS_BLACKBOX_REGION_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cuflight/blackbox/launch_record.h"
#include "cuflight/blackbox/region_layout.h"
#include "cuflight/blackbox/region_reader.h"
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/inject/ring.h"
#include "cuflight/schema/decoder.h"

namespace cuflight::blackbox::testing {

using Ring = inject::MpscRing<WireLaunchRecord>;
static_assert(sizeof(Ring::Slot) == kRingSlotBytes && offsetof(Ring::Slot, data) == 8);
static_assert(sizeof(Ring::Control) == kRingControlBytes);

// A launch on device 0 of the function with descriptor `desc`: block 256, grid 264 (two blocks
// per SM of an H100), correlation id `correlation`.
WireLaunchRecord Launch(uint64_t correlation, uint32_t desc, int8_t device = 0);
WireLaunchRecord ApiError(uint64_t correlation);

// kernel(float*, int) with 32 registers per thread; gemm() with 64.
FunctionFacts Kernel32();
FunctionFacts Gemm64();
// An H100 SXM (the occupancy presets), device 0.
DeviceFacts H100();

struct TestRegion {
  explicit TestRegion(uint32_t ring_capacity = 8, uint32_t journal_capacity = 8,
                      uint32_t function_capacity = 16, uint64_t names_bytes = 4096);
  std::span<uint8_t> bytes() { return {memory.get(), size}; }
  RegionHeader& header() { return *reinterpret_cast<RegionHeader*>(memory.get()); }
  uint8_t* slot(uint64_t pos) {
    return memory.get() + header().ring_slots_offset + (pos % ring->capacity()) * kRingSlotBytes;
  }

  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], Free> memory;
  size_t size = 0;
  std::unique_ptr<RegionWriter> writer;
  std::unique_ptr<Ring> ring;
};

struct Recovered {
  RecoveryResult result;
  std::vector<uint64_t> seqs;
  std::vector<schema::OwnedEvent> events;  // decoded; a line Decode refuses fails the test
};
Recovered RecoverAll(std::span<const uint8_t> bytes, std::optional<uint64_t> after_seq,
                     int32_t pid = 4242);

}  // namespace cuflight::blackbox::testing

#endif  // CUFLIGHT_TESTS_BLACKBOX_REGION_TEST_UTIL_H_
