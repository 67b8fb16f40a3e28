// CUPTI's correlation ids, ordered across their wrap.
//
// 1. They are 32 bits: cupti_callbacks.h, CUpti_CallbackData (`uint32_t correlationId;`),
//    cupti_activity.h, CUpti_ActivityKernel10 and CUpti_ActivitySynchronization2
//    (`uint32_t correlationId;`). One is taken by every API call CUPTI traces, so a process that
//    makes ~100k driver calls a second wraps them in about 12 hours; a plain `a <= b` then puts
//    every id after the wrap before every id from before it.
// 2. Order is serial-number arithmetic on 32 bits (RFC 1982, SERIAL_BITS = 32): `a` is before `b`
//    when b - a, modulo 2^32, is in [1, 2^31); ids 2^31 apart have no order (RFC 1982 3.2 leaves
//    it undefined; Unwrap takes an id 2^31 from the newest as before it).
// 3. The stall tracker keeps ids for a long time (a stream's last finished id, a context's last
//    synchronize), longer than serial order holds for. So it unwraps each id once, as it arrives,
//    into a 64-bit count that never wraps (as RTP extends its 16-bit sequence numbers, RFC 3550
//    A.1): the id is placed by serial order against the newest id unwrapped so far. That holds
//    while an id arrives within 2^31 ids (about 6 hours at 100k calls a second) of the newest:
//    records arrive seconds after their call. Unwrapped ids compare with `<` and are never 0.
#ifndef CUFLIGHT_LIBINJECT_SRC_CORRELATION_IDS_H_
#define CUFLIGHT_LIBINJECT_SRC_CORRELATION_IDS_H_

#include <cstdint>

namespace cuflight::inject {

// Point 3. One thread at a time.
class CorrelationUnwrapper {
 public:
  // The 64-bit id of `id`, >= 2^31 (so never 0): the first id unwrapped is 2^32 + id, each later
  // one the newest so far plus its serial distance from it (negative for an id before it).
  uint64_t Unwrap(uint32_t id) noexcept {
    if (newest_ == 0) {
      newest_ = (uint64_t{1} << 32) | id;
      return newest_;
    }
    const auto distance = static_cast<int32_t>(id - static_cast<uint32_t>(newest_));
    const uint64_t unwrapped = newest_ + static_cast<uint64_t>(static_cast<int64_t>(distance));
    if (distance > 0) newest_ = unwrapped;
    return unwrapped;
  }

  // CUPTI's id of an unwrapped one.
  static uint32_t Cupti(uint64_t unwrapped) { return static_cast<uint32_t>(unwrapped); }

 private:
  uint64_t newest_ = 0;  // 0: none yet
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_CORRELATION_IDS_H_
