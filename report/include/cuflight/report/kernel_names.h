// Kernel names short enough for a table column and still told apart. Templated kernels differ in
// their template arguments (PyTorch's vectorized_elementwise_kernel<4, AddFunctor<float>, ...>
// for add, GELU and mul; cutlass::Kernel2<cutlass_80_tensorop_..._128x128_...>), so shortening
// drops what the names shown have in common and keeps what tells them apart.
#ifndef CUFLIGHT_REPORT_KERNEL_NAMES_H_
#define CUFLIGHT_REPORT_KERNEL_NAMES_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cuflight::report {

// Each of `names` (demangled, or mangled) in at most `width` bytes (width >= 8), one for one.
// A name that fits is kept whole. Otherwise, in steps, each name taking the first that fits:
//  1. the return type ("void ") and the parameter list go;
//  2. top-level template arguments that every name of the same template shown has in common
//     become "..." (the ones that differ stay), and differing arguments lose a long common
//     prefix ("cutlass_80_tensorop_s1688gemm_128x128_..." -> "...128x128_...");
//  3. namespaces go (also inside arguments), and lambda chains become "F::lambda";
//  4. inside arguments, builtin types and numbers go ("AddFunctor<float>" -> "AddFunctor"), and
//     step 2 is done again on what is left;
//  5. a template other names shown share keeps its arguments and has its own name cut
//     ("vectorized_elementw...<..., GeluCUDAKernelImpl::lambda, ...>"), 8 bytes of it at least;
//  6. nested template arguments become "<...>", then 4 and 5 again;
//  7. a template no other name shown shares loses all its arguments ("Gemm<...>");
//  8. last, a shared template shows only its differing arguments after what is left of its own
//     name ("vectorize...<AddFunctor>", "v...<BinaryFunctor<Mu..."); any other name is cut at
//     the end with "...".
std::vector<std::string> ShortenKernelNames(const std::vector<std::string>& names, size_t width);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_KERNEL_NAMES_H_
