#include "alloc_counter.h"

#include <cstddef>
#include <cstdlib>
#include <new>

namespace {
thread_local int64_t g_allocations = 0;
}  // namespace

// The replacements pair malloc with free; GCC cannot see that through inlining at -O3.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace cuflight::test_support {

int64_t AllocationsOnThisThread() { return g_allocations; }

}  // namespace cuflight::test_support
