#include "device_query.h"

#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>

namespace cuflight::cli {
namespace {

constexpr int kPortableClusterSize = 8;
constexpr int kNonPortableClusterSize = 16;

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
    char name[256] = {};
    if (!Check(api_.get_name(name, sizeof(name) - 1, dev), "cuDeviceGetName", error)) return false;
    device->name = name;

    occupancy::DeviceLimits& l = device->limits;
    int64_t smem_per_sm = 0;
    int64_t smem_per_block = 0;
    int64_t smem_per_block_optin = 0;
    int64_t reserved = 0;
    const struct {
      CUdevice_attribute attribute;
      const char* name;
      int* int_value;
      int64_t* wide_value;
    } kAttributes[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR", &l.cc_major,
         nullptr},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR", &l.cc_minor,
         nullptr},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT", &l.sm_count, nullptr},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "MAX_THREADS_PER_BLOCK",
         &l.max_threads_per_block, nullptr},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "MAX_THREADS_PER_MULTIPROCESSOR",
         &l.max_threads_per_sm, nullptr},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, "MAX_BLOCKS_PER_MULTIPROCESSOR",
         &l.max_blocks_per_sm, nullptr},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, "MAX_REGISTERS_PER_MULTIPROCESSOR",
         &l.regs_per_sm, nullptr},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "MAX_REGISTERS_PER_BLOCK", &l.regs_per_block,
         nullptr},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
         "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", nullptr, &smem_per_sm},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "MAX_SHARED_MEMORY_PER_BLOCK", nullptr,
         &smem_per_block},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
         nullptr, &smem_per_block_optin},
        {CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, "RESERVED_SHARED_MEMORY_PER_BLOCK",
         nullptr, &reserved},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, "WARP_SIZE", &l.warp_size, nullptr},
    };
    for (const auto& a : kAttributes) {
      int value = 0;
      const std::string call = fmt::format("cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_{})", a.name);
      if (!Check(api_.get_attribute(&value, a.attribute, dev), call.c_str(), error)) return false;
      if (a.int_value != nullptr) *a.int_value = value;
      if (a.wide_value != nullptr) *a.wide_value = value;
    }
    l.smem_per_sm = smem_per_sm;
    l.smem_per_block = smem_per_block;
    l.smem_per_block_optin = smem_per_block_optin;
    l.reserved_smem_per_block = reserved;
    SetClusterLimits(&l);
    return true;
  }

 private:
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
  DriverApi api_;
};

}  // namespace

std::unique_ptr<DeviceQuery> MakeDriverDeviceQuery() {
  return std::make_unique<DriverDeviceQuery>();
}

void SetClusterLimits(occupancy::DeviceLimits* limits) {
  if (limits->cc_major < 9) {
    limits->max_cluster_size = 0;
    limits->max_cluster_size_non_portable = 0;
    return;
  }
  limits->max_cluster_size = kPortableClusterSize;
  const bool non_portable_16 =
      limits->cc_minor == 0 && (limits->cc_major == 9 || limits->cc_major == 10);
  limits->max_cluster_size_non_portable =
      non_portable_16 ? kNonPortableClusterSize : kPortableClusterSize;
}

}  // namespace cuflight::cli
