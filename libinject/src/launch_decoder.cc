#include "launch_decoder.h"

#include <cupti.h>


namespace cuflight::inject {
namespace {

uint64_t Handle(const void* p) { return reinterpret_cast<uintptr_t>(p); }

template <typename P>
void FromKernelParams(const P& p, DecodedLaunch* out) {
  out->function = Handle(p.f);
  out->grid[0] = p.gridDimX;
  out->grid[1] = p.gridDimY;
  out->grid[2] = p.gridDimZ;
  out->block[0] = p.blockDimX;
  out->block[1] = p.blockDimY;
  out->block[2] = p.blockDimZ;
  out->dyn_smem = p.sharedMemBytes;
  out->stream = Handle(p.hStream);
}

template <typename P>
bool FromLaunchConfig(const P& p, DecodedLaunch* out) {
  const CUlaunchConfig* config = p.config;
  if (config == nullptr) return false;
  out->function = Handle(p.f);
  out->grid[0] = config->gridDimX;
  out->grid[1] = config->gridDimY;
  out->grid[2] = config->gridDimZ;
  out->block[0] = config->blockDimX;
  out->block[1] = config->blockDimY;
  out->block[2] = config->blockDimZ;
  out->dyn_smem = config->sharedMemBytes;
  out->stream = Handle(config->hStream);
  if (config->attrs == nullptr) return true;
  for (unsigned int i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& attr = config->attrs[i];
    switch (attr.id) {
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        out->cluster[0] = attr.value.clusterDim.x;
        out->cluster[1] = attr.value.clusterDim.y;
        out->cluster[2] = attr.value.clusterDim.z;
        break;
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        out->cooperative = attr.value.cooperative != 0;
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        out->programmatic_serialization = attr.value.programmaticStreamSerializationAllowed != 0;
        break;
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        // A percentage; anything else (CU_SHAREDMEM_CARVEOUT_DEFAULT as unsigned) is no
        // preference.
        if (attr.value.sharedMemCarveout <= 100) {
          out->carveout = static_cast<int32_t>(attr.value.sharedMemCarveout);
        }
        break;
      default:
        break;
    }
  }
  return true;
}

}  // namespace

int LaunchCount(CUpti_CallbackId cbid, const void* params) noexcept {
  if (params == nullptr || !LaunchApiOf(cbid)) return 0;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice) {
    const auto* p = static_cast<const cuLaunchCooperativeKernelMultiDevice_params*>(params);
    return p->launchParamsList == nullptr ? 0 : static_cast<int>(p->numDevices);
  }
  return 1;
}

uint64_t LegacyFunction(CUpti_CallbackId cbid, const void* params) noexcept {
  if (params == nullptr) return 0;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunch:
      return Handle(static_cast<const cuLaunch_params*>(params)->f);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid:
      return Handle(static_cast<const cuLaunchGrid_params*>(params)->f);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync:
      return Handle(static_cast<const cuLaunchGridAsync_params*>(params)->f);
    default:
      return 0;
  }
}

bool DecodeLaunch(CUpti_CallbackId cbid, const void* params, int index,
                  const LegacyLaunchState* legacy, DecodedLaunch* out) noexcept {
  const std::optional<LaunchApi> api = LaunchApiOf(cbid);
  if (!api || params == nullptr) return false;
  *out = DecodedLaunch{};
  out->api = *api;
  out->per_thread_default_stream = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
                                   cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
                                   cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      FromKernelParams(*static_cast<const cuLaunchKernel_params*>(params), out);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      FromKernelParams(*static_cast<const cuLaunchKernel_ptsz_params*>(params), out);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      FromKernelParams(*static_cast<const cuLaunchCooperativeKernel_params*>(params), out);
      out->cooperative = true;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      FromKernelParams(*static_cast<const cuLaunchCooperativeKernel_ptsz_params*>(params), out);
      out->cooperative = true;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      return FromLaunchConfig(*static_cast<const cuLaunchKernelEx_params*>(params), out);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return FromLaunchConfig(*static_cast<const cuLaunchKernelEx_ptsz_params*>(params), out);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice: {
      const auto* p = static_cast<const cuLaunchCooperativeKernelMultiDevice_params*>(params);
      if (p->launchParamsList == nullptr || index < 0 ||
          static_cast<unsigned int>(index) >= p->numDevices) {
        return false;
      }
      const CUDA_LAUNCH_PARAMS& l = p->launchParamsList[index];
      out->function = Handle(l.function);
      out->grid[0] = l.gridDimX;
      out->grid[1] = l.gridDimY;
      out->grid[2] = l.gridDimZ;
      out->block[0] = l.blockDimX;
      out->block[1] = l.blockDimY;
      out->block[2] = l.blockDimZ;
      out->dyn_smem = l.sharedMemBytes;
      out->stream = Handle(l.hStream);
      out->cooperative = true;
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync: {
      if (legacy == nullptr) return false;
      out->function = LegacyFunction(cbid, params);
      for (int i = 0; i < 3; ++i) out->block[i] = legacy->block[i];
      out->dyn_smem = legacy->smem;
      if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid) {
        const auto* p = static_cast<const cuLaunchGrid_params*>(params);
        out->grid[0] = static_cast<uint32_t>(p->grid_width);
        out->grid[1] = static_cast<uint32_t>(p->grid_height);
      } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync) {
        const auto* p = static_cast<const cuLaunchGridAsync_params*>(params);
        out->grid[0] = static_cast<uint32_t>(p->grid_width);
        out->grid[1] = static_cast<uint32_t>(p->grid_height);
        out->stream = Handle(p->hStream);
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace cuflight::inject
