// Library and generated kernels recognised by name (kernel_origin.h), on the real names of
// tests/report/data/real_kernel_names.txt and names as the libraries write them.
#include "cuflight/report/kernel_origin.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

namespace cuflight::report {
namespace {

TEST(KernelOrigin, RealNamesByLibrary) {
  const std::map<std::string, KernelOrigin> by_set = {
      {"cutlass2", KernelOrigin::kCutlass},        {"cutlass3", KernelOrigin::kCutlass},
      {"flash", KernelOrigin::kFlashAttention},    {"cublas", KernelOrigin::kCublas},
      {"triton", KernelOrigin::kTriton},           {"pytorch", KernelOrigin::kPyTorch}};
  std::ifstream in(std::string(CUFLIGHT_REPORT_TEST_DATA) + "/real_kernel_names.txt");
  ASSERT_TRUE(in.good());
  std::string set;
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.starts_with("#")) continue;
    if (line.starts_with("== ")) {
      set = line.substr(3);
      continue;
    }
    EXPECT_EQ(ClassifyKernel(line), by_set.at(set)) << set << ": " << line.substr(0, 80);
    ++checked;
  }
  EXPECT_EQ(checked, 20);
}

TEST(KernelOrigin, NamesAsTheLibrariesWriteThem) {
  // cuDNN: its own prefix, and the XMMA convolutions (fprop/dgrad/wgrad) it ships; the XMMA GEMM
  // prefix is cuBLAS's.
  EXPECT_EQ(ClassifyKernel("cudnn_infer_ampere_scudnn_128x32_relu_small_nn_v1"), KernelOrigin::kCudnn);
  EXPECT_EQ(ClassifyKernel("sm80_xmma_fprop_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_"
                           "tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel"),
            KernelOrigin::kCudnn);
  EXPECT_EQ(ClassifyKernel("ampere_sgemm_128x64_nn"), KernelOrigin::kCublas);
  EXPECT_EQ(ClassifyKernel("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, "
                           "4, 4, false, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched"
                           "<float const>, cublasGemvTensorStridedBatched<float const>, "
                           "cublasGemvTensorStridedBatched<float>, float> >(...)"),
            KernelOrigin::kCublas);
  EXPECT_EQ(ClassifyKernel("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4"),
            KernelOrigin::kCutlass);
  EXPECT_EQ(ClassifyKernel("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_"
                           "traits<64, 128, 128, 4, false, false, cutlass::half_t, pytorch_flash::"
                           "Flash_kernel_traits<64, 128, 128, 4, cutlass::half_t> >, false, true, "
                           "false, false, true, true, false>(pytorch_flash::Flash_fwd_params)"),
            KernelOrigin::kFlashAttention);
  EXPECT_EQ(ClassifyKernel("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::"
                           "AttentionKernel<cutlass::half_t, cutlass::arch::Sm80, true, 64, 64, "
                           "64, true, true>::Params)"),
            KernelOrigin::kFlashAttention);
  EXPECT_EQ(ClassifyKernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL128"), KernelOrigin::kNccl);
  // The user's own kernels, also ones that use CUTLASS's or CuTe's types.
  EXPECT_EQ(ClassifyKernel("void gemm<2>(float*, int)"), KernelOrigin::kUser);
  EXPECT_EQ(ClassifyKernel("void cute_ampere_hgemm_16816<cute::tuple<int, int, int> >(...)"),
            KernelOrigin::kUser);
  EXPECT_EQ(ClassifyKernel("_Z6kernelv"), KernelOrigin::kUser);
  EXPECT_EQ(KernelOriginName(KernelOrigin::kCublas), "cuBLAS");
  EXPECT_EQ(KernelOriginName(KernelOrigin::kUser), "");
}

}  // namespace
}  // namespace cuflight::report
