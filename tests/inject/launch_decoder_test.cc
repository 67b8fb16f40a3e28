// Launch decoding from the real CUPTI driver parameter structs (generated_cuda_meta.h).
#include "launch_decoder.h"

#include <gtest/gtest.h>

namespace cuflight::inject {
namespace {

CUfunction Fn(uintptr_t v) { return reinterpret_cast<CUfunction>(v); }
CUstream St(uintptr_t v) { return reinterpret_cast<CUstream>(v); }

TEST(LaunchDecoder, LaunchKernelAndPtsz) {
  cuLaunchKernel_params p{Fn(0x1000), 10, 20, 30, 128, 2, 1, 4096, St(0x77), nullptr, nullptr};
  ASSERT_EQ(LaunchCount(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p), 1);
  DecodedLaunch d;
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, 0, nullptr, &d));
  EXPECT_EQ(d.function, 0x1000u);
  EXPECT_EQ(d.api, LaunchApi::kLaunchKernel);
  EXPECT_EQ(d.grid[0], 10u);
  EXPECT_EQ(d.grid[1], 20u);
  EXPECT_EQ(d.grid[2], 30u);
  EXPECT_EQ(d.block[0], 128u);
  EXPECT_EQ(d.block[1], 2u);
  EXPECT_EQ(d.block[2], 1u);
  EXPECT_EQ(d.dyn_smem, 4096u);
  EXPECT_EQ(d.stream, 0x77u);
  EXPECT_FALSE(d.cooperative);
  EXPECT_EQ(d.cluster[0], 0u);

  cuLaunchKernel_ptsz_params q{Fn(0x2000), 1, 1, 1, 64, 1, 1, 0, St(0x2), nullptr, nullptr};
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &q, 0, nullptr, &d));
  EXPECT_EQ(d.api, LaunchApi::kLaunchKernelPtsz);
  EXPECT_EQ(d.function, 0x2000u);
  EXPECT_EQ(d.block[0], 64u);
}

TEST(LaunchDecoder, StreamZeroOfAPtszLaunchIsThePerThreadStream) {
  // cuLaunchKernel(stream 0) is the legacy NULL stream; cuLaunchKernel_ptsz(stream 0) is the
  // calling thread's per-thread default stream, which the driver names CU_STREAM_PER_THREAD.
  const uint64_t per_thread = reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD);
  DecodedLaunch d;
  cuLaunchKernel_params legacy{Fn(0x1000), 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr};
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &legacy, 0, nullptr, &d));
  EXPECT_EQ(d.stream, 0u);
  EXPECT_EQ(d.driver_stream(), 0u);
  cuLaunchKernel_ptsz_params ptsz{Fn(0x1000), 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr};
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &ptsz, 0, nullptr, &d));
  EXPECT_EQ(d.stream, 0u);
  EXPECT_EQ(d.driver_stream(), per_thread);
  CUlaunchConfig config{1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, 0};
  cuLaunchKernelEx_ptsz_params ex{&config, Fn(0x1000), nullptr, nullptr};
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, &ex, 0, nullptr, &d));
  EXPECT_EQ(d.driver_stream(), per_thread);
  cuLaunchCooperativeKernel_ptsz_params coop{Fn(0x1000), 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr};
  ASSERT_TRUE(
      DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, &coop, 0, nullptr, &d));
  EXPECT_EQ(d.driver_stream(), per_thread);
  // An explicit stream is itself, per-thread entry point or not.
  ptsz.hStream = St(0x77);
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &ptsz, 0, nullptr, &d));
  EXPECT_EQ(d.driver_stream(), 0x77u);
}

TEST(LaunchDecoder, TheLaunchsCarveoutAttributeIsKept) {
  // CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT overrides the function's carveout for
  // this launch (cuda.h); CU_SHAREDMEM_CARVEOUT_DEFAULT (-1, as unsigned) is no preference.
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
  attr.value.sharedMemCarveout = 25;
  CUlaunchConfig config{1, 1, 1, 32, 1, 1, 0, nullptr, &attr, 1};
  cuLaunchKernelEx_params p{&config, Fn(0x3000), nullptr, nullptr};
  DecodedLaunch d;
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, 0, nullptr, &d));
  EXPECT_EQ(d.carveout, 25);
  attr.value.sharedMemCarveout = static_cast<unsigned int>(CU_SHAREDMEM_CARVEOUT_DEFAULT);
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, 0, nullptr, &d));
  EXPECT_EQ(d.carveout, -1);
  config.numAttrs = 0;
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, 0, nullptr, &d));
  EXPECT_EQ(d.carveout, -1);
}

TEST(LaunchDecoder, LaunchKernelExReadsConfigAndAttributes) {
  CUlaunchAttribute attrs[3] = {};
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;  // ignored
  attrs[0].value.priority = 3;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[1].value.clusterDim.x = 2;
  attrs[1].value.clusterDim.y = 1;
  attrs[1].value.clusterDim.z = 1;
  attrs[2].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attrs[2].value.cooperative = 1;
  CUlaunchConfig config{132, 2, 1, 256, 1, 1, 98304, St(0x55), attrs, 3};
  cuLaunchKernelEx_params p{&config, Fn(0x3000), nullptr, nullptr};
  DecodedLaunch d;
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, 0, nullptr, &d));
  EXPECT_EQ(d.api, LaunchApi::kLaunchKernelEx);
  EXPECT_EQ(d.function, 0x3000u);
  EXPECT_EQ(d.grid[0], 132u);
  EXPECT_EQ(d.grid[1], 2u);
  EXPECT_EQ(d.block[0], 256u);
  EXPECT_EQ(d.dyn_smem, 98304u);
  EXPECT_EQ(d.stream, 0x55u);
  EXPECT_EQ(d.cluster[0], 2u);
  EXPECT_EQ(d.cluster[1], 1u);
  EXPECT_EQ(d.cluster[2], 1u);
  EXPECT_TRUE(d.cooperative);

  cuLaunchKernelEx_ptsz_params q{&config, Fn(0x3001), nullptr, nullptr};
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, &q, 0, nullptr, &d));
  EXPECT_EQ(d.api, LaunchApi::kLaunchKernelExPtsz);
  EXPECT_EQ(d.function, 0x3001u);
  EXPECT_EQ(d.cluster[0], 2u);

  // No attributes at all, and a null config.
  CUlaunchConfig plain{1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, 0};
  cuLaunchKernelEx_params r{&plain, Fn(0x3002), nullptr, nullptr};
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &r, 0, nullptr, &d));
  EXPECT_FALSE(d.cooperative);
  EXPECT_EQ(d.cluster[0], 0u);
  cuLaunchKernelEx_params null_config{nullptr, Fn(0x3003), nullptr, nullptr};
  EXPECT_FALSE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &null_config, 0, nullptr, &d));
}

// Programmatic dependent launch (cuda.h, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
// "programmaticStreamSerializationAllowed to non-0" lets the grid "overlap with the previous kernel
// in the stream"): the stall tracker must not take this kernel's end as its predecessor's.
TEST(LaunchDecoder, ProgrammaticStreamSerializationIsRead) {
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{1, 1, 1, 32, 1, 1, 0, nullptr, &attr, 1};
  cuLaunchKernelEx_params p{&config, Fn(0x3000), nullptr, nullptr};
  DecodedLaunch d;
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, 0, nullptr, &d));
  EXPECT_TRUE(d.programmatic_serialization);
  EXPECT_FALSE(d.cooperative);
  attr.value.programmaticStreamSerializationAllowed = 0;
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, 0, nullptr, &d));
  EXPECT_FALSE(d.programmatic_serialization);
}

TEST(LaunchDecoder, CooperativeLaunchesAreMarked) {
  cuLaunchCooperativeKernel_params p{Fn(0x4000), 8, 1, 1, 512, 1, 1, 0, St(0x1), nullptr};
  DecodedLaunch d;
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, &p, 0, nullptr, &d));
  EXPECT_TRUE(d.cooperative);
  EXPECT_EQ(d.api, LaunchApi::kLaunchCooperativeKernel);
  EXPECT_EQ(d.grid[0], 8u);
  cuLaunchCooperativeKernel_ptsz_params q{Fn(0x4001), 8, 1, 1, 512, 1, 1, 0, St(0x1), nullptr};
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, &q, 0, nullptr, &d));
  EXPECT_TRUE(d.cooperative);
  EXPECT_EQ(d.api, LaunchApi::kLaunchCooperativeKernelPtsz);
}

TEST(LaunchDecoder, MultiDeviceYieldsOneLaunchPerEntry) {
  CUDA_LAUNCH_PARAMS list[2] = {
      {Fn(0x5000), 4, 1, 1, 128, 1, 1, 1024, St(0x10), nullptr},
      {Fn(0x5001), 6, 1, 1, 256, 1, 1, 2048, St(0x20), nullptr},
  };
  cuLaunchCooperativeKernelMultiDevice_params p{list, 2, 0};
  ASSERT_EQ(LaunchCount(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice, &p), 2);
  DecodedLaunch d;
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice, &p, 1,
                           nullptr, &d));
  EXPECT_EQ(d.function, 0x5001u);
  EXPECT_EQ(d.grid[0], 6u);
  EXPECT_EQ(d.block[0], 256u);
  EXPECT_EQ(d.dyn_smem, 2048u);
  EXPECT_EQ(d.stream, 0x20u);
  EXPECT_TRUE(d.cooperative);
  EXPECT_FALSE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice, &p, 2,
                            nullptr, &d));
}

TEST(LaunchDecoder, LegacyLaunchesUseTheTrackedShape) {
  LegacyLaunchState legacy;
  legacy.block[0] = 16;
  legacy.block[1] = 8;
  legacy.smem = 512;
  cuLaunchGridAsync_params p{Fn(0x6000), 30, 40, St(0x9)};
  EXPECT_EQ(LegacyFunction(CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync, &p), 0x6000u);
  DecodedLaunch d;
  EXPECT_FALSE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync, &p, 0, nullptr, &d));
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync, &p, 0, &legacy, &d));
  EXPECT_EQ(d.grid[0], 30u);
  EXPECT_EQ(d.grid[1], 40u);
  EXPECT_EQ(d.grid[2], 1u);
  EXPECT_EQ(d.block[0], 16u);
  EXPECT_EQ(d.block[1], 8u);
  EXPECT_EQ(d.dyn_smem, 512u);
  EXPECT_EQ(d.stream, 0x9u);
  cuLaunch_params l{Fn(0x6001)};
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunch, &l, 0, &legacy, &d));
  EXPECT_EQ(d.grid[0], 1u);
  EXPECT_EQ(d.api, LaunchApi::kLaunch);
  cuLaunchGrid_params g{Fn(0x6002), 5, 6};
  ASSERT_TRUE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, &g, 0, &legacy, &d));
  EXPECT_EQ(d.grid[0], 5u);
  EXPECT_EQ(d.grid[1], 6u);
  EXPECT_EQ(d.stream, 0u);
}

TEST(LaunchDecoder, NonLaunchCallbacksAreNotLaunches) {
  cuLaunchKernel_params p{};
  EXPECT_FALSE(LaunchApiOf(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
  EXPECT_EQ(LaunchCount(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &p), 0);
  EXPECT_EQ(LaunchCount(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, nullptr), 0);
}

}  // namespace
}  // namespace cuflight::inject
