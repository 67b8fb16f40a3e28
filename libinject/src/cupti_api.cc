#include "cupti_api.h"

#include <dlfcn.h>

#include <cstdlib>

namespace cuflight::inject {
namespace {

template <typename Fn>
bool Resolve(void* library, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  return *fn != nullptr;
}

bool ResolveAll(void* library, CuptiApi* api) {
  const bool ok =
      Resolve(library, "cuptiSubscribe", &api->Subscribe) &&
      Resolve(library, "cuptiUnsubscribe", &api->Unsubscribe) &&
      Resolve(library, "cuptiEnableCallback", &api->EnableCallback) &&
      Resolve(library, "cuptiGetVersion", &api->GetVersion) &&
      Resolve(library, "cuptiGetResultString", &api->GetResultString) &&
      Resolve(library, "cuptiGetDeviceId", &api->GetDeviceId) &&
      Resolve(library, "cuptiActivityEnable", &api->ActivityEnable) &&
      Resolve(library, "cuptiActivityDisable", &api->ActivityDisable) &&
      Resolve(library, "cuptiActivityRegisterCallbacks", &api->ActivityRegisterCallbacks) &&
      Resolve(library, "cuptiActivityFlushAll", &api->ActivityFlushAll) &&
      Resolve(library, "cuptiActivityGetNextRecord", &api->ActivityGetNextRecord) &&
      Resolve(library, "cuptiActivityGetNumDroppedRecords", &api->ActivityGetNumDroppedRecords);
  if (!ok) return false;
  Resolve(library, "cuptiSubscribe_v2", &api->SubscribeV2);
  Resolve(library, "cuptiFinalize", &api->Finalize);
  Resolve(library, "cuptiEnableDomain", &api->EnableDomain);
  Resolve(library, "cuptiGetCallbackName", &api->GetCallbackName);
  return true;
}

}  // namespace

std::vector<std::string> CuptiCandidates(const char* env_path, const char* cuda_home,
                                         const char* cuda_path) {
  std::vector<std::string> out;
  if (env_path != nullptr && *env_path != '\0') out.emplace_back(env_path);
  out.emplace_back("libcupti.so.13");
  out.emplace_back("libcupti.so");
  std::vector<std::string> roots;
  for (const char* root : {cuda_home, cuda_path}) {
    if (root != nullptr && *root != '\0') roots.emplace_back(root);
  }
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    for (const char* dir : {"/extras/CUPTI/lib64/", "/lib64/", "/lib/", "/targets/x86_64-linux/lib/"}) {
      out.push_back(root + dir + "libcupti.so");
    }
  }
  out.emplace_back("/usr/lib/x86_64-linux-gnu/libcupti.so");
  return out;
}

bool LoadCuptiApi(CuptiApi* api, std::string* loaded_from, std::string* error) {
  const std::vector<std::string> candidates = CuptiCandidates(
      std::getenv("CUFLIGHT_CUPTI_PATH"), std::getenv("CUDA_HOME"), std::getenv("CUDA_PATH"));
  std::string tried;
  for (const std::string& path : candidates) {
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      if (!tried.empty()) tried += ", ";
      tried += path;
      continue;
    }
    CuptiApi resolved;
    if (ResolveAll(library, &resolved)) {
      *api = resolved;
      *loaded_from = path;
      return true;  // never dlclose'd: CUPTI stays loaded for the life of the process
    }
    dlclose(library);
    if (!tried.empty()) tried += ", ";
    tried += path + " (missing entry points)";
  }
  *error = "libcupti not found (tried " + tried + "; set CUFLIGHT_CUPTI_PATH)";
  return false;
}

}  // namespace cuflight::inject
