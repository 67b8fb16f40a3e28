#include "cupti_api.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

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
  Resolve(library, "cuptiGetContextId", &api->GetContextId);
  Resolve(library, "cuptiGetStreamIdEx", &api->GetStreamIdEx);
  Resolve(library, "cuptiGetGraphExecId", &api->GetGraphExecId);
  Resolve(library, "cuptiActivityRegisterCallbacks_v2", &api->ActivityRegisterCallbacksV2);
  Resolve(library, "cuptiActivityEnable_v2", &api->ActivityEnableV2);
  Resolve(library, "cuptiActivityDisable_v2", &api->ActivityDisableV2);
  Resolve(library, "cuptiActivityGetNextRecord_v2", &api->ActivityGetNextRecordV2);
  Resolve(library, "cuptiActivityGetNumDroppedRecords_v2", &api->ActivityGetNumDroppedRecordsV2);
  Resolve(library, "cuptiActivityEnableAllSyncRecords", &api->ActivityEnableAllSyncRecords);
  Resolve(library, "cuptiActivitySetAttribute", &api->ActivitySetAttribute);
  return true;
}

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool IsCupti(std::string_view path) { return BaseName(path).starts_with("libcupti.so"); }

// ".../site-packages/" (or dist-packages) of a path inside a Python environment, or "".
std::string SitePackagesOf(std::string_view path) {
  for (std::string_view marker : {"/site-packages/", "/dist-packages/"}) {
    if (const size_t at = path.find(marker); at != std::string_view::npos) {
      return std::string(path.substr(0, at + marker.size()));
    }
  }
  return {};
}

void AddUnique(std::vector<std::string>* out, std::string path) {
  if (std::find(out->begin(), out->end(), path) == out->end()) out->push_back(std::move(path));
}

void AddWheelCandidates(std::vector<std::string>* out, const std::string& site_packages) {
  AddUnique(out, site_packages + "nvidia/cu13/lib/libcupti.so.13");
  AddUnique(out, site_packages + "nvidia/cuda_cupti/lib/libcupti.so.13");
}

int CollectObject(dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
    static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
  }
  return 0;
}

}  // namespace

bool UsesSubscriberActivityApi(const CuptiApi& api, uint32_t cupti_version, int driver_version) {
  return cupti_version >= kCuptiVersionMultiSubscriber &&
         driver_version >= kDriverVersionMultiSubscriber && api.SubscribeV2 != nullptr &&
         api.ActivityRegisterCallbacksV2 != nullptr && api.ActivityEnableV2 != nullptr &&
         api.ActivityDisableV2 != nullptr && api.ActivityGetNextRecordV2 != nullptr &&
         api.ActivityGetNumDroppedRecordsV2 != nullptr;
}

int KernelRecordVersion(uint32_t cupti_api_version) noexcept {
  if (cupti_api_version < kCuptiApiVersionForActivityLayout) return 0;
  if (cupti_api_version < 130100) return 10;
  if (cupti_api_version < 130300) return 11;
  if (cupti_api_version < 130400) return 12;
  if (cupti_api_version <= kCuptiApiVersionNewestKnownLayout) return 13;
  return 0;
}

std::vector<std::string> LoadedObjects() {
  std::vector<std::string> out;
  dl_iterate_phdr(&CollectObject, &out);
  return out;
}

std::vector<std::string> CuptiCandidates(const CuptiSearch& search) {
  std::vector<std::string> out;
  for (const std::string& object : search.loaded_objects) {
    if (IsCupti(object)) AddUnique(&out, object);
  }
  if (search.env_path != nullptr && *search.env_path != '\0') AddUnique(&out, search.env_path);
  AddUnique(&out, "libcupti.so.13");
  AddUnique(&out, "libcupti.so");
  for (const std::string& object : search.loaded_objects) {
    if (std::string site = SitePackagesOf(object); !site.empty()) AddWheelCandidates(&out, site);
  }
  if (search.virtual_env != nullptr && *search.virtual_env != '\0') {
    glob_t found{};
    const std::string pattern = std::string(search.virtual_env) + "/lib/python3*/site-packages/";
    if (glob(pattern.c_str(), GLOB_ONLYDIR, nullptr, &found) == 0) {
      for (size_t i = 0; i < found.gl_pathc; ++i) AddWheelCandidates(&out, found.gl_pathv[i]);
    }
    globfree(&found);
  }
  if (search.conda_prefix != nullptr && *search.conda_prefix != '\0') {
    AddUnique(&out, std::string(search.conda_prefix) + "/lib/libcupti.so.13");
  }
  std::vector<std::string> roots;
  for (const char* root : {search.cuda_home, search.cuda_path}) {
    if (root != nullptr && *root != '\0') roots.emplace_back(root);
  }
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    for (const char* dir : {"/extras/CUPTI/lib64/", "/lib64/", "/lib/", "/targets/x86_64-linux/lib/"}) {
      AddUnique(&out, root + dir + "libcupti.so");
    }
  }
  AddUnique(&out, "/usr/lib/x86_64-linux-gnu/libcupti.so");
  return out;
}

bool LoadCuptiApi(CuptiApi* api, std::string* loaded_from, std::string* error) {
  CuptiSearch search;
  search.env_path = std::getenv("CUFLIGHT_CUPTI_PATH");
  search.cuda_home = std::getenv("CUDA_HOME");
  search.cuda_path = std::getenv("CUDA_PATH");
  search.virtual_env = std::getenv("VIRTUAL_ENV");
  search.conda_prefix = std::getenv("CONDA_PREFIX");
  search.loaded_objects = LoadedObjects();
  const std::vector<std::string> candidates = CuptiCandidates(search);
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
