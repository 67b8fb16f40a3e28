// The floor of a CUPTI callback subscriber: an injection library (CUDA_INJECTION64_PATH) that
// subscribes to the driver API callbacks as libcuflight_inject.so does and whose callback returns
// at once. bench/overhead/run.py --baseline-inject BUILD/lib/libcuflight_null_subscriber.so
// measures it beside cuflight: what cuflight costs beyond it is cuflight's own work, the rest is
// CUPTI's.
//
// CUFLIGHT_NULL_CALLBACKS says which callbacks, with the injector's lists (driver_queries.h):
//   none      subscribe and enable nothing: the cost of a subscription alone
//   launches  the calls the injector always takes (launches, cache invalidations, synchronising
//             calls): the injector's subscription with CUFLIGHT_API_ERRORS=launches or off
//   default   the whole driver domain less the high-rate calls: the injector's default
//             (CUFLIGHT_API_ERRORS=default); also when unset
//   all       the whole driver domain (CUFLIGHT_API_ERRORS=all)
// Another value: a line on stderr, and `default`.
//
// libcupti is loaded as the injector loads it first: $CUFLIGHT_CUPTI_PATH, else libcupti.so.13
// from the loader's path, else the toolkit's /usr/local/cuda/lib64.
#include <cupti.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "driver_queries.h"  // libinject/src

namespace {

using cuflight::inject::DriverSubscription;
using cuflight::inject::EnableCallbackFn;
using cuflight::inject::EnableDomainFn;
using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);

DriverSubscription ReadSubscription() {
  const char* value = std::getenv("CUFLIGHT_NULL_CALLBACKS");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "default") == 0) {
    return DriverSubscription::kDefault;
  }
  if (std::strcmp(value, "none") == 0) return DriverSubscription::kNone;
  if (std::strcmp(value, "launches") == 0) return DriverSubscription::kNeeded;
  if (std::strcmp(value, "all") == 0) return DriverSubscription::kAll;
  std::fprintf(stderr,
               "null_subscriber: CUFLIGHT_NULL_CALLBACKS='%s' is not one of none, launches, "
               "default, all; using default\n",
               value);
  return DriverSubscription::kDefault;
}

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
      !cuflight::inject::EnableDriverCallbacks(ReadSubscription(), subscriber, enable_domain,
                                               enable_callback)) {
    std::fprintf(stderr, "null_subscriber: cannot subscribe\n");
    return 1;
  }
  return 1;
}
