// The log reader's kernel line cache gives schema::Decode's result for every line: lines of the
// encoder's layout taken from the cache, lines whose head or tail differ in any way, tails that
// could change a head field, and more configurations than the cache holds.
#include "kernel_line_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "alloc_counter.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/events.h"
#include "report_test_events.h"

namespace cuflight::logread::internal {
namespace {

using report::testing::Kernel;
using report::testing::KernelSpec;
using report::testing::KernelTime;
using report::testing::Line;

// Decodes `line` through the cache and through schema::Decode (the reference) and expects the same
// result: the verdict, the header, the message and, for a valid line, every field.
void ExpectAsDecode(KernelLineCache& cache, std::string_view line) {
  schema::DecodeResult got;
  const schema::Reason reason = cache.Decode(line, &got);
  const schema::DecodeResult want = schema::Decode(line);
  ASSERT_EQ(reason, got.reason) << line;
  ASSERT_EQ(got.reason, want.reason) << line;
  ASSERT_EQ(got.header, want.header) << line;
  ASSERT_EQ(got.message, want.message) << line;
  if (want.ok()) {
    ASSERT_TRUE(got.event == want.event) << line;
  }
}

KernelSpec Gemm() {
  KernelSpec spec;
  spec.name = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmILi128EEEEEvNT_6ParamsE";
  spec.demangled = "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<128>>(Params)";
  spec.grid = {132, 16, 1};
  spec.block = {256, 1, 1};
  spec.regs = 136;
  spec.static_smem = 36864;
  spec.occupancy.max_active_blocks = 1;
  spec.occupancy.active_warps = 8;
  spec.occupancy.max_warps = 64;
  spec.occupancy.occupancy = 0.125;
  return spec;
}

TEST(KernelLineCacheTest, RepeatedConfigurationsComeFromTheCacheWithTheirOwnHead) {
  KernelLineCache cache;
  KernelSpec other = Gemm();
  other.grid = {64, 1, 1};
  for (uint64_t i = 0; i < 100; ++i) {
    // Heads differ in every member the cache reads: ts_ns, seq, correlation_id, and the stream.
    KernelSpec spec = i % 2 == 0 ? Gemm() : other;
    spec.stream = 7 + i % 3;
    spec.device = static_cast<int32_t>(i % 2);
    ExpectAsDecode(cache, Line(Kernel(4000 + static_cast<int32_t>(i % 2), 10 + i,
                                      1'763'700'000'000'000'000 + static_cast<int64_t>(i) * 997,
                                      500 + i, spec)));
    ExpectAsDecode(cache, Line(KernelTime(4000, 1000 + i, 500 + i, 1234)));
  }
  // Two configurations: decoded once each, then 98 kernel lines from the cache. If the
  // encoder's member order stops matching the cache's head, hits fall to 0.
  EXPECT_EQ(cache.hits(), 98u);
  EXPECT_EQ(cache.misses(), 102u);  // 2 kernel lines and the 100 kernel_time lines
  EXPECT_EQ(cache.last_type(), "kernel_time");
}

// A result the cache fills from a cached tail after a line of another type reuses the string
// buffers the result's kernel event had before (kept by LineDecoder, which the cache shares).
TEST(KernelLineCacheTest, ACachedKernelAfterAnotherTypeAllocatesNothing) {
  KernelLineCache cache;
  const std::string kernel = Line(Kernel(4000, 5, 1'000'000, 77, Gemm()));
  const std::string other_lines[] = {Line(KernelTime(4000, 6, 77, 1234)),
                                     Line(report::testing::Device(4000, 7, 0, "NVIDIA H100"))};
  schema::DecodeResult reused;
  ASSERT_EQ(cache.Decode(kernel, &reused), schema::Reason::kOk);
  for (const std::string& other : other_lines) {
    SCOPED_TRACE(other);
    ASSERT_EQ(cache.Decode(other, &reused), schema::Reason::kOk);
    const int64_t before = test_support::AllocationsOnThisThread();
    ASSERT_EQ(cache.Decode(kernel, &reused), schema::Reason::kOk);
    EXPECT_EQ(test_support::AllocationsOnThisThread(), before);
    EXPECT_TRUE(reused.event == schema::Decode(kernel).event);
  }
  EXPECT_EQ(cache.hits(), 2u);
}

TEST(KernelLineCacheTest, HeadsTheCacheDoesNotReadGoToTheDecoder) {
  KernelLineCache cache;
  const std::string line = Line(Kernel(4000, 5, 1'000'000, 77, Gemm()));
  ExpectAsDecode(cache, line);
  ExpectAsDecode(cache, line);
  ASSERT_EQ(cache.hits(), 1u);
  const std::string_view seq = "\"seq\":5,";
  const size_t at = line.find(seq);
  ASSERT_NE(at, std::string::npos);
  const auto with_seq = [&](std::string_view text) {
    return line.substr(0, at) + "\"seq\":" + std::string(text) + "," + line.substr(at + seq.size());
  };
  // JSON forbids leading zeros and signs other than '-'; 5.0 and 5e0 are integers to the
  // decoder; -1 and 2^64 are out of range; a string is the wrong type.
  // 19 digits are read directly, 20 (2^64 - 1 and beyond) through the overflow check.
  for (const char* text : {"05", "-0", "-1", "+5", "5.0", "5e0", "18446744073709551616",
                           "18446744073709551615", "9999999999999999999", "99999999999999999999",
                           "100000000000000000000", "\"5\"", " 5", "null"}) {
    SCOPED_TRACE(text);
    ExpectAsDecode(cache, with_seq(text));
  }
  // pid is count32: 2147483647 is the largest, one more is out of range.
  const size_t pid_at = line.find("\"pid\":4000");
  ASSERT_NE(pid_at, std::string::npos);
  for (const char* pid : {"2147483647", "2147483648", "0", "00"}) {
    SCOPED_TRACE(pid);
    ExpectAsDecode(cache, line.substr(0, pid_at) + "\"pid\":" + pid +
                              line.substr(pid_at + std::string_view("\"pid\":4000").size()));
  }
  // A byte order mark, leading white space, another member order, an escaped name.
  ExpectAsDecode(cache, "\xEF\xBB\xBF" + line);
  ExpectAsDecode(cache, " " + line);
  std::string swapped = line;
  swapped.replace(swapped.find("\"type\":\"kernel\",\"version\":1"), 27,
                  "\"version\":1,\"type\":\"kernel\"");
  ExpectAsDecode(cache, swapped);
  std::string escaped = line;
  escaped.replace(escaped.find("\"tid\""), 5, "\"t\\u0069d\"");
  ExpectAsDecode(cache, escaped);
}

TEST(KernelLineCacheTest, ATailThatRepeatsAHeadMemberIsNeverTakenFromTheCache) {
  // The last of a repeated name counts: this tail's seq (and stream) win over any head's. The
  // first line's head agrees with them, so its decode alone cannot tell; a cached decode would
  // give the next lines their own seq instead of the tail's 1.
  KernelLineCache cache;
  for (const std::string_view repeat :
       {"\"seq\":1,", "\"stream\":0,", "\"t\\u0079pe\":\"kernel\","}) {
    SCOPED_TRACE(repeat);
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      std::string line = Line(Kernel(4000, seq, 1'000'000, 77, Gemm()));
      line.insert(line.find("\"api\""), repeat);
      ExpectAsDecode(cache, line);
    }
  }
  EXPECT_EQ(cache.hits(), 0u);
}

TEST(KernelLineCacheTest, EveryByteOfACachedTailChangedIsDecodedAfresh) {
  // Prime the cache with a line, then change each byte of its tail in turn: a different tail is
  // never the cached one, whatever the change makes of the line (valid, out of range, malformed).
  KernelLineCache cache;
  KernelSpec spec = Gemm();
  spec.occupancy.regs_for_next_block = 128;
  const std::string line = Line(Kernel(4000, 1, 1'000'000, 77, spec));
  ExpectAsDecode(cache, line);
  const size_t tail = line.find("\"api\"");
  ASSERT_NE(tail, std::string::npos);
  for (size_t i = tail; i < line.size(); ++i) {
    for (const char c : {'0', '9', '"', ',', '}', ' ', '\n', '\\'}) {
      if (line[i] == c) continue;
      std::string changed = line;
      changed[i] = c;
      SCOPED_TRACE(changed);
      ExpectAsDecode(cache, changed);
      ExpectAsDecode(cache, line);  // the original, from the cache again
    }
  }
  EXPECT_GT(cache.hits(), 1000u);
}

TEST(KernelLineCacheTest, MoreConfigurationsThanTheCacheHoldsAreAllDecodedRight) {
  KernelLineCache cache;
  const size_t configurations = 3 * KernelLineCache::kSets * KernelLineCache::kWays;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < configurations; ++i) {
      KernelSpec spec = Gemm();
      spec.grid = {static_cast<uint32_t>(i + 1), 1, 1};
      ExpectAsDecode(cache, Line(Kernel(4000, round * configurations + i, 1'000'000, i, spec)));
    }
  }
}

}  // namespace
}  // namespace cuflight::logread::internal
