#include "device_query.h"

#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include "cuflight/occupancy/device_attributes.h"

namespace cuflight::cli {
namespace {

// The driver entry points used, resolved by name from libcuda.so.1. None of these names is
// redirected to a versioned symbol (_v2...) by cuda.h, so the plain name is the right symbol.
struct DriverApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDeviceGetCount) get_count = nullptr;
  decltype(&::cuDeviceGet) get = nullptr;
  decltype(&::cuDeviceGetName) get_name = nullptr;
  decltype(&::cuDeviceGetAttribute) get_attribute = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;  // optional
};

template <typename Fn>
bool Resolve(void* library, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  return *fn != nullptr;
}

class DriverDeviceQuery final : public DeviceQuery {
 public:
  bool Query(int ordinal, QueriedDevice* device, std::string* error) override {
    if (!Load(error)) return false;
    int count = 0;
    if (!Check(api_.get_count(&count), "cuDeviceGetCount", error)) return false;
    if (ordinal < 0 || ordinal >= count) {
      *error = fmt::format("no CUDA device {} (this machine has {} device{})", ordinal, count,
                           count == 1 ? "" : "s");
      return false;
    }
    CUdevice dev = 0;
    if (!Check(api_.get(&dev, ordinal), "cuDeviceGet", error)) return false;
    device_ = dev;
    char name[256] = {};
    if (!Check(api_.get_name(name, sizeof(name) - 1, dev), "cuDeviceGetName", error)) return false;
    device->name = name;

    occupancy::DeviceAttributeError attribute_error;
    if (!occupancy::ReadDeviceLimits(&DriverDeviceQuery::GetAttribute, this, &device->limits,
                                     &attribute_error)) {
      const std::string call =
          fmt::format("cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_{})", attribute_error.attribute);
      Check(static_cast<CUresult>(attribute_error.result), call.c_str(), error);
      return false;
    }
    return true;
  }

 private:
  static int GetAttribute(void* self, int attribute, int* value) {
    auto* query = static_cast<DriverDeviceQuery*>(self);
    return static_cast<int>(query->api_.get_attribute(
        value, static_cast<CUdevice_attribute>(attribute), query->device_));
  }

  bool Load(std::string* error) {
    if (loaded_) return true;
    if (library_ == nullptr) {
      // Never dlclose'd: unloading the driver after cuInit is not supported.
      library_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (library_ == nullptr) {
        const char* why = dlerror();
        *error = fmt::format("no CUDA driver ({})", why != nullptr ? why : "libcuda.so.1");
        return false;
      }
    }
    const bool resolved = Resolve(library_, "cuInit", &api_.init) &&
                          Resolve(library_, "cuDeviceGetCount", &api_.get_count) &&
                          Resolve(library_, "cuDeviceGet", &api_.get) &&
                          Resolve(library_, "cuDeviceGetName", &api_.get_name) &&
                          Resolve(library_, "cuDeviceGetAttribute", &api_.get_attribute);
    if (!resolved) {
      *error = "unusable CUDA driver (libcuda.so.1 lacks cuInit or cuDeviceGetAttribute)";
      return false;
    }
    Resolve(library_, "cuGetErrorName", &api_.get_error_name);
    if (!Check(api_.init(0), "cuInit", error)) return false;
    loaded_ = true;
    return true;
  }

  bool Check(CUresult result, const char* call, std::string* error) const {
    if (result == CUDA_SUCCESS) return true;
    const char* name = nullptr;
    if (api_.get_error_name == nullptr || api_.get_error_name(result, &name) != CUDA_SUCCESS ||
        name == nullptr) {
      name = "unknown error";
    }
    *error = fmt::format("{} failed: {} ({})", call, name, static_cast<int>(result));
    return false;
  }

  void* library_ = nullptr;
  bool loaded_ = false;
  CUdevice device_ = 0;
  DriverApi api_;
};

}  // namespace

std::unique_ptr<DeviceQuery> MakeDriverDeviceQuery() {
  return std::make_unique<DriverDeviceQuery>();
}

void SetClusterLimits(occupancy::DeviceLimits* limits) { occupancy::SetClusterLimits(limits); }

}  // namespace cuflight::cli
