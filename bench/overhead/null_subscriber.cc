// The floor of a CUPTI callback subscriber: an injection library (CUDA_INJECTION64_PATH) that
// subscribes to the driver API callbacks exactly as libcuflight_inject.so does by default (the
// whole driver domain, less the queries libraries make at a high rate: driver_queries.h)
// and whose callback returns at once. bench/overhead/run.py --baseline-inject
// BUILD/lib/libcuflight_null_subscriber.so measures it beside cuflight: what cuflight costs beyond
// it is cuflight's own work, the rest is CUPTI's.
//
// libcupti is loaded as the injector loads it first: $CUFLIGHT_CUPTI_PATH, else libcupti.so.13
// from the loader's path, else the toolkit's /usr/local/cuda/lib64.
#include <cupti.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "driver_queries.h"  // libinject/src

namespace {

using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
using EnableDomainFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
using EnableCallbackFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                         CUpti_CallbackId);

void CUPTIAPI Ignore(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void* LoadCupti() {
  const char* env = std::getenv("CUFLIGHT_CUPTI_PATH");
  for (const char* path : {env, "libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13"}) {
    if (path == nullptr || *path == '\0') continue;
    if (void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  return nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  void* cupti = LoadCupti();
  if (cupti == nullptr) {
    std::fprintf(stderr, "null_subscriber: cannot load libcupti\n");
    return 1;
  }
  auto subscribe = reinterpret_cast<SubscribeFn>(dlsym(cupti, "cuptiSubscribe"));
  auto enable_domain = reinterpret_cast<EnableDomainFn>(dlsym(cupti, "cuptiEnableDomain"));
  auto enable_callback = reinterpret_cast<EnableCallbackFn>(dlsym(cupti, "cuptiEnableCallback"));
  CUpti_SubscriberHandle subscriber = nullptr;
  if (subscribe == nullptr || enable_domain == nullptr || enable_callback == nullptr ||
      subscribe(&subscriber, &Ignore, nullptr) != CUPTI_SUCCESS ||
      enable_domain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "null_subscriber: cannot subscribe\n");
    return 1;
  }
  for (const CUpti_CallbackId cbid : cuflight::inject::kUnsubscribedQueries) {
    enable_callback(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
  return 1;
}
