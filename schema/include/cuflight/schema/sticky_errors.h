// CUDA errors that leave the context unusable ("sticky"): after one, every later call on the
// context fails the same way and no kernel still queued on it runs. The injected library flushes
// everything it holds when it sees one (docs/crash.md); the report reads a kernel without a
// kernel_time after such a flush as one that did not finish. One list for both: the library
// static_asserts each value against cuda.h.
#ifndef CUFLIGHT_SCHEMA_STICKY_ERRORS_H_
#define CUFLIGHT_SCHEMA_STICKY_ERRORS_H_

#include <cstdint>

namespace cuflight::schema {

// CUresult values (cuda.h, CUDA 13.0).
inline constexpr int32_t kStickyErrors[] = {
    214,  // CUDA_ERROR_ECC_UNCORRECTABLE
    220,  // CUDA_ERROR_NVLINK_UNCORRECTABLE
    700,  // CUDA_ERROR_ILLEGAL_ADDRESS
    702,  // CUDA_ERROR_LAUNCH_TIMEOUT
    710,  // CUDA_ERROR_ASSERT
    714,  // CUDA_ERROR_HARDWARE_STACK_ERROR
    715,  // CUDA_ERROR_ILLEGAL_INSTRUCTION
    716,  // CUDA_ERROR_MISALIGNED_ADDRESS
    717,  // CUDA_ERROR_INVALID_ADDRESS_SPACE
    718,  // CUDA_ERROR_INVALID_PC
    719,  // CUDA_ERROR_LAUNCH_FAILED
};

constexpr bool IsStickyError(int32_t code) {
  for (const int32_t sticky : kStickyErrors) {
    if (sticky == code) return true;
  }
  return false;
}

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_STICKY_ERRORS_H_
