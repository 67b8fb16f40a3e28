// CUDA errors that leave the context unusable ("sticky"): after one, every later call on the
// context fails the same way and no kernel still queued on it runs. The injected library flushes
// everything it holds when it sees one (docs/crash.md); the report reads a kernel without a
// kernel_time after such a flush as one that did not finish. One list for both: the library
// static_asserts each value against cuda.h.
#ifndef CUFLIGHT_SCHEMA_STICKY_ERRORS_H_
#define CUFLIGHT_SCHEMA_STICKY_ERRORS_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

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

// Their names as cuGetErrorName writes them (cuda.h's enumerators), in kStickyErrors' order: what
// an api_error's error_name says, for readers that have the name and not the code (the
// collector's metrics).
inline constexpr std::string_view kStickyErrorNames[] = {
    "CUDA_ERROR_ECC_UNCORRECTABLE",     "CUDA_ERROR_NVLINK_UNCORRECTABLE",
    "CUDA_ERROR_ILLEGAL_ADDRESS",       "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ASSERT",                "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",   "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_LAUNCH_FAILED",
};
static_assert(std::size(kStickyErrorNames) == std::size(kStickyErrors));

// The index in kStickyErrorNames of `name`, or -1 when it is not a sticky error's.
constexpr int StickyErrorIndex(std::string_view name) {
  for (size_t i = 0; i < std::size(kStickyErrorNames); ++i) {
    if (kStickyErrorNames[i] == name) return static_cast<int>(i);
  }
  return -1;
}

constexpr bool IsStickyError(int32_t code) {
  for (const int32_t sticky : kStickyErrors) {
    if (sticky == code) return true;
  }
  return false;
}

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_STICKY_ERRORS_H_
