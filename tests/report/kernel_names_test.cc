// Kernel names shortened together (kernel_names.h): on real names (tests/report/data/
// real_kernel_names.txt, with their sources), every pair of different names stays different at
// every width, within the width, and every id has its legend; on names built like the CUTLASS
// and cuBLAS ones, the forms are worked out by hand from the steps.
#include "cuflight/report/kernel_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace cuflight::report {
namespace {

using ::testing::HasSubstr;

// The sets of the data file, by name ("cutlass2", ...), and "all" for every name together.
std::map<std::string, std::vector<std::string>> RealSets() {
  std::ifstream in(std::string(CUFLIGHT_REPORT_TEST_DATA) + "/real_kernel_names.txt");
  EXPECT_TRUE(in.good());
  std::map<std::string, std::vector<std::string>> sets;
  std::string set;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.starts_with("#")) continue;
    if (line.starts_with("== ")) {
      set = line.substr(3);
      continue;
    }
    sets[set].push_back(line);
    sets["all"].push_back(line);
  }
  return sets;
}

// What must hold for any names and width.
void ExpectToldApart(const std::vector<std::string>& names, size_t width,
                     const std::string& what) {
  const ShortKernelNames r = ShortenKernelNames(names, width);
  ASSERT_EQ(r.names.size(), names.size()) << what;
  std::set<std::string> legend_ids;
  for (const KernelNameLegendEntry& e : r.legend) legend_ids.insert(e.id);
  EXPECT_EQ(legend_ids.size(), r.legend.size()) << what;
  std::set<std::string> used_ids;
  static const std::regex kId(R"(^(K\d+) .*)");
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_LE(r.names[i].size(), std::max<size_t>(width, 8)) << what << ": " << r.names[i];
    for (size_t j = i + 1; j < names.size(); ++j) {
      if (names[i] == names[j]) {
        EXPECT_EQ(r.names[i], r.names[j]) << what;
      } else {
        EXPECT_NE(r.names[i], r.names[j]) << what << " at " << width << ": " << i << ", " << j;
      }
    }
    std::smatch m;
    if (std::regex_match(r.names[i], m, kId) && legend_ids.contains(m[1])) used_ids.insert(m[1]);
  }
  EXPECT_EQ(used_ids, legend_ids) << what << " at " << width;
}

TEST(KernelNames, RealNamesStayApartAtEveryWidth) {
  const auto sets = RealSets();
  ASSERT_EQ(sets.size(), 7u);  // six sets and "all"
  for (const auto& [set, names] : sets) {
    for (const size_t width : {8, 12, 20, 24, 30, 40, 60, 64, 120, 400}) {
      ExpectToldApart(names, width, set);
    }
  }
}

TEST(KernelNames, RealCutlass3TileShapesShow) {
  // SM100 FP8 (tile 64x64x128) and SM120 NVFP4 (tile 128x128x256) GemmUniversal kernels: their
  // CollectiveMma's mainloop templates differ (each shown by its own name) and so does the tile
  // shape, cute::tuple<C<64>, C<64>, C<128>> against <C<128>, C<128>, C<256>>: a tuple of values
  // is kept whole.
  const std::vector<std::string> names = RealSets().at("cutlass3");
  const ShortKernelNames r = ShortenKernelNames(names, 120);
  ASSERT_EQ(r.legend.size(), 2u);
  EXPECT_THAT(r.legend[0].name, HasSubstr("MainloopSm100TmaUmmaWarpSpecialized<...>, "
                                          "tuple<C<64>, C<64>, C<128>>"));
  EXPECT_THAT(r.legend[1].name, HasSubstr("MainloopSm120TmaWarpSpecializedBlockScaled<...>, "
                                          "tuple<C<128>, C<128>, C<256>>"));
  EXPECT_TRUE(r.names[0].starts_with("K1 device_kernel<MainloopSm100")) << r.names[0];
}

// Two CUTLASS 2.x tensor-op GEMMs that differ in the tile (GemmShape<64, 128, 32> against <128,
// 128, 32>) and the epilogue functor, three and two levels down.
std::string CutlassGemm(int tile_m, const char* functor) {
  return "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::"
         "MmaPipelined<cutlass::gemm::GemmShape<" +
         std::to_string(tile_m) +
         ", 128, 32>, cutlass::half_t, cutlass::layout::RowMajor, cutlass::half_t, "
         "cutlass::layout::ColumnMajor, float, cutlass::layout::RowMajor, "
         "cutlass::arch::OpClassTensorOp>, cutlass::epilogue::threadblock::Epilogue<"
         "cutlass::epilogue::thread::" +
         functor +
         "<cutlass::half_t, 8, float, float>, 1>, true>>(cutlass::gemm::kernel::Gemm::Params)";
}

TEST(KernelNames, CutlassTileAndEpilogueStayWhereTheLeadingTextIsTheSame) {
  const std::vector<std::string> names = {CutlassGemm(64, "LinearCombination"),
                                          CutlassGemm(128, "LinearCombinationRelu")};
  // Form 3 at 100: Kernel's one argument differs; in Gemm, MmaPipelined and Epilogue differ and
  // "true" is shared ("..."); in MmaPipelined only GemmShape differs, and in it only 64/128; in
  // Epilogue the functors are different templates (shown by name: half_t, 8 and float are
  // builtin-like and go) and "1" is shared.
  EXPECT_EQ(ShortenKernelNames(names, 100).names,
            (std::vector<std::string>{
                "Kernel<Gemm<MmaPipelined<GemmShape<64, ...>, ...>, Epilogue<LinearCombination, "
                "...>, ...>>",
                "Kernel<Gemm<MmaPipelined<GemmShape<128, ...>, ...>, Epilogue<"
                "LinearCombinationRelu, ...>, ...>>"}));
  // Form 4 at 50: the outer name and the places that differ.
  EXPECT_EQ(ShortenKernelNames(names, 50).names,
            (std::vector<std::string>{"Kernel<GemmShape<64, ...>, LinearCombination>",
                                      "Kernel<GemmShape<128, ...>, LinearCombinationRelu>"}));
  // Form 6 at 30: an id, form 4 cut, and the legend says what each id is.
  const ShortKernelNames r = ShortenKernelNames(names, 30);
  EXPECT_EQ(r.names, (std::vector<std::string>{"K1 Kernel<GemmShape<64...",
                                               "K2 Kernel<GemmShape<128..."}));
  ASSERT_EQ(r.legend.size(), 2u);
  EXPECT_EQ(r.legend[0].id, "K1");
  EXPECT_EQ(r.legend[0].name, "Kernel<GemmShape<64, ...>, LinearCombination>");
  EXPECT_EQ(KernelNameLegendLines(r)[1], "K2  Kernel<GemmShape<128, ...>, LinearCombinationRelu>");
  // The old shortener gave both "Kernel<...>": the leading text alone cannot tell them apart.
  for (const size_t width : {8, 16, 24, 40}) ExpectToldApart(names, width, "cutlass");
}

TEST(KernelNames, IdsFollowTheDistinctNamesInOrder) {
  // Twelve names (the same one twice): ids are places among the distinct names, the repeated
  // name takes its first place's id, and an id never depends on the width.
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) {
    names.push_back(CutlassGemm(64 << (i % 3), i % 2 == 0 ? "LinearCombination" : "LinearCombinationGELU"));
  }
  // Distinct: (64, LC) (128, GELU) (256, LC) (64, GELU) (128, LC) (256, GELU), then repeats.
  const ShortKernelNames r = ShortenKernelNames(names, 24);
  ASSERT_EQ(r.legend.size(), 6u);
  EXPECT_EQ(r.names[6], r.names[0]);
  EXPECT_TRUE(r.names[0].starts_with("K1 ")) << r.names[0];
  EXPECT_TRUE(r.names[5].starts_with("K6 ")) << r.names[5];
  EXPECT_TRUE(r.names[11].starts_with("K6 ")) << r.names[11];
  EXPECT_EQ(r.legend[3].name, "Kernel<GemmShape<64, ...>, LinearCombinationGELU>");
}

TEST(KernelNames, FlatNamesLoseTheWordsTheyShare) {
  // cuBLAS names: words 4, 5 and 9 differ (types, tile size); the first word stays.
  const std::vector<std::string> names = {
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_"
      "segment_k_off_kernel__5x_cublas",
      "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
      "segment_k_off_kernel__5x_cublas"};
  EXPECT_EQ(ShortenKernelNames(names, 60).names,
            (std::vector<std::string>{"sm90_..._bf16bf16_bf16f32_..._tilesize64x64x64_...",
                                      "sm90_..._f32f32_tf32f32_..._tilesize128x128x32_..."}));
}

TEST(KernelNames, ParametersStayWhenOnlyTheyDiffer) {
  const std::vector<std::string> names = {"void scale_kernel(float*, int)",
                                          "void scale_kernel(double*, int)"};
  EXPECT_EQ(ShortenKernelNames(names, 1000).names, names);
  // Without "void " they fit (25 and 26 bytes); the names without parameters would read the same.
  EXPECT_EQ(ShortenKernelNames(names, 28).names,
            (std::vector<std::string>{"scale_kernel(float*, int)", "scale_kernel(double*, int)"}));
  // Form 4: the differing parameter alone.
  EXPECT_EQ(ShortenKernelNames(names, 24).names,
            (std::vector<std::string>{"scale_kernel(float*)", "scale_kernel(double*)"}));
}

TEST(KernelNames, ANameAloneIsCutWithoutAnId) {
  // Alone, its arguments tell it from nothing: "Kernel<...>" (11 bytes), cut at 10.
  EXPECT_EQ(ShortenKernelNames({CutlassGemm(64, "LinearCombination")}, 12).names,
            (std::vector<std::string>{"Kernel<...>"}));
  const ShortKernelNames r = ShortenKernelNames({CutlassGemm(64, "LinearCombination")}, 10);
  EXPECT_EQ(r.names, (std::vector<std::string>{"Kernel<..."}));
  EXPECT_TRUE(r.legend.empty());
}

}  // namespace
}  // namespace cuflight::report
