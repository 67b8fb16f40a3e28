// Kernel names short enough for a table column or a chart label, and still told apart.
//
// 1. Templated kernels differ deep in their template arguments: CUTLASS instantiations in a tile
//    shape three levels down (cutlass::Kernel<Gemm<MmaPipelined<GemmShape<64, 128, 32>, ...>,
//    Epilogue<LinearCombinationRelu<...>, ...>>>), PyTorch's vectorized_elementwise_kernel<4,
//    AddFunctor<float>, ...> in its functor. Cutting the leading text leaves "Kernel<...>" for
//    all of them, so each name is parsed into a template tree and the trees of the names shown
//    together are compared: arguments all of them share go, the ones that tell two names apart
//    stay, however deep they are.
// 2. Flat names (cuBLAS's sm90_xmma_gemm_..._tilesize128x128x64_..., nvjet_...) differ in
//    '_'-separated words: the words they share go.
// 3. When even what tells a name apart does not fit, it becomes a short id ("K3", the name's
//    place among the distinct names given, so the same input always gives the same id) followed
//    by as much of that as fits, and the legend says what the id stands for.
// 4. One call shortens every name shown together (a table's column, a chart's labels): names are
//    told apart only from the others in the same call.
#ifndef CUFLIGHT_REPORT_KERNEL_NAMES_H_
#define CUFLIGHT_REPORT_KERNEL_NAMES_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cuflight::report {

struct KernelNameLegendEntry {
  std::string id;    // "K3"
  std::string name;  // what tells it apart, unshortened ("Kernel<Gemm<MmaPipelined<GemmShape<
                     // 64, ...>, ...>, ...>>"), or the whole name when that is short
};

struct ShortKernelNames {
  std::vector<std::string> names;             // one for one with the input
  std::vector<KernelNameLegendEntry> legend;  // the ids used, in id order; empty when none
};

// Each of `names` (demangled, or mangled) in at most `width` bytes (width >= 8), one for one;
// equal names get equal results, different names different results. Each name takes the first
// form that fits:
//  0. the name whole;
//  1. without the return type ("void ") and the parameter list (kept when only the parameters
//     tell two names apart);
//  2. and without namespaces (also inside arguments), lambda chains as "F::lambda";
//  3. the tree diff: arguments every name of the same template shares become "...", differing
//     ones stay, compared again inside ("Kernel<Gemm<MmaPipelined<GemmShape<64, ...>, ...>,
//     ...>>"); an argument no other name's argument there shares the template of shows only
//     its template's name, without builtin types and numbers ("AddFunctor<float>" ->
//     "AddFunctor", else "Gemm<...>");
//  4. flat: the outer template's name and only the places that differ ("Kernel<GemmShape<64,
//     ...>, LinearCombinationRelu>"); words of flat names that all share go
//     ("sm90_..._tilesize128x128x64_..._off_...");
//  5. 4 with the outer template's name cut ("vectori...<AddFunctor>"), 8 bytes of it at least;
//  6. "K<n> " and form 4 cut at the end, with a legend entry (several distinct names only; a
//     name shown alone is cut at the end).
// Should two different names still read the same after their steps, both take form 6.
ShortKernelNames ShortenKernelNames(const std::vector<std::string>& names, size_t width);

// The legend lines for `short_names` ("K3  Kernel<Gemm<...>>"), or none.
std::vector<std::string> KernelNameLegendLines(const ShortKernelNames& short_names);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_KERNEL_NAMES_H_
