// Which driver API callbacks libcuflight_inject.so enables for each CUFLIGHT_API_ERRORS setting,
// read back from the fake CUPTI (cuptiEnableCallback / cuptiEnableDomain, cupti_callbacks.h), and
// which failed calls then become api_error events; and the overhead benchmark's null subscriber,
// which must subscribe as the injector does (bench/overhead/null_subscriber.cc).
//
// Callback ids are cupti_driver_cbid.h's; the driver domain's ids are 1 ..
// CUPTI_DRIVER_TRACE_CBID_SIZE - 1. The high-rate calls named here are the ones the
// default setting keeps out (driver_queries.h, point 3).
#include <cupti.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>

#include <map>
#include <memory>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "running_collector.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

using cuflight::testing::RunProcess;
using test_support::StoringCollector;
using test_support::TempSocketPath;

// The failed calls each run makes: a memory allocation out of memory, a stream synchronize with
// a bad handle, an event query with a bad value (not NOT_READY: not routine), a context switch
// with a bad context (cuda.h: CUDA_ERROR_OUT_OF_MEMORY 2, CUDA_ERROR_INVALID_HANDLE 400,
// CUDA_ERROR_INVALID_VALUE 1, CUDA_ERROR_INVALID_CONTEXT 201).
constexpr int kMemAlloc = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2;
constexpr int kStreamSync = CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize;
constexpr int kEventQuery = CUPTI_DRIVER_TRACE_CBID_cuEventQuery;
constexpr int kCtxSetCurrent = CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent;
const std::vector<std::string> kCalls = {
    std::to_string(kMemAlloc) + ":2", std::to_string(kStreamSync) + ":400",
    std::to_string(kEventQuery) + ":1", std::to_string(kCtxSetCurrent) + ":201"};

// The high-rate calls.
const int kHighRate[] = {
    CUPTI_DRIVER_TRACE_CBID_cuEventQuery,
    CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,
    CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecord,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags,
    CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent,
    CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
};
// Taken in every setting: launches, what the recorder caches, the synchronising calls, graph
// launches (a hang inside a graph names its launch).
const int kAlways[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,       CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,  CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2,
    CUPTI_DRIVER_TRACE_CBID_cuModuleUnload,       CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,  CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,     CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};
// Ordinary calls whose failures matter, taken with `default` and `all` only.
const int kOrdinary[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,  CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2,
};

std::set<int> WholeDomain() {
  std::set<int> all;
  for (int cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) all.insert(cbid);
  return all;
}

struct Outcome {
  std::set<int> enabled;
  std::map<int, int> called;  // cbid -> 1 when called back
  std::multiset<int> api_error_codes;
  std::string err;
};

class Subscription : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"FAKE_CUPTI_MODE", "FAKE_CUPTI_TIMING", "FAKE_CUPTI_CALL_LOG",
                             "CUFLIGHT_API_ERRORS", "CUFLIGHT_NULL_CALLBACKS",
                             "CUFLIGHT_STALL_MS", "CUFLIGHT_COLLECTOR"}) {
      unsetenv(name);
    }
    setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
    setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
  }

  // fake_app <library> 3 calls <kCalls>, with a collector when the library is the injector.
  static Outcome Run(const char* library) {
    Outcome o;
    const bool injector = std::string(library) == CUFLIGHT_INJECT_SO;
    const std::string path = TempSocketPath("subscription");
    std::unique_ptr<StoringCollector> collector;
    if (injector) {
      collector = std::make_unique<StoringCollector>(path);
      setenv("CUFLIGHT_COLLECTOR", path.c_str(), 1);
    }
    std::vector<std::string> args = {library, "3", "calls"};
    args.insert(args.end(), kCalls.begin(), kCalls.end());
    const auto r = RunProcess(CUFLIGHT_FAKE_APP, args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    o.err = r.err;
    std::istringstream out(r.out);
    for (std::string line; std::getline(out, line);) {
      if (line.rfind("enabled=", 0) == 0) {
        std::istringstream ids(line.substr(8));
        for (std::string id; std::getline(ids, id, ',');) o.enabled.insert(std::stoi(id));
      }
      int cbid = 0;
      int called = 0;
      if (std::sscanf(line.c_str(), "called %d=%d", &cbid, &called) == 2) o.called[cbid] = called;
    }
    if (!injector) return o;
    EXPECT_TRUE(collector->WaitFor([](const std::vector<std::string>& lines) {
      return !lines.empty() && lines.back().find("\"process_end\"") != std::string::npos;
    }));
    for (const std::string& line : collector->Lines()) {
      const schema::DecodeResult d = schema::Decode(line);
      EXPECT_TRUE(d.ok()) << d.message;
      if (const auto* e = std::get_if<schema::OwnedApiErrorEvent>(&d.event)) {
        o.api_error_codes.insert(e->code);
      }
    }
    unsetenv("CUFLIGHT_COLLECTOR");
    return o;
  }

  static Outcome RunInjector(const char* setting) {
    if (setting == nullptr) {
      unsetenv("CUFLIGHT_API_ERRORS");
    } else {
      setenv("CUFLIGHT_API_ERRORS", setting, 1);
    }
    return Run(CUFLIGHT_INJECT_SO);
  }
};

void ExpectEnabled(const Outcome& o, std::span<const int> ids, bool enabled, const char* what) {
  for (int id : ids) {
    EXPECT_EQ(o.enabled.count(id), enabled ? 1u : 0u) << what << " callback id " << id;
  }
}
#define EXPECT_ENABLED(o, ids, on) ExpectEnabled(o, ids, on, #ids)

TEST_F(Subscription, OffAndLaunchesTakeOnlyTheNeededCalls) {
  for (const char* setting : {"off", "launches"}) {
    SCOPED_TRACE(setting);
    const Outcome o = RunInjector(setting);
    EXPECT_ENABLED(o, kAlways, true);
    EXPECT_ENABLED(o, kOrdinary, false);
    EXPECT_ENABLED(o, kHighRate, false);
    EXPECT_LT(o.enabled.size(), 60u);  // a list, not the domain
    // Only the synchronize among the four calls was called back.
    EXPECT_EQ(o.called, (std::map<int, int>{
                            {kMemAlloc, 0}, {kStreamSync, 1}, {kEventQuery, 0}, {kCtxSetCurrent, 0}}));
    if (std::string(setting) == "off") {
      EXPECT_TRUE(o.api_error_codes.empty());
    } else {
      EXPECT_EQ(o.api_error_codes, (std::multiset<int>{400}));
    }
  }
}

TEST_F(Subscription, DefaultIsTheDomainLessTheHighRateCalls) {
  const Outcome o = RunInjector(nullptr);  // unset: the default
  EXPECT_ENABLED(o, kAlways, true);
  EXPECT_ENABLED(o, kOrdinary, true);
  EXPECT_ENABLED(o, kHighRate, false);
  const size_t domain = CUPTI_DRIVER_TRACE_CBID_SIZE - 1;
  EXPECT_GT(o.enabled.size(), domain - 80);  // the whole domain less a few dozen
  // The allocation and the synchronize fail as api_error events; the query and the context
  // switch are never called back, so cost nothing and report nothing.
  EXPECT_EQ(o.called, (std::map<int, int>{
                          {kMemAlloc, 1}, {kStreamSync, 1}, {kEventQuery, 0}, {kCtxSetCurrent, 0}}));
  EXPECT_EQ(o.api_error_codes, (std::multiset<int>{2, 400}));
  EXPECT_EQ(RunInjector("default").enabled, o.enabled);
  EXPECT_EQ(RunInjector("1").enabled, o.enabled) << "the old boolean's true";
}

TEST_F(Subscription, AllIsTheWholeDomain) {
  const Outcome o = RunInjector("all");
  EXPECT_EQ(o.enabled, WholeDomain());
  EXPECT_EQ(o.called, (std::map<int, int>{
                          {kMemAlloc, 1}, {kStreamSync, 1}, {kEventQuery, 1}, {kCtxSetCurrent, 1}}));
  EXPECT_EQ(o.api_error_codes, (std::multiset<int>{1, 2, 201, 400}));
}

TEST_F(Subscription, TheOldBooleansFalseIsOff) {
  EXPECT_EQ(RunInjector("0").enabled, RunInjector("off").enabled);
}

TEST_F(Subscription, TheNullSubscriberSubscribesAsTheInjectorDoes) {
#ifndef CUFLIGHT_NULL_SUBSCRIBER_SO
  GTEST_SKIP() << "libcuflight_null_subscriber.so is built with the examples (nvcc)";
#else
  const std::pair<const char*, const char*> pairs[] = {
      {"launches", "launches"}, {"default", "default"}, {"all", "all"}};
  for (const auto& [null_setting, injector_setting] : pairs) {
    SCOPED_TRACE(null_setting);
    setenv("CUFLIGHT_NULL_CALLBACKS", null_setting, 1);
    const Outcome null = Run(CUFLIGHT_NULL_SUBSCRIBER_SO);
    EXPECT_EQ(null.err, "");
    EXPECT_EQ(null.enabled, RunInjector(injector_setting).enabled);
  }
  setenv("CUFLIGHT_NULL_CALLBACKS", "none", 1);
  const Outcome none = Run(CUFLIGHT_NULL_SUBSCRIBER_SO);
  EXPECT_TRUE(none.enabled.empty());
  EXPECT_EQ(none.called, (std::map<int, int>{
                             {kMemAlloc, 0}, {kStreamSync, 0}, {kEventQuery, 0}, {kCtxSetCurrent, 0}}));
  unsetenv("CUFLIGHT_NULL_CALLBACKS");  // unset: the injector's default
  EXPECT_EQ(Run(CUFLIGHT_NULL_SUBSCRIBER_SO).enabled, RunInjector(nullptr).enabled);
#endif
}

}  // namespace
}  // namespace cuflight::inject::testing
