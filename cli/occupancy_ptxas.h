// What `ptxas -v` (nvcc -Xptxas -v, or --resource-usage) prints about each kernel, read for
// `cuflight occupancy --ptxas`: registers per thread and static shared memory, the two function
// attributes occupancy needs from the compiler, plus the spills and target architecture worth a
// note. The formats read (CUDA 11 to 13):
//
//   ptxas info    : Compiling entry function '_Z6kernelPfi' for 'sm_90'
//   ptxas info    : Function properties for _Z6kernelPfi
//       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 92 registers, used 1 barriers, 16640 bytes smem, 400 bytes cmem[0]
//
// ("used N barriers" appears from CUDA 12; "bytes smem" only when the kernel has static shared
// memory.) A single "Used ... registers" line without the rest is one unnamed kernel. What
// `cuobjdump --dump-resource-usage` prints is read too:
//
//    Function _Z6kernelPfi:
//     REG:92 STACK:0 SHARED:16640 LOCAL:0 CONSTANT[0]:400 TEXTURE:0 SURFACE:0 SAMPLER:0
#ifndef CUFLIGHT_CLI_OCCUPANCY_PTXAS_H_
#define CUFLIGHT_CLI_OCCUPANCY_PTXAS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cuflight::cli {

struct PtxasKernel {
  std::string name;          // the entry function as ptxas names it (mangled); "" when not given
  std::string arch;          // "sm_90", from "for 'sm_90'"; "" when not given
  int registers = 0;         // "Used N registers"
  int64_t static_smem = 0;   // "N bytes smem"; 0 when absent
  int64_t stack_frame = 0;   // "N bytes stack frame"
  int64_t spill_stores = 0;  // "N bytes spill stores"
  int64_t spill_loads = 0;   // "N bytes spill loads"
};

// Every kernel of `text` with a "Used N registers" (or "REG:N") line, in the order printed. Lines
// that are not ptxas's (nvcc's other output, blank lines) are skipped. Never throws for any input;
// a number too large for its field makes that kernel's line unread (skipped).
std::vector<PtxasKernel> ParsePtxasOutput(std::string_view text);

// `text` without a trailing unit word ptxas prints after the number: "92 registers" -> "92",
// "16640 bytes smem" -> "16640", so --regs and --static-smem take ptxas's words as they are.
std::string_view StripPtxasUnit(std::string_view text);

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_OCCUPANCY_PTXAS_H_
