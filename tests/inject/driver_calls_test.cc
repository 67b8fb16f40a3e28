// Every driver call the recorder makes from inside a CUPTI callback raises a callback of its own
// (cupti_callbacks.h: the driver API domain covers "every CUDA driver API function"), on the same
// thread, while the first one has not returned. Each such nested callback must be ignored: no
// launch recorded from it, no api_error, and the launch that made the call recorded once
// (own_calls.h). The fake driver raises the recorder's callback re-entrantly after each call
// (FakeCuda::after_driver_call); one test per call, over the three scenarios that make them all.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "inject_test_support.h"

namespace cuflight::inject::testing {
namespace {

constexpr uint64_t kF = 0x1000;
constexpr uint64_t kKernel = 0x7000;
constexpr uint64_t kGreen = 0x6E;
constexpr const char* kMangled = "_Z6kernelPfi";

size_t Records(LaunchRing& ring, uint32_t* nested_correlation_ids) {
  size_t n = 0;
  LaunchRecord r;
  while (ring.TryPop(&r)) {
    ++n;
    if (r.correlation_id == 999) ++*nested_correlation_ids;
  }
  return n;
}

void Prepare(Harness& h) {
  h.fake.functions[kF] = FakeFunction{};
  h.fake.functions[kF].module = 0xAB;
  h.fake.kernels[kKernel].functions[0] = kF;
  h.fake.kernels[kKernel].library = 0xCD;
  h.fake.stream_context[kStream] = kContext;
  h.fake.stream_green[kStream] = kGreen;  // a stream of a 16-SM green context
  h.fake.green_sms[kGreen] = 16;
  h.fake.max_active_clusters = 10;
}

// The scenarios: 0, a runtime-style launch (a CUkernel) on a green context's stream, the first on
// its device; 1, a cluster launch on the NULL stream while another stream is captured; 2, a
// cuDevicePrimaryCtxRelease. Returns
// the launches each should record.
size_t RunScenario(Harness& h, int scenario) {
  if (scenario == 0) {
    cuLaunchKernel_params p{Fn(kKernel), 64, 1, 1, 128, 1, 1, 0, St(kStream), nullptr, nullptr};
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 1);
    return 1;
  }
  if (scenario == 1) {
    // Another stream is being captured (cuStreamBeginCapture_v2 returned): the launch's stream
    // is asked whether it is too (cuStreamIsCapturing), before anything else.
    cuStreamBeginCapture_v2_params begin{St(0x99), CU_STREAM_CAPTURE_MODE_GLOBAL};
    Callback capture(&begin, nullptr, 20);
    h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API,
                           CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &capture.data);
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    CUlaunchConfig config{132, 1, 1, 128, 1, 1, 0, nullptr, &attr, 1};
    cuLaunchKernelEx_params p{&config, Fn(kF), nullptr, nullptr};
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p, kMangled, 2);
    return 1;
  }
  cuDevicePrimaryCtxRelease_v2_params release{0};
  Callback cb(&release, nullptr, 3);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API,
                         CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2, &cb.data);
  return 0;
}

// The calls the recorder makes inside callbacks in these scenarios. Not among them:
// cuCtxGetDevice (cuptiGetDeviceId is asked instead: cupti_activity.h, "may be called from
// within callback functions"), cuDriverGetVersion (set-up), cuGetErrorName and cuGetErrorString
// (the sender thread).
const std::vector<std::string> kCallsInCallbacks = {
    "cuStreamIsCapturing",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDeviceGetUuid",
    "cuStreamGetCtx",
    "cuFuncGetAttribute",
    "cuKernelGetAttribute",
    "cuKernelGetFunction",
    "cuKernelGetLibrary",
    "cuFuncGetModule",
    "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cuOccupancyMaxActiveClusters",
    "cuOccupancyMaxPotentialClusterSize",
    "cuStreamGetGreenCtx",
    "cuGreenCtxGetDevResource",
    "cuCtxGetDevResource",
    "cuDevicePrimaryCtxGetState",
};

TEST(DriverCallsInCallbacks, TheScenariosMakeEveryCallListed) {
  std::set<std::string> seen;
  for (int scenario = 0; scenario < 3; ++scenario) {
    Harness h;
    Prepare(h);
    h.fake.after_driver_call = [&](const char* call, CUresult) { seen.insert(call); };
    RunScenario(h, scenario);
  }
  EXPECT_EQ(seen, std::set<std::string>(kCallsInCallbacks.begin(), kCallsInCallbacks.end()));
}

class ReentrantCallback : public ::testing::TestWithParam<std::string> {};

TEST_P(ReentrantCallback, RaisedByTheLibrarysOwnCallIsIgnored) {
  size_t nested = 0;
  size_t recorded = 0;
  uint32_t nested_records = 0;
  for (int scenario = 0; scenario < 3; ++scenario) {
    Harness h;
    Prepare(h);
    const int no_params = 0;
    h.fake.after_driver_call = [&](const char* call, CUresult) {
      if (GetParam() != call) return;
      ++nested;
      // What CUPTI raises for the library's call, as if it were a launch and as if it failed.
      cuLaunchKernel_params p{Fn(kF), 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr};
      h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kMangled, 999);
      Callback failed(&no_params, nullptr, 999);
      failed.result = CUDA_ERROR_INVALID_VALUE;
      h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
                             &failed.data);
    };
    const size_t expected = RunScenario(h, scenario);
    h.fake.after_driver_call = nullptr;
    const size_t got = Records(*h.ring, &nested_records);
    recorded += got;
    EXPECT_EQ(got, expected) << "scenario " << scenario;
    EXPECT_EQ(h.recorder->api_errors(), 0u) << "scenario " << scenario;
  }
  EXPECT_GT(nested, 0u) << GetParam() << " was not called";
  EXPECT_EQ(nested_records, 0u);
  EXPECT_EQ(recorded, 2u);
}

INSTANTIATE_TEST_SUITE_P(EachCall, ReentrantCallback, ::testing::ValuesIn(kCallsInCallbacks),
                         [](const ::testing::TestParamInfo<std::string>& call) {
                           return call.param;
                         });

}  // namespace
}  // namespace cuflight::inject::testing
