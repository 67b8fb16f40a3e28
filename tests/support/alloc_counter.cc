#include "alloc_counter.h"

#include <cstddef>
#include <cstdlib>
#include <new>

namespace {
thread_local int64_t g_allocations = 0;
}  // namespace

// Every form of the plain and array operator new and delete is replaced, so that what one
// allocates the other frees (a sanitizer's own forms would not pair with these). The
// replacements pair malloc with free; GCC cannot see that through inlining at -O3.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  ++g_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace cuflight::test_support {

int64_t AllocationsOnThisThread() { return g_allocations; }

}  // namespace cuflight::test_support
