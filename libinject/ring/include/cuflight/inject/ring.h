// Bounded lock-free ring of fixed-size records: many producers (the CUPTI callbacks, on any
// application thread), one consumer (the sender thread). Linux only: the consumer parks on a
// futex.
//
// Design:
//  1. Dmitry Vyukov's bounded queue. Positions count up from 0 and never wrap (64 bits); position p
//     lives in slot p % capacity. Each slot carries a sequence number saying whose turn it is: seq
//     == p means free for the producer of p, seq == p + 1 means it holds that producer's record,
//     and the consumer hands the slot to the next lap with seq = p + capacity.
//  2. One allocation (the slots), in the constructor. A push or a pop never allocates, locks or
//     makes a system call, with two exceptions: the one futex wake of (5), and the waiting of
//     OnFull::kBlock while the ring is full (bounded: design point 8).
//  3. A producer claims a position with a CAS on the producer index, copies its record into the
//     slot and publishes it with a release store of seq. The consumer reads seq with acquire,
//     copies the record out and frees the slot with a release store. Each producer's records come
//     out in the order it pushed them (its claims increase; the consumer pops in position order).
//     A producer pre-empted between its claim and its publish holds the consumer back at that
//     position: the records behind it wait, none is lost or reordered.
//  4. The producer index, the consumer index, the high-water mark and the drop counter each own a
//     cache line (kIndexAlign bytes, two 64-byte lines, against false sharing and the
//     adjacent-line prefetcher), and each slot starts on a 64-byte line.
//  5. The consumer may park in ConsumerWait(timeout), a futex wait with a timeout. A producer
//     never makes a system call to report a single record: it wakes the parked consumer only
//     when, right after its push, the ring is at least half full (kWakeNumerator /
//     kWakeDenominator), and only the producer that switches the consumer from parked to awake (an
//     exchange) makes the one FUTEX_WAKE. Below half full the consumer sleeps until its timeout
//     (the sender's flush interval). The consumer publishes "parked" and then reads the producer
//     index; a producer claims (seq_cst CAS) and then reads the consumer state (seq_cst load): one
//     of the two sees the other, so the consumer never sleeps while the ring is at least half full
//     and no producer is going to wake it.
//  6. Close() (at process exit): from then on every push fails and is counted as dropped, a
//     producer waiting under OnFull::kBlock gives up within one back-off step (about 50 us), and a
//     parked consumer is woken. Records already in the ring can still be popped.
//  7. The ring must outlive every thread that uses it: destroy it only after the producers and the
//     consumer are done (Close() and joined, or never started). Its slots and control words may
//     live in memory the caller provides (the producer's black box, shared with the collector:
//     cuflight/blackbox/region_layout.h), whose layout Slot and Control pin.
//  8. OnFull::kBlock waits for the consumer, never for longer than the consumer stands still: a
//     producer that finds the ring full and sees the consumer index unchanged for the block stall
//     limit (1 s by default) gives up, counts a drop, and marks the ring stalled at that index.
//     While the consumer index stays there, every later kBlock push that finds the ring full fails
//     at once (it is counted like a kDrop push); the first pop ends the stall. So a consumer that
//     is stuck (the sender thread inside a CUPTI call that never returns, a collector that stopped
//     reading) holds the application for at most one stall limit in all, not once per launch,
//     and a consumer that is slow but moving is waited for as long as it keeps moving. The clock
//     is read only in the sleeping phase of the back-off.
//  9. The consumer may look before it takes: TryPeek copies the oldest record out and leaves it
//     in its slot, Consume then frees it. Until then the record is still in the ring, so a
//     reader of the ring's memory after the process died (the collector, reading the black box)
//     finds every record the consumer had not finished with.
// 10. The consumer may also free in batches: TryPeekAt copies the record at a position from
//     popped() on (the oldest not yet freed, or one after it) and leaves it there, and
//     ConsumeTo(end) frees every slot below `end` at once: their turn words, then one store of
//     the consumer index. That index is the word every producer reads after its push (the
//     high-water mark, point 5's wake rule): stored once per batch instead of once per record, its
//     cache line leaves the consumer's core once per batch. Records peeked and not yet freed are
//     still in the ring (point 9) and still take its room: a push finds the ring full, and waits
//     or drops, as if the consumer had not reached them.
#ifndef CUFLIGHT_INJECT_RING_H_
#define CUFLIGHT_INJECT_RING_H_

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "cuflight/env/on_full.h"

namespace cuflight::inject {

template <typename T>
class MpscRing {
  static constexpr size_t kSlotAlign = std::max<size_t>(64, alignof(T));
  static constexpr size_t kIndexAlign = 128;
  static constexpr uint32_t kAwake = 0;
  static constexpr uint32_t kParked = 1;

 public:
  // One slot: the turn word (design point 1), then the record; each starts a 64-byte line.
  struct alignas(kSlotAlign) Slot {
    std::atomic<uint64_t> seq{0};
    alignas(T) unsigned char data[sizeof(T)];
  };
  // The words producers and the consumer write, each group on its own pair of cache lines
  // (design point 4): the claim position, the consumer's position and parking state, the
  // high-water mark, the drop counter.
  struct Control {
    alignas(kIndexAlign) std::atomic<uint64_t> enqueue_pos{0};
    alignas(kIndexAlign) std::atomic<uint64_t> dequeue_pos{0};
    std::atomic<uint32_t> consumer_state{kAwake};
    std::atomic<bool> wake_requested{false};
    alignas(kIndexAlign) std::atomic<uint64_t> high_water{0};
    alignas(kIndexAlign) std::atomic<uint64_t> dropped{0};
  };
  // Memory for the ring's slots and control words, provided by the caller (design point 7):
  // `control` sizeof(Control) bytes aligned to alignof(Control), `slots` capacity * sizeof(Slot)
  // bytes aligned to alignof(Slot); neither needs to be initialised.
  struct Storage {
    void* control = nullptr;
    void* slots = nullptr;
  };

 private:
  static_assert(std::is_trivially_copyable_v<T>, "ring records are copied with memcpy");
  static_assert(std::atomic<uint64_t>::is_always_lock_free);
  static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                    sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
                "the consumer state is used as a futex word");

 public:
  static constexpr size_t kMinCapacity = 2;
  static constexpr size_t kMaxCapacity = size_t{1} << 31;
  // A producer wakes a parked consumer once the ring is at least this full.
  static constexpr size_t kWakeNumerator = 1;
  static constexpr size_t kWakeDenominator = 2;

  // Room for `capacity` records, rounded up to a power of two and clamped to
  // [kMinCapacity, kMaxCapacity]. Allocates capacity slots once (a slot is sizeof(T) + 8 bytes
  // rounded up to a multiple of 64: 256 bytes for a 192-byte record) and touches them all; throws
  // std::bad_alloc if that fails, and nothing else. Construct the ring before handing it to other
  // threads (thread creation or a release store publishes it).
  // `block_stall_limit`: design point 8.
  static constexpr std::chrono::nanoseconds kDefaultBlockStallLimit = std::chrono::seconds(1);
  explicit MpscRing(size_t capacity,
                    std::chrono::nanoseconds block_stall_limit = kDefaultBlockStallLimit)
      : mask_(std::bit_ceil(std::clamp(capacity, kMinCapacity, kMaxCapacity)) - 1),
        wake_threshold_((mask_ + 1) * kWakeNumerator / kWakeDenominator),
        block_stall_ns_(std::max<int64_t>(0, block_stall_limit.count())),
        owned_slots_(new Slot[mask_ + 1]),
        owned_control_(new Control()),
        slots_(owned_slots_.get()),
        ctl_(owned_control_.get()) {
    for (uint64_t i = 0; i <= mask_; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
  }
  // The same over `storage` (design point 7), which must outlive the ring: `capacity` must be a
  // power of two in [kMinCapacity, kMaxCapacity]. Constructs the slots and control words there
  // and touches every slot; allocates nothing, throws nothing.
  MpscRing(size_t capacity, Storage storage,
           std::chrono::nanoseconds block_stall_limit = kDefaultBlockStallLimit) noexcept
      : mask_(capacity - 1),
        wake_threshold_((mask_ + 1) * kWakeNumerator / kWakeDenominator),
        block_stall_ns_(std::max<int64_t>(0, block_stall_limit.count())),
        slots_(static_cast<Slot*>(storage.slots)),
        ctl_(new (storage.control) Control()) {
    for (uint64_t i = 0; i <= mask_; ++i) {
      new (&slots_[i]) Slot();
      slots_[i].seq.store(i, std::memory_order_relaxed);
    }
  }
  MpscRing(const MpscRing&) = delete;
  MpscRing& operator=(const MpscRing&) = delete;

  // Copies `record` into the ring. Returns false, and counts a drop, when the ring is full or
  // closed. Any thread; lock-free, no allocation, no system call except the one wake of design
  // point 5.
  bool TryPush(const T& record) noexcept {
    if (!closed_.load(std::memory_order_relaxed) && PushOnce(record)) return true;
    ctl_->dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  // OnFull::kDrop: TryPush. OnFull::kBlock: waits while the ring is full (spins 64 times, yields
  // 16 times, then sleeps 50 us per try) and returns false, counting a drop, when the ring is or
  // becomes closed, or when the consumer stands still (design point 8: at most the block stall
  // limit, and at once while the ring is marked stalled). Any thread.
  bool Push(const T& record, env::OnFull policy) noexcept {
    if (policy == env::OnFull::kDrop) return TryPush(record);
    if (!closed_.load(std::memory_order_acquire) && PushOnce(record)) return true;
    uint64_t seen = ctl_->dequeue_pos.load(std::memory_order_acquire);
    // The consumer has not moved since a producer gave up on it: do not wait again.
    if (stalled_at_.load(std::memory_order_relaxed) == seen + 1) return TryPush(record);
    int64_t still_since = -1;
    for (uint32_t attempt = 0; !closed_.load(std::memory_order_acquire); ++attempt) {
      if (PushOnce(record)) return true;
      if (attempt >= kSpinAttempts + kYieldAttempts) {
        const uint64_t now_seen = ctl_->dequeue_pos.load(std::memory_order_acquire);
        const int64_t now = MonotonicNs();
        if (now_seen != seen || still_since < 0) {
          seen = now_seen;
          still_since = now;
        } else if (now - still_since >= block_stall_ns_) {
          stalled_at_.store(seen + 1, std::memory_order_relaxed);
          break;
        }
      }
      Backoff(attempt);
    }
    ctl_->dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  // Moves the oldest record into *out and returns true; false when the ring is empty, or when the
  // oldest position is claimed but still being written (design point 3). Consumer thread only.
  bool TryPop(T* out) noexcept {
    if (!TryPeek(out)) return false;
    Consume();
    return true;
  }

  // Copies the oldest record into *out and leaves it in the ring (design point 9); sets *position
  // (if not null) to its position. False as TryPop. Consumer thread only.
  bool TryPeek(T* out, uint64_t* position = nullptr) noexcept {
    const uint64_t pos = ctl_->dequeue_pos.load(std::memory_order_relaxed);
    const Slot& slot = slots_[pos & mask_];
    if (slot.seq.load(std::memory_order_acquire) != pos + 1) return false;
    std::memcpy(static_cast<void*>(out), slot.data, sizeof(T));
    if (position != nullptr) *position = pos;
    return true;
  }

  // Frees the record the last successful TryPeek returned. Consumer thread only, once per
  // TryPeek that returned true.
  void Consume() noexcept { ConsumeTo(ctl_->dequeue_pos.load(std::memory_order_relaxed) + 1); }

  // Copies the record at ring position `pos` into *out and leaves it in the ring (design point
  // 10); false when nothing is committed there yet (no record, or one claimed and still being
  // written). `pos` in [popped(), popped() + capacity()). Consumer thread only.
  bool TryPeekAt(uint64_t pos, T* out) noexcept {
    const Slot& slot = slots_[pos & mask_];
    if (slot.seq.load(std::memory_order_acquire) != pos + 1) return false;
    std::memcpy(static_cast<void*>(out), slot.data, sizeof(T));
    return true;
  }

  // Frees the records at positions [popped(), end) (design point 10), every one of them peeked
  // (TryPeek or TryPeekAt returned true for it); nothing when end <= popped(). Consumer thread
  // only.
  void ConsumeTo(uint64_t end) noexcept {
    uint64_t pos = ctl_->dequeue_pos.load(std::memory_order_relaxed);
    if (end <= pos) return;
    for (; pos < end; ++pos) {
      slots_[pos & mask_].seq.store(pos + mask_ + 1, std::memory_order_release);
    }
    ctl_->dequeue_pos.store(end, std::memory_order_release);
  }

  // Parks the consumer until a producer finds the ring at least half full, WakeConsumer() or
  // Close() is called, or `timeout` passes; returns at once if one of these already holds or
  // timeout <= 0. May return early (a signal, a racing wake-up): callers loop on their own
  // deadline. Consumer thread only.
  void ConsumerWait(std::chrono::nanoseconds timeout) noexcept {
    if (timeout.count() <= 0 || ctl_->wake_requested.exchange(false, std::memory_order_acq_rel))
      return;
    ctl_->consumer_state.store(kParked, std::memory_order_seq_cst);
    const uint64_t claimed = ctl_->enqueue_pos.load(std::memory_order_seq_cst);
    const bool stay_awake =
        closed_.load(std::memory_order_seq_cst) ||
        ctl_->wake_requested.exchange(false, std::memory_order_seq_cst) ||
        claimed - ctl_->dequeue_pos.load(std::memory_order_relaxed) >= wake_threshold_;
    if (!stay_awake) FutexWait(timeout);
    ctl_->consumer_state.store(kAwake, std::memory_order_relaxed);
  }

  // Ends the current ConsumerWait, or the next one if the consumer is not parked. Any thread; one
  // futex wake system call when the consumer is parked, none otherwise.
  void WakeConsumer() noexcept {
    ctl_->wake_requested.store(true, std::memory_order_seq_cst);
    WakeIfParked();
  }

  // Makes every later push fail (counted as dropped), releases producers waiting under
  // OnFull::kBlock and wakes the consumer. Idempotent; any thread. A push that had already passed
  // its closed check when Close() ran may still complete; pop until TryPop fails after Close() to
  // take everything.
  void Close() noexcept {
    closed_.store(true, std::memory_order_seq_cst);
    WakeIfParked();
  }

  bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }

  // Records pushed (or being pushed) and not yet popped, clamped to [0, capacity]; exact only
  // while no other thread pushes or pops. Any thread.
  size_t SizeApprox() const noexcept {
    const uint64_t popped = ctl_->dequeue_pos.load(std::memory_order_acquire);
    const uint64_t claimed = ctl_->enqueue_pos.load(std::memory_order_acquire);
    return static_cast<size_t>(std::min<uint64_t>(claimed - popped, mask_ + 1));
  }

  size_t capacity() const noexcept { return mask_ + 1; }

  // Positions claimed by producers so far (pushes done or under way), and positions the consumer
  // has popped. Both only grow; a record pushed before claimed() was read lies below it. Any
  // thread (the FunctionTable's reclamation compares the two).
  uint64_t claimed() const noexcept { return ctl_->enqueue_pos.load(std::memory_order_acquire); }
  uint64_t popped() const noexcept { return ctl_->dequeue_pos.load(std::memory_order_acquire); }

  // The largest occupancy seen so far, in [0, capacity]. Maintained by producers: after each push,
  // a producer computes (its position + 1 - the consumer index it then reads), clamped to the
  // capacity, and raises the mark if that is higher (a relaxed load; a CAS only when the mark
  // moves, at most capacity times in all). A push that finds the ring full sets it to capacity.
  // Exact with one thread, and exact at capacity (a full ring always shows). With concurrent pushes
  // and pops each sample can be off, either way, by the pops that ran during that push (the
  // consumer index is read without waiting for the latest value). Any thread.
  size_t high_water() const noexcept {
    return static_cast<size_t>(ctl_->high_water.load(std::memory_order_relaxed));
  }

  // Pushes that returned false (ring full or closed), over the ring's lifetime. Any thread.
  uint64_t dropped() const noexcept { return ctl_->dropped.load(std::memory_order_relaxed); }

 private:
  static constexpr uint32_t kSpinAttempts = 64;
  static constexpr uint32_t kYieldAttempts = 16;
  static constexpr long kBlockedSleepNs = 50'000;

  // One attempt: claims a free position and publishes `record` there, or returns false when the
  // ring is full.
  bool PushOnce(const T& record) noexcept {
    uint64_t pos = ctl_->enqueue_pos.load(std::memory_order_relaxed);
    Slot* slot;
    for (;;) {
      slot = &slots_[pos & mask_];
      // Acquire: the consumer's copy-out of the previous lap happens before our overwrite.
      const uint64_t seq = slot->seq.load(std::memory_order_acquire);
      const auto lag = static_cast<int64_t>(seq - pos);
      if (lag == 0) {
        // seq_cst on success: ordered before the consumer-state load of design point 5.
        if (ctl_->enqueue_pos.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                                    std::memory_order_relaxed)) {
          break;
        }
      } else if (lag < 0) {
        // The slot still holds the record of position pos - capacity: the ring is full.
        RaiseHighWater(mask_ + 1);
        return false;
      } else {
        pos = ctl_->enqueue_pos.load(std::memory_order_relaxed);  // another producer took pos
      }
    }
    std::memcpy(slot->data, static_cast<const void*>(&record), sizeof(T));
    slot->seq.store(pos + 1, std::memory_order_release);

    // The consumer frees slots before it advances its index, so this can read above the
    // capacity (by the slots ConsumeTo is freeing at once: design point 10): clamped.
    const uint64_t popped = ctl_->dequeue_pos.load(std::memory_order_relaxed);
    const uint64_t occupancy = pos + 1 > popped ? std::min(pos + 1 - popped, mask_ + 1) : 0;
    if (occupancy > ctl_->high_water.load(std::memory_order_relaxed)) RaiseHighWater(occupancy);
    if (occupancy >= wake_threshold_) WakeIfParked();
    return true;
  }

  void RaiseHighWater(uint64_t occupancy) noexcept {
    uint64_t mark = ctl_->high_water.load(std::memory_order_relaxed);
    while (occupancy > mark &&
           !ctl_->high_water.compare_exchange_weak(mark, occupancy, std::memory_order_relaxed)) {
    }
  }

  void WakeIfParked() noexcept {
    if (ctl_->consumer_state.load(std::memory_order_seq_cst) == kParked &&
        ctl_->consumer_state.exchange(kAwake, std::memory_order_seq_cst) == kParked) {
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ctl_->consumer_state), FUTEX_WAKE_PRIVATE, 1,
              nullptr, nullptr, 0);
    }
  }

  void FutexWait(std::chrono::nanoseconds timeout) noexcept {
    constexpr int64_t kNsPerS = 1'000'000'000;
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout.count() / kNsPerS);
    ts.tv_nsec = static_cast<long>(timeout.count() % kNsPerS);
    // Returns at once (EAGAIN) if a producer already switched the state back to kAwake.
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ctl_->consumer_state), FUTEX_WAIT_PRIVATE,
            kParked, &ts, nullptr, 0);
  }

  static int64_t MonotonicNs() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }

  void Backoff(uint32_t attempt) noexcept {
    if (attempt < kSpinAttempts) {
      CpuRelax();
    } else if (attempt < kSpinAttempts + kYieldAttempts) {
      sched_yield();
    } else {
      WakeIfParked();  // a full ring is past the wake threshold
      timespec ts{0, kBlockedSleepNs};
      nanosleep(&ts, nullptr);
    }
  }

  static void CpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }

  // Read-only after construction, except closed_ (written once).
  const uint64_t mask_;
  const uint64_t wake_threshold_;
  const int64_t block_stall_ns_;
  const std::unique_ptr<Slot[]> owned_slots_;  // null over caller storage
  const std::unique_ptr<Control> owned_control_;
  Slot* const slots_;
  Control* const ctl_;
  std::atomic<bool> closed_{false};
  // The consumer index + 1 at which a kBlock producer last gave up (design point 8); 0: never.
  std::atomic<uint64_t> stalled_at_{0};
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_INJECT_RING_H_
