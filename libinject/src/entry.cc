// The library's only exported symbol. The CUDA driver calls it once, from cuInit, when the
// library is named in CUDA_INJECTION64_PATH.
#include "injector.h"

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  // Initialize() catches everything; the driver must always see success.
  cuflight::inject::Injector::Instance().Initialize();
  return 1;
}
