// The collector's side of the black box (region_layout.h): checks a region it received and, once
// its producer is dead, makes the events the producer had recorded but not sent.
//
// Everything is read from a snapshot copy of the bytes it is about to use and checked before it
// is used: a region is the producer's memory, so it may be corrupt or hostile, and (if some other
// process still maps it) it may change under the reader. A bad region gives an error and no
// event; a bad entry is counted and skipped; nothing crashes or loops without bound.
//
// What a recovery costs is bounded by what the producer wrote and by the options, never by what
// the region's header claims:
//  1. Memory: the reader holds one line buffer (min(max_line_bytes, 16 MiB)), the names of one
//     function (at most max_line_bytes), 64 device descriptors and their occupancy engines and a
//     256-entry occupancy cache: about 2 x max_line_bytes + 100 KiB, plus the source's window
//     (region_source.h). Journal entries and ring slots are read one at a time, in seq order,
//     and never collected; the names area is never copied whole.
//  2. Pages: through an FdSource nothing is mapped, and the slots and entries in holes (never
//     written) are skipped, counted as torn, without being read.
//  3. Time: RegionRecovery does the work in steps of a given budget, so that a caller with other
//     work (the collector's event loop) can do a slice at a time.
#ifndef CUFLIGHT_BLACKBOX_REGION_READER_H_
#define CUFLIGHT_BLACKBOX_REGION_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cuflight/blackbox/region_source.h"

namespace cuflight::blackbox {

enum class RegionError : uint8_t {
  kNone = 0,
  kTooSmall,    // shorter than its header, or than the size it says it has
  kBadMagic,    // not a black box
  kBadVersion,  // another layout version
  kBadLayout,   // sizes, offsets or capacities outside the pinned layout
  kBadState,    // live words that cannot hold (a journal longer than its capacity, ...)
};
inline constexpr int kRegionErrorCount = 6;
// A stable snake_case name (a metrics label): "none", "too_small", "bad_magic", "bad_version",
// "bad_layout", "bad_state".
std::string_view RegionErrorName(RegionError error);

// Checks the header of the region in `bytes` (its fixed layout, not its live words). kNone when
// it is a region of this version that fits in `bytes`; otherwise *message says what is wrong.
RegionError CheckRegion(RegionSource& source, std::string* message);
RegionError CheckRegion(std::span<const uint8_t> bytes, std::string* message);

struct RecoveryOptions {
  // The highest seq the producer's log already holds: only later seqs are made. nullopt: none.
  std::optional<uint64_t> after_seq;
  int32_t pid = 0;  // the pid the events carry (the log's, for the producer's stream)
  // Longer lines are not made (counted in unrecoverable), as the collector refuses them on the
  // wire.
  size_t max_line_bytes = size_t{1} << 20;
  // At most this many bytes of lines in all (the rest counted in unrecoverable): a hostile
  // region could name megabyte names from every record.
  uint64_t max_total_bytes = uint64_t{256} << 20;
};

struct RecoveryResult {
  RegionError error = RegionError::kNone;
  std::string message;   // set with an error
  uint64_t kernels = 0;  // kernel events made
  uint64_t devices = 0;  // device events made
  // Ring positions claimed and never committed (the producer died inside a launch callback: the
  // launch never used a seq), and journal entries not whole.
  uint64_t torn = 0;
  // Seqs above after_seq that recovery could not make an event for: api_error records, launches
  // of functions the black box does not describe, configurations the occupancy engine refuses,
  // lines beyond max_line_bytes or max_total_bytes, and invalid records.
  uint64_t unrecoverable = 0;
  // Entries whose values the layout forbids (a corrupt or hostile region), skipped.
  uint64_t invalid = 0;
  // One past every seq the producer used, or recovery gave, as far as the region tells: the
  // stream's end. Valid when error is kNone. So recovery gives no seq above UINT64_MAX - 1: a
  // (forged) state whose seqs reach it ends the ring's records there, the rest not made.
  uint64_t end_seq = 0;
};

// A recovery done a step at a time. Emits (through the `emit` of each Step) what Recover below
// emits, in the same order, and ends with the same result. The source must outlive it. One
// thread.
class RegionRecovery {
 public:
  // Called for each event made: its seq and its line (ends in '\n', valid during the call).
  using Emit = std::function<void(uint64_t seq, std::string_view line)>;
  // How much one Step may do: ring slots and journal entries looked at (a run of never-written
  // ones counts as one), and bytes of lines emitted. A Step stops once either is reached (its
  // last line may pass `bytes`); each Step does at least one entry's work.
  struct Budget {
    uint64_t entries = 4096;
    uint64_t bytes = uint64_t{256} << 10;
  };

  // Checks the region's header (one snapshot of it, what is checked is what is used): a region
  // that fails gives its error in result() and nothing else.
  RegionRecovery(RegionSource* source, const RecoveryOptions& options);
  ~RegionRecovery();
  RegionRecovery(const RegionRecovery&) = delete;
  RegionRecovery& operator=(const RegionRecovery&) = delete;

  // Does the next part of the work, at most `budget`. True when the recovery is over: result()
  // is final and the buffers are freed.
  bool Step(const Budget& budget, const Emit& emit);
  // The counts so far; final once Step returned true.
  const RecoveryResult& result() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;  // null when the header was refused
  RecoveryResult error_;
};

// Calls `emit(seq, line)` for each event made, in increasing seq order, each seq above
// options.after_seq; `line` ends in '\n' and is valid during the call. The kernel and device
// events carry "recovered":true. Returns the counts (or the error, having emitted nothing).
RecoveryResult Recover(RegionSource& source, const RecoveryOptions& options,
                       const RegionRecovery::Emit& emit);
RecoveryResult Recover(std::span<const uint8_t> bytes, const RecoveryOptions& options,
                       const RegionRecovery::Emit& emit);

}  // namespace cuflight::blackbox

#endif  // CUFLIGHT_BLACKBOX_REGION_READER_H_
