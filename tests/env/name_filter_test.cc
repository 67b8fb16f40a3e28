#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/env/config.h"

namespace cuflight::env {
namespace {

using ::testing::HasSubstr;

NameFilter Filter(const std::string& include, const std::string& exclude,
                  std::vector<std::string>* warnings = nullptr) {
  Config c;
  c.include_regex = include;
  c.exclude_regex = exclude;
  std::vector<std::string> local;
  NameFilter filter = NameFilter::Make(c, warnings != nullptr ? warnings : &local);
  if (warnings == nullptr) {
    EXPECT_TRUE(local.empty()) << local[0];
  }
  return filter;
}

bool Accepts(const NameFilter& f, const std::string& demangled) {
  return f.Accept(demangled, "_Z_unused");
}

TEST(NameFilterTest, DefaultAndEmptyPatternsAcceptEverything) {
  const NameFilter none;
  EXPECT_FALSE(none.active());
  EXPECT_TRUE(none.Accept("anything", "_Z8anythingv"));
  EXPECT_TRUE(none.Accept("", ""));

  const NameFilter empty = Filter("", "");
  EXPECT_FALSE(empty.active());
  EXPECT_TRUE(Accepts(empty, "void gemm()"));
}

TEST(NameFilterTest, IncludeIsASearchAnywhereInTheName) {
  const NameFilter f = Filter("gemm", "");
  EXPECT_TRUE(f.active());
  EXPECT_TRUE(Accepts(f, "gemm"));
  EXPECT_TRUE(Accepts(f, "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<float>>(Params)"));
  EXPECT_TRUE(Accepts(f, "sgemm_128x64"));
  EXPECT_FALSE(Accepts(f, "void reduce_kernel<float>(float*, int)"));
  EXPECT_FALSE(Accepts(f, "GEMM"));  // case-sensitive
  EXPECT_FALSE(Accepts(f, ""));
}

TEST(NameFilterTest, AnchorsAndAlternation) {
  const NameFilter anchored = Filter("^void gemm", "");
  EXPECT_TRUE(Accepts(anchored, "void gemm(int)"));
  EXPECT_FALSE(Accepts(anchored, "void cutlass::gemm(int)"));

  const NameFilter whole = Filter("^k[0-9]+$", "");
  EXPECT_TRUE(Accepts(whole, "k42"));
  EXPECT_FALSE(Accepts(whole, "k42x"));
  EXPECT_FALSE(Accepts(whole, "xk42"));

  // The alternation stays inside the pattern: "a|b" matches either, anywhere.
  const NameFilter either = Filter("^conv|softmax$", "");
  EXPECT_TRUE(Accepts(either, "conv2d"));
  EXPECT_TRUE(Accepts(either, "fused_softmax"));
  EXPECT_FALSE(Accepts(either, "fused_conv2d"));
  EXPECT_FALSE(Accepts(either, "softmax_backward"));

  const NameFilter classes = Filter("\\bfp(16|32)\\b|\\d{3,}x\\d+", "");
  EXPECT_TRUE(Accepts(classes, "gemm fp16 tile"));
  EXPECT_TRUE(Accepts(classes, "tile_128x64"));
  EXPECT_FALSE(Accepts(classes, "gemm_fp16x"));
  EXPECT_FALSE(Accepts(classes, "tile_12x64"));
}

TEST(NameFilterTest, UsesMangledNameOnlyWhenDemanglingFailed) {
  const NameFilter f = Filter("^_Z4gemm", "");
  EXPECT_TRUE(f.Accept("", "_Z4gemmv"));
  EXPECT_FALSE(f.Accept("", "_Z6reducev"));
  EXPECT_FALSE(f.Accept("void gemm()", "_Z4gemmv"));  // a demangled name is what is matched

  const NameFilter plain = Filter("gemm", "");
  EXPECT_TRUE(plain.Accept("void gemm()", "_Z4xxxxv"));
  EXPECT_FALSE(plain.Accept("void xxxx()", "_Z4gemmv"));
}

TEST(NameFilterTest, ExcludeOnly) {
  const NameFilter f = Filter("", "nccl|Reduce");
  EXPECT_TRUE(f.active());
  EXPECT_FALSE(Accepts(f, "ncclKernel_AllReduce_RING_LL_Sum_float"));
  EXPECT_FALSE(Accepts(f, "void cub::DeviceReduceKernel<int>()"));
  EXPECT_TRUE(Accepts(f, "void gemm()"));
  EXPECT_TRUE(Accepts(f, ""));
}

TEST(NameFilterTest, IncludeAndExclude) {
  const NameFilter f = Filter("gemm|conv", "fp16");
  EXPECT_TRUE(Accepts(f, "gemm_fp32"));
  EXPECT_TRUE(Accepts(f, "conv2d_fp32"));
  EXPECT_FALSE(Accepts(f, "gemm_fp16"));  // excluded wins
  EXPECT_FALSE(Accepts(f, "conv_fp16"));
  EXPECT_FALSE(Accepts(f, "reduce_fp32"));  // not included
  EXPECT_FALSE(Accepts(f, "reduce_fp16"));
}

TEST(NameFilterTest, InvalidPatternWarnsOnceAndFiltersNothingOnItsSide) {
  std::vector<std::string> warnings;
  const NameFilter bad_include = Filter("(gemm", "", &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("CUFLIGHT_INCLUDE"));
  EXPECT_THAT(warnings[0], HasSubstr("'(gemm'"));
  EXPECT_THAT(warnings[0], HasSubstr("no include filter"));
  EXPECT_FALSE(bad_include.active());
  EXPECT_TRUE(Accepts(bad_include, "void reduce()"));

  warnings.clear();
  const NameFilter bad_exclude = Filter("gemm", "[fp16", &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("CUFLIGHT_EXCLUDE"));
  EXPECT_THAT(warnings[0], HasSubstr("no exclude filter"));
  EXPECT_TRUE(bad_exclude.active());  // the include side still filters
  EXPECT_TRUE(Accepts(bad_exclude, "gemm_fp16"));
  EXPECT_FALSE(Accepts(bad_exclude, "conv"));

  warnings.clear();
  const NameFilter back_reference = Filter("(a)\\1", "", &warnings);
  EXPECT_EQ(warnings.size(), 1u);
  EXPECT_FALSE(back_reference.active());

  Config invalid;
  invalid.include_regex = "(";
  const NameFilter no_sink = NameFilter::Make(invalid, nullptr);
  EXPECT_FALSE(no_sink.active());
}

TEST(NameFilterTest, ParsedConfigNeverWarnsTwice) {
  const std::map<std::string, std::string> env = {{"CUFLIGHT_INCLUDE", "gemm("},
                                                  {"CUFLIGHT_EXCLUDE", "fp16"}};
  const ParsedConfig parsed = ParseConfig(
      [&env](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      "/tmp/c.sock");
  EXPECT_EQ(parsed.warnings.size(), 1u);
  std::vector<std::string> warnings;
  const NameFilter f = NameFilter::Make(parsed.config, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(Accepts(f, "gemm_fp32"));
  EXPECT_FALSE(Accepts(f, "gemm_fp16"));
}

// A pathological name (50,000 characters) against patterns that backtrack or recurse per
// character in a depth-first matcher (libstdc++'s overflows an 8 MiB stack on such a name
// in a -O0 build): no stack overflow, and a bounded time.
TEST(NameFilterTest, LongNamesAreMatchedWithoutBlowingUp) {
  const std::string name(50000, 'x');
  const NameFilter f = Filter(".*foo.*bar", "(x|xx)+y");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(Accepts(f, name));
  EXPECT_TRUE(Accepts(f, name + "foo_bar"));
  EXPECT_FALSE(Accepts(f, name + "foo_barxxy"));  // excluded
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(NameFilterTest, ConcurrentAcceptIsSafe) {
  const NameFilter f = Filter("gemm", "fp16");
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 300; ++i) {
        if (!Accepts(f, "gemm_fp32_" + std::to_string(i))) wrong.fetch_add(1);
        if (Accepts(f, "gemm_fp16_" + std::to_string(i))) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace cuflight::env
