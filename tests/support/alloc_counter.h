// Counting the allocations a call makes. A test binary that calls AllocationsOnThisThread links
// alloc_counter.cc, whose replacement operator new counts every allocation of the calling thread.
#ifndef CUFLIGHT_TESTS_SUPPORT_ALLOC_COUNTER_H_
#define CUFLIGHT_TESTS_SUPPORT_ALLOC_COUNTER_H_

#include <cstdint>

namespace cuflight::test_support {

// operator new calls made by this thread so far.
int64_t AllocationsOnThisThread();

}  // namespace cuflight::test_support

#endif  // CUFLIGHT_TESTS_SUPPORT_ALLOC_COUNTER_H_
