// The report's small pieces against hand calculation: percentiles, formatting, kernel-name
// shortening, time bounds, CSV quoting, and the advice rules.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "cuflight/report/advice.h"
#include "cuflight/report/duration_stats.h"
#include "cuflight/report/kernel_names.h"
#include "cuflight/report/review.h"
#include "cuflight/report/text_format.h"
#include "report_test_events.h"

namespace cuflight::report {
namespace {

using schema::Resource;

TEST(ReportFormat, NearestRankPercentiles) {
  // Five durations, sorted 1..5: p50 = rank ceil(2.5) = 3 -> 3; p99 = rank ceil(4.95) = 5 -> 5.
  std::vector<uint64_t> five = {5, 1, 4, 2, 3};
  DurationStats s = ComputeDurationStats(&five);
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.total_ns, 15u);
  EXPECT_DOUBLE_EQ(s.mean_ns, 3.0);
  EXPECT_EQ(s.p50_ns, 3u);
  EXPECT_EQ(s.p99_ns, 5u);
  EXPECT_EQ(s.min_ns, 1u);
  EXPECT_EQ(s.max_ns, 5u);
  // 1..100: p50 = rank 50, p99 = rank 99 (0.99 x 100 is exactly rank 99, not 100).
  std::vector<uint64_t> hundred;
  for (uint64_t i = 100; i >= 1; --i) hundred.push_back(i * 10);
  s = ComputeDurationStats(&hundred);
  EXPECT_EQ(s.p50_ns, 500u);
  EXPECT_EQ(s.p99_ns, 990u);
  // One value is every percentile.
  std::vector<uint64_t> one = {42};
  s = ComputeDurationStats(&one);
  EXPECT_EQ(s.p50_ns, 42u);
  EXPECT_EQ(s.p99_ns, 42u);
}

TEST(ReportFormat, Durations) {
  EXPECT_EQ(FormatDuration(850), "850ns");
  EXPECT_EQ(FormatDuration(12345), "12.3us");
  EXPECT_EQ(FormatDuration(1234567), "1.23ms");
  EXPECT_EQ(FormatDuration(123456789), "123ms");
  EXPECT_EQ(FormatDuration(4560000000), "4.56s");
  EXPECT_EQ(FormatDuration(999999), "1.00ms");
}

TEST(ReportFormat, PercentRoundsHalfUp) {
  EXPECT_EQ(FormatPercent(0.875), "88%");
  EXPECT_EQ(FormatPercent(0.625), "63%");
  EXPECT_EQ(FormatPercent(1.0), "100%");
  EXPECT_EQ(FormatPercent(0.0), "0%");
}

TEST(ReportFormat, BytesAreNeverRoundedUp) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(49152), "48 KiB");
  EXPECT_EQ(FormatBytes(41472), "40.5 KiB");
  EXPECT_EQ(FormatBytes(41983), "40.9 KiB");  // 40.999 KiB floors to 40.9
}

TEST(ReportFormat, KernelNamesShortenInSteps) {
  const std::string name =
      "void cutlass::gemm::kernel::Gemm<cutlass::half_t, 128, 256>(cutlass::Params const&, int)";
  EXPECT_EQ(ShortenKernelName(name, 200), name);
  // Return type and parameters go (55 bytes); then the namespaces, keeping the arguments (22);
  // then, the template being the only one shown, its builtin-like arguments (4).
  EXPECT_EQ(ShortenKernelName(name, 60), "cutlass::gemm::kernel::Gemm<cutlass::half_t, 128, 256>");
  EXPECT_EQ(ShortenKernelName(name, 40), "Gemm<half_t, 128, 256>");
  EXPECT_EQ(ShortenKernelName(name, 20), "Gemm");
  EXPECT_EQ(ShortenKernelName("a_very_long_kernel_name_without_scopes", 16), "a_very_long_k...");
}

// PyTorch's elementwise kernels for add, GELU and mul (names as CUPTI demangles them, from a
// torch 2.x trace): one template, told apart by the functor argument and the Array's size.
const std::vector<std::string> kElementwise = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, "
    "at::detail::Array<char*, 3>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl("
    "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::"
    "{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
    "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, "
    "at::detail::Array<char*, 2>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, "
    "float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> "
    ">, at::detail::Array<char*, 3>)"};

TEST(ReportFormat, TemplatedNamesKeepWhatTellsThemApart) {
  // 60 columns. The tree diff (form 3) keeps the functors (each another template: shown by name,
  // builtin types and numbers gone: "AddFunctor", "GeluCUDAKernelImpl::lambda",
  // "BinaryFunctor<MulFunctor>") and Array<char*, 3> against <char*, 2> as "Array<..., 3>"; the
  // shared 4 is "...": Add's is 61 bytes. Form 4 drops the shared places: Add's is 56; GELU's
  // (72) and Mul's (71) have their template's name cut to what their 43 and 42 bytes leave.
  EXPECT_EQ(ShortenKernelNames(kElementwise, 60).names,
            (std::vector<std::string>{
                "vectorized_elementwise_kernel<AddFunctor, Array<..., 3>>",
                "vectorized_ele...<GeluCUDAKernelImpl::lambda, Array<..., 2>>",
                "vectorized_elem...<BinaryFunctor<MulFunctor>, Array<..., 3>>"}));
  // 24 columns (the report's narrowest): even the differences do not fit: ids and a legend.
  const ShortKernelNames narrow = ShortenKernelNames(kElementwise, 24);
  EXPECT_EQ(narrow.names,
            (std::vector<std::string>{"K1 vectorized_element...", "K2 vectorized_element...",
                                      "K3 vectorized_element..."}));
  ASSERT_EQ(narrow.legend.size(), 3u);
  EXPECT_EQ(narrow.legend[0].name, "vectorized_elementwise_kernel<AddFunctor, Array<..., 3>>");
  // Wide enough: whole names.
  EXPECT_EQ(ShortenKernelNames(kElementwise, 1000).names, kElementwise);
}

TEST(ReportFormat, CutlassKernelsKeepTheirDifferingTileNames) {
  const std::vector<std::string> names = {
      "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>("
      "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)",
      "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align1>("
      "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align1::Params)"};
  // The words both tile names share ("cutlass_80_tensorop_s1688gemm") go.
  EXPECT_EQ(ShortenKernelNames(names, 40).names,
            (std::vector<std::string>{"Kernel2<..._128x128_32x3_nn_align4>",
                                      "Kernel2<..._64x64_16x6_tn_align1>"}));
}

TEST(ReportFormat, TimeBounds) {
  // 2026-01-01 is day 56 x 365 + 14 leap days = 20454 after the epoch; Nov 21 is 304 + 20 = 324
  // days later (2026 is not a leap year); plus 7 hours.
  const int64_t expected = (int64_t{20454} + 324) * 86400 + 7 * 3600;
  EXPECT_EQ(ParseTimeBound("2026-11-21T07:00:00Z"), expected * 1000000000);
  EXPECT_EQ(ParseTimeBound("2026-11-21T09:00:00.5+02:00"), expected * 1000000000 + 500000000);
  EXPECT_EQ(ParseTimeBound("1732000000"), int64_t{1732000000} * 1000000000);
  EXPECT_EQ(ParseTimeBound("1732000000.25"), int64_t{1732000000} * 1000000000 + 250000000);
  EXPECT_EQ(ParseTimeBound("1970-01-01T00:00:00Z"), 0);
  for (const char* bad : {"", "yesterday", "2026-13-01T00:00:00Z", "2026-11-21", "12abc",
                          "2026-11-21T07:00:00", "-5", "1.2.3"}) {
    EXPECT_FALSE(ParseTimeBound(bad).has_value()) << bad;
  }
}

TEST(ReportFormat, CsvQuotingFollowsRfc4180) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField("f<int, 2>(float*)"), "\"f<int, 2>(float*)\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
}

Signature SignatureOf(const schema::OccupancyFields& f, schema::Dim3 block, int64_t dyn_smem = 0,
                      int64_t local_bytes = 0) {
  Signature s;
  s.block = block;
  s.first.block = block;
  s.first.dyn_shared_bytes = dyn_smem;
  s.first.local_bytes = local_bytes;
  s.first.occupancy = f;
  s.warps_per_block = WarpsPerBlock(f, block, 32);
  return s;
}

// Hand-made fields without a device event (the engine cannot check anything): the what-if
// fields of the event alone. More cases, on real devices, in advice_test.cc.
TEST(ReportAdvice, RegistersWithWhatIf) {
  // 256 threads = 8 warps; 6 blocks = 48 of 64 warps = 75%; 7 blocks = 56/64 = 87.5% -> 88%.
  schema::OccupancyFields f = testing::Fields(6, 8, 64, Resource::kRegisters);
  f.regs_for_next_block = 32;
  EXPECT_EQ(Advice(SignatureOf(f, {256, 1, 1})),
            "75% occupancy (probably enough); registers limit 6 blocks/SM; if latency-bound, <= "
            "32 regs/thread would fit 7 (88%): __launch_bounds__(256, 7) or -maxrregcount=32 (fewer "
            "registers can spill to local memory; check ptxas -v)");
}

TEST(ReportAdvice, SharedMemoryWithWhatIf) {
  // 128 threads = 4 warps; 3 blocks = 12/64 = 18.75% -> 19%; 4 blocks = 16/64 = 25%.
  schema::OccupancyFields f = testing::Fields(3, 4, 64, Resource::kSharedMem);
  f.smem_for_next_block = 40 * 1024;
  EXPECT_EQ(Advice(SignatureOf(f, {128, 1, 1}, 48 * 1024)),
            "19% occupancy (low, likely latency-bound); 48 KiB smem/block limits 3 blocks/SM; "
            "<= 40 KiB/block would fit 4 (25%): less dynamic shared memory (smaller tiles)");
}

TEST(ReportAdvice, FullOccupancyNeedsNoAdviceUnlessItSpills) {
  schema::OccupancyFields f = testing::Fields(8, 8, 64, Resource::kWarps);
  EXPECT_EQ(Advice(SignatureOf(f, {256, 1, 1})), "");
  EXPECT_EQ(Advice(SignatureOf(f, {256, 1, 1}, 0, 24)),
            "full occupancy; 24 B/thread spilled to local memory");
}

TEST(ReportAdvice, NoBlockFits) {
  schema::OccupancyFields f = testing::Fields(0, 8, 64, Resource::kSharedMem);
  EXPECT_EQ(Advice(SignatureOf(f, {256, 1, 1}, 200 * 1024)),
            "cannot run: shared_mem allows no block on an SM");
}

TEST(ReportAdvice, ResourceLimitsDeriveBlocksFromOccupancy) {
  // Registers bind at 6 blocks (75%); shared memory alone would allow 7 (56/64 = 0.875).
  schema::OccupancyFields f = testing::Fields(6, 8, 64, Resource::kRegisters);
  f.smem_occupancy = 0.875;
  const auto limits = ResourceLimits(f, 8);
  EXPECT_EQ(limits[0].blocks_per_sm, 6);
  EXPECT_EQ(limits[1].blocks_per_sm, 7);
  EXPECT_FALSE(limits[2].blocks_per_sm.has_value());  // full occupancy: count not in the event
  EXPECT_FALSE(limits[5].applies);                    // no cluster
}

// Whether a launch without a kernel_time finished, case by case (docs/crash.md says which
// flushes report CUPTI's records).
TEST(ReportReview, CompletionIsNoOnlyWhenAFlushShowsIt) {
  constexpr uint64_t kLaunch = 10;
  struct Case {
    const char* why;
    CompletionEvidence evidence;
    bool timed;
    Completion expected;
  };
  CompletionEvidence ended;
  ended.ended = true;
  CompletionEvidence ended_lost_records = ended;
  ended_lost_records.timing_dropped = 2;
  CompletionEvidence ended_timing_off = ended;
  ended_timing_off.timing = TimingPolicy::kOff;
  CompletionEvidence ended_timing_sampled = ended;
  ended_timing_sampled.timing = TimingPolicy::kSampled;
  CompletionEvidence sticky_flushed;
  sticky_flushed.sticky_error_seq = 12;
  sticky_flushed.last_kernel_time_seq = 14;
  CompletionEvidence sticky_not_flushed;
  sticky_not_flushed.sticky_error_seq = 12;
  sticky_not_flushed.last_kernel_time_seq = 9;
  CompletionEvidence sticky_before_launch;
  sticky_before_launch.sticky_error_seq = 8;
  sticky_before_launch.last_kernel_time_seq = 14;
  const Case cases[] = {
      {"a kernel_time joined it", {}, true, Completion::kFinished},
      {"crash or kill: nothing flushed CUPTI", {}, false, Completion::kUnknown},
      {"process_end: the exit flush reported every record", ended, false, Completion::kNotFinished},
      {"process_end, but 2 records lost: this may be one", ended_lost_records, false,
       Completion::kUnknown},
      {"timing off: no kernel_time ever", ended_timing_off, false, Completion::kUnknown},
      {"timing sampled: none outside a timing window, so a missing one says nothing",
       ended_timing_sampled, false, Completion::kUnknown},
      {"sticky error at 12 after it, a kernel_time at 14 after the error", sticky_flushed, false,
       Completion::kNotFinished},
      {"sticky error, no kernel_time after it: the flush may not have returned", sticky_not_flushed,
       false, Completion::kUnknown},
      {"sticky error before the launch (seq 8 < 10): says nothing of it", sticky_before_launch,
       false, Completion::kUnknown},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CompletionOf(c.evidence, kLaunch, c.timed), c.expected) << c.why;
  }
}

// Clip never cuts inside a UTF-8 character: a cut there would make the ending line (and the
// report's JSON, which rejects invalid UTF-8) carry half a character. "\xc3\xa9" is e-acute.
TEST(ReportFormat, ClipCutsAtACharacterBoundary) {
  EXPECT_EQ(Clip("short", 10), "short");
  EXPECT_EQ(Clip("abcdefgh", 6), "abc...");                  // 3 bytes + "..."
  EXPECT_EQ(Clip("h\xc3\xa9llo w\xc3\xb6rld", 6), "h\xc3\xa9...");  // cut at 3: after the e-acute
  EXPECT_EQ(Clip("a\xc3\xa9" "bcdef", 5), "a...");  // cut at 2 is inside it: back to 1
}

}  // namespace
}  // namespace cuflight::report
