#include "context_sms.h"

#include <cuda.h>

#include "driver_api.h"
#include "mix64.h"
#include "stream_ids.h"

namespace cuflight::inject {
int ContextSms::Ask(const DriverApi& driver, uint64_t context, uint64_t stream) noexcept {
  CUdevResource resource{};
  // cuStreamGetGreenCtx: "Returns the CUDA green context that the stream is associated with, or
  // NULL if the stream is not associated with any green context" (cuda.h, CUDA 13.0).
  CUgreenCtx green = nullptr;
  if (!IsNullStream(stream) && driver.StreamGetGreenCtx != nullptr &&
      driver.GreenCtxGetDevResource != nullptr &&
      driver.StreamGetGreenCtx(reinterpret_cast<CUstream>(stream), &green) == CUDA_SUCCESS &&
      green != nullptr) {
    if (driver.GreenCtxGetDevResource(green, &resource, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS) {
      return 0;
    }
  } else if (driver.CtxGetDevResource == nullptr || context == 0 ||
             driver.CtxGetDevResource(reinterpret_cast<CUcontext>(context), &resource,
                                      CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS) {
    return 0;
  }
  if (resource.type != CU_DEV_RESOURCE_TYPE_SM) return 0;
  const unsigned count = resource.sm.smCount;
  return count > 0 && count <= 0xffff ? static_cast<int>(count) : 0;
}

int ContextSms::Of(const DriverApi& driver, uint64_t context, uint64_t stream) noexcept {
  if (context == 0) return 0;
  Entry& e = entries_[Mix64(context) & (kSlots - 1)];
  if (e.key.load(std::memory_order_acquire) == context) {
    const int32_t value = e.value.load(std::memory_order_acquire);
    if (e.key.load(std::memory_order_relaxed) == context) return value;
  }
  const int count = Ask(driver, context, stream);
  try {
    std::lock_guard<std::mutex> lock(write_mu_);
    e.key.store(0, std::memory_order_relaxed);
    e.value.store(count, std::memory_order_release);
    e.key.store(context, std::memory_order_release);
  } catch (...) {  // std::system_error from the mutex: answer without remembering
  }
  return count;
}

void ContextSms::ForgetAll() noexcept {
  try {
    std::lock_guard<std::mutex> lock(write_mu_);
    for (Entry& e : entries_) e.key.store(0, std::memory_order_release);
  } catch (...) {
  }
}

}  // namespace cuflight::inject
