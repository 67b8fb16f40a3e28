#include "cuflight/report/kernel_origin.h"

#include <cctype>
#include <string>

namespace cuflight::report {
namespace {

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool ContainsNoCase(std::string_view s, std::string_view lower_part) {
  std::string lower(s);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return Contains(lower, lower_part);
}

// "sm90_xmma_", "sm100_xmma_": the XMMA kernels cuBLAS (gemm) and cuDNN (fprop, dgrad, wgrad)
// ship; what follows the prefix, or "" when `s` does not start with one.
std::string_view AfterXmmaPrefix(std::string_view s) {
  if (!s.starts_with("sm")) return "";
  size_t i = 2;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 2 || !s.substr(i).starts_with("_xmma_")) return "";
  return s.substr(i + 6);
}

// cuBLAS's pre-XMMA GEMMs are named for the architecture: "ampere_sgemm_128x64_nn",
// "volta_h884gemm_64x64_ldg8_nn", "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn".
bool ArchitectureGemm(std::string_view s) {
  for (const std::string_view arch :
       {"maxwell_", "pascal_", "volta_", "turing_", "ampere_", "hopper_", "blackwell_"}) {
    if (s.starts_with(arch)) return Contains(s, "gemm");
  }
  return false;
}

}  // namespace

KernelOrigin ClassifyKernel(std::string_view name) {
  std::string_view s = name;
  if (s.starts_with("void ")) s.remove_prefix(5);
  // FlashAttention first: its template arguments name CUTLASS types (cutlass::bfloat16_t).
  // FA2 "flash_fwd_kernel<Flash_fwd_kernel_traits<...>>" (PyTorch's copy in pytorch_flash::),
  // FA3 "flash::...", PyTorch's memory-efficient attention "fmha_cutlassF_f16_aligned_64x64_rf_sm80".
  if (s.starts_with("flash_") || s.starts_with("flash::") || s.starts_with("pytorch_flash::") ||
      s.starts_with("fmha_cutlass") || s.starts_with("_Z16flash_") ||
      Contains(s, "Flash_fwd_kernel_traits") || Contains(s, "Flash_bwd_kernel_traits")) {
    return KernelOrigin::kFlashAttention;
  }
  if (const std::string_view xmma = AfterXmmaPrefix(s); !xmma.empty()) {
    return xmma.starts_with("fprop") || xmma.starts_with("dgrad") || xmma.starts_with("wgrad")
               ? KernelOrigin::kCudnn
               : KernelOrigin::kCublas;
  }
  if (s.starts_with("cudnn") || Contains(s, "cudnn::") || Contains(s, "scudnn") ||
      Contains(s, "implicit_convolve_") || Contains(s, "explicit_convolve_")) {
    return KernelOrigin::kCudnn;
  }
  if (s.starts_with("nvjet_") || ContainsNoCase(s, "cublas") || ArchitectureGemm(s) ||
      s.starts_with("gemv2T_kernel") || s.starts_with("gemv2N_kernel") ||
      s.starts_with("gemvNSP_kernel") || s.starts_with("gemmSN_") ||
      s.starts_with("gemmk1_kernel") || s.starts_with("splitKreduce_kernel")) {
    return KernelOrigin::kCublas;
  }
  if (s.starts_with("cutlass::Kernel") || s.starts_with("cutlass::device_kernel") ||
      s.starts_with("cutlass_") || s.starts_with("cutlass3x_") || s.starts_with("_ZN7cutlass")) {
    return KernelOrigin::kCutlass;
  }
  if (s.starts_with("triton_")) return KernelOrigin::kTriton;
  if (s.starts_with("at::") || s.starts_with("_ZN2at")) return KernelOrigin::kPyTorch;
  if (s.starts_with("nccl")) return KernelOrigin::kNccl;
  return KernelOrigin::kUser;
}

std::string_view KernelOriginName(KernelOrigin origin) {
  switch (origin) {
    case KernelOrigin::kUser:
      return "";
    case KernelOrigin::kCublas:
      return "cuBLAS";
    case KernelOrigin::kCudnn:
      return "cuDNN";
    case KernelOrigin::kCutlass:
      return "CUTLASS";
    case KernelOrigin::kFlashAttention:
      return "FlashAttention";
    case KernelOrigin::kTriton:
      return "Triton";
    case KernelOrigin::kPyTorch:
      return "PyTorch";
    case KernelOrigin::kNccl:
      return "NCCL";
  }
  return "";
}

}  // namespace cuflight::report
