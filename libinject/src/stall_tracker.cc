#include "stall_tracker.h"

#include <cupti.h>

#include <algorithm>
#include <cstring>

#include "mix64.h"

namespace cuflight::inject {
namespace {

using std::chrono::milliseconds;

// Buckets of the stream index: a power of two, four times kMaxStreams (short probes).
constexpr size_t kIndexSize = 4 * StallTracker::kMaxStreams;

size_t StreamHash(uint64_t context, uint64_t stream) {
  return static_cast<size_t>(Mix64(context * 0x9E3779B97F4A7C15ULL ^ stream)) & (kIndexSize - 1);
}

int64_t Ms(StallTracker::Clock::duration d) {
  const int64_t ms = std::chrono::duration_cast<milliseconds>(d).count();
  return ms < 0 ? 0 : ms;
}

// Copies `text` into out[0, kMaxStallNameBytes): whole when it fits, else its first bytes (not
// splitting a UTF-8 sequence) followed by schema::kTruncationMarker. Returns the size written.
uint16_t CutName(std::string_view text, char* out) {
  constexpr size_t kCap = schema::kMaxStallNameBytes;
  if (text.size() <= kCap) {
    // An empty name may have no storage at all (data() null): memcpy must not see it.
    if (!text.empty()) std::memcpy(out, text.data(), text.size());
    return static_cast<uint16_t>(text.size());
  }
  const std::string_view marker = schema::kTruncationMarker;
  size_t keep = kCap - marker.size();
  // Back off continuation bytes (10xxxxxx) so that the cut falls before a sequence's first byte.
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  std::memcpy(out, text.data(), keep);
  std::memcpy(out + keep, marker.data(), marker.size());
  return static_cast<uint16_t>(keep + marker.size());
}

}  // namespace

StallTracker::StallTracker(milliseconds threshold)
    : threshold_(threshold),
      repeat_(
          std::clamp<milliseconds>(threshold, std::chrono::seconds(1), std::chrono::seconds(60))),
      check_interval_(std::clamp<milliseconds>(threshold / 4, milliseconds(10), milliseconds(100))),
      entries_(new Entry[kMaxPending]),
      streams_(kMaxStreams),
      index_(kIndexSize, static_cast<int16_t>(kNone)),
      names_(new Name[kMaxNames]) {
  for (int i = 0; i < kMaxPending; ++i) entries_[i].next = i + 1 < kMaxPending ? i + 1 : kNone;
  free_ = 0;
}

milliseconds StallTracker::flush_interval() const {
  return std::clamp<milliseconds>(threshold_ / 4, milliseconds(50), milliseconds(500));
}

StallTracker::Stream* StallTracker::FindStream(uint64_t context, uint64_t stream) noexcept {
  if (last_stream_ != kNone) {
    Stream& s = streams_[static_cast<size_t>(last_stream_)];
    if (s.used && s.context == context && s.stream == stream) return &s;
  }
  for (size_t i = StreamHash(context, stream), probes = 0; probes < kIndexSize;
       i = (i + 1) & (kIndexSize - 1), ++probes) {
    const int16_t slot = index_[i];
    if (slot == kNone) return nullptr;
    Stream& s = streams_[static_cast<size_t>(slot)];
    if (s.context == context && s.stream == stream) {
      last_stream_ = slot;
      return &s;
    }
  }
  return nullptr;
}

void StallTracker::RebuildIndex() noexcept {
  std::fill(index_.begin(), index_.end(), static_cast<int16_t>(kNone));
  for (size_t slot = 0; slot < streams_.size(); ++slot) {
    const Stream& s = streams_[slot];
    if (!s.used) continue;
    size_t i = StreamHash(s.context, s.stream);
    while (index_[i] != kNone) i = (i + 1) & (kIndexSize - 1);
    index_[i] = static_cast<int16_t>(slot);
  }
}

StallTracker::Stream* StallTracker::FindOrAddStream(uint64_t context, uint64_t stream,
                                                    Clock::time_point now) noexcept {
  if (Stream* s = FindStream(context, stream)) return s;
  // A slot never used, else the least recently used one with nothing pending and not in the
  // stall being reported.
  int chosen = kNone;
  bool reuse = false;
  for (size_t i = 0; i < streams_.size(); ++i) {
    const Stream& s = streams_[i];
    if (!s.used) {
      chosen = static_cast<int>(i);
      reuse = false;
      break;
    }
    if (s.count == 0 && !s.reported &&
        (chosen == kNone || s.last_used < streams_[static_cast<size_t>(chosen)].last_used)) {
      chosen = static_cast<int>(i);
      reuse = true;
    }
  }
  if (chosen == kNone) return nullptr;
  Stream& s = streams_[static_cast<size_t>(chosen)];
  for (int r = 0; r < s.recent_count; ++r) ReleaseName(s.recent[static_cast<size_t>(r)].name);
  s = Stream{};
  s.context = context;
  s.stream = stream;
  s.used = true;
  s.last_used = now;
  if (reuse) {
    RebuildIndex();  // the slot's old key is somewhere in the index
  } else {
    size_t i = StreamHash(context, stream);
    while (index_[i] != kNone) i = (i + 1) & (kIndexSize - 1);
    index_[i] = static_cast<int16_t>(chosen);
  }
  last_stream_ = chosen;
  return &s;
}

uint16_t StallTracker::AcquireName(const Launch& launch) noexcept {
  return AcquireName(launch.function_id, launch.name, launch.demangled);
}

uint16_t StallTracker::AcquireName(uint64_t key, std::string_view name,
                                   std::string_view demangled) noexcept {
  const size_t home = static_cast<size_t>(Mix64(key)) & (kMaxNames - 1);
  int free_slot = kNone;
  for (size_t k = 0; k < kNameProbe; ++k) {
    const size_t i = (home + k) & (kMaxNames - 1);
    Name& n = names_[i];
    if (n.refs > 0 && n.function_id == key) {
      ++n.refs;
      return static_cast<uint16_t>(i);
    }
    if (n.refs == 0 && free_slot == kNone) free_slot = static_cast<int>(i);
  }
  if (free_slot == kNone) return kNoName;  // the event then shows the launch without a name
  Name& n = names_[static_cast<size_t>(free_slot)];
  n.function_id = key;
  n.refs = 1;
  n.name_size = CutName(name, n.name);
  n.demangled_size = CutName(demangled, n.demangled);
  return static_cast<uint16_t>(free_slot);
}

void StallTracker::Remember(Stream& s, const Recent& recent) noexcept {
  Recent& slot = s.recent[static_cast<size_t>(s.next_recent)];
  if (s.recent_count == kRecent) ReleaseName(slot.name);  // the oldest goes
  slot = recent;
  s.next_recent = (s.next_recent + 1) % kRecent;
  s.recent_count = std::min(s.recent_count + 1, kRecent);
}

void StallTracker::ReleaseEntry(Entry& entry) noexcept {
  ReleaseName(entry.name);
  if (entry.graph) ReleaseName(entry.node_name);
}

void StallTracker::ReleaseName(uint16_t name) noexcept {
  if (name != kNoName && names_[name].refs > 0) --names_[name].refs;
}

StallTracker::Stream* StallTracker::StreamOfLaunch(uint64_t context, uint64_t stream,
                                                   int32_t device, uint32_t correlation_id,
                                                   Clock::time_point launched_at,
                                                   uint64_t* id) noexcept {
  if (context == CUPTI_INVALID_CONTEXT_ID || stream == CUPTI_INVALID_STREAM_ID) {
    ++untracked_;  // its activity record names a stream this launch cannot be matched to
    return nullptr;
  }
  *id = ids_.Unwrap(correlation_id);
  Stream* s = FindOrAddStream(context, stream, launched_at);
  if (s == nullptr) {
    ++untracked_;
    return nullptr;
  }
  s->device = device;
  s->last_used = std::max(s->last_used, launched_at);
  return s;
}

bool StallTracker::AdmitPending(Stream* s, bool timed, int32_t tid, uint64_t id,
                                Clock::time_point launched_at) noexcept {
  if (!timed) {  // no record will show it finishing (design point 10)
    ++s->untimed_since_sync;
    if (s->untimed_first == 0) {
      s->untimed_first = id;
      s->untimed_at = launched_at;
    }
    s->untimed_last = std::max(s->untimed_last, id);
    return false;
  }
  if (free_ == kNone) {
    ++untracked_;
    return false;
  }
  if (s->tid == 0) {
    s->tid = tid;
  } else if (s->tid != tid) {
    s->mixed = true;
  }
  return true;
}

void StallTracker::OnLaunch(const Launch& launch) noexcept {
  uint64_t id = 0;
  Stream* s = StreamOfLaunch(launch.context, launch.stream, launch.device, launch.correlation_id,
                             launch.launched_at, &id);
  if (s == nullptr) return;
  Recent recent;
  recent.correlation_id = id;
  recent.name = AcquireName(launch);
  recent.grid = launch.grid;
  recent.block = launch.block;
  recent.occupancy = launch.occupancy;
  recent.launched_at = launch.launched_at;
  Remember(*s, recent);
  if (!AdmitPending(s, launch.timed, launch.tid, id, launch.launched_at)) return;
  // Its primary may still run whatever later kernels are seen finishing (point 1).
  if (launch.overlaps_previous && s->tail != kNone) entries_[s->tail].primary = true;
  // Its record came first: finished.
  for (uint64_t& early : s->early) {
    if (early == id) {
      early = 0;
      return;
    }
  }
  if (id < s->synced_below) return;  // a synchronize of the stream came first
  if (!s->mixed && id <= s->finished_up_to) return;  // a later kernel of its thread finished
  for (const SyncedContext& c : synced_contexts_) {
    if (c.below != 0 && c.context == launch.context && id < c.below) return;
  }
  const int32_t e = free_;
  Entry& entry = entries_[e];
  free_ = entry.next;
  entry.correlation_id = id;
  entry.tid = launch.tid;
  entry.primary = false;
  entry.unsure = false;
  entry.seen_running = false;
  entry.launched_at = launch.launched_at;
  entry.ts_ns = launch.ts_ns;
  entry.grid = launch.grid;
  entry.block = launch.block;
  entry.occupancy = launch.occupancy;
  entry.name = AcquireName(launch);
  entry.next = kNone;
  entry.graph = false;
  entry.graph_exec_id = 0;
  entry.node_graph_id = 0;
  entry.node_id = 0;
  entry.node_name = kNoName;
  if (s->tail == kNone) {
    s->head = e;
    s->completed_at_wait = completed_;
  } else {
    entries_[s->tail].next = e;
  }
  s->tail = e;
  ++s->count;
  ++pending_;
}

void StallTracker::OnGraphLaunch(const GraphLaunch& launch) noexcept {
  uint64_t id = 0;
  Stream* s = StreamOfLaunch(launch.context, launch.stream, launch.device, launch.correlation_id,
                             launch.launched_at, &id);
  if (s == nullptr) return;
  Recent recent;
  recent.correlation_id = id;
  recent.graph = true;
  recent.graph_exec_id = launch.graph_exec_id;
  recent.launched_at = launch.launched_at;
  Remember(*s, recent);
  if (!AdmitPending(s, launch.timed, launch.tid, id, launch.launched_at)) return;
  // Finished already: a synchronize after it, or a later launch of its thread seen finishing (its
  // own nodes' records carry its id, and finish nothing but themselves: point 11).
  if (id < s->synced_below) return;
  if (!s->mixed && id < s->finished_up_to) return;
  for (const SyncedContext& c : synced_contexts_) {
    if (c.below != 0 && c.context == launch.context && id < c.below) return;
  }
  const int32_t e = free_;
  Entry& entry = entries_[e];
  free_ = entry.next;
  entry = Entry{};
  entry.correlation_id = id;
  entry.tid = launch.tid;
  entry.launched_at = launch.launched_at;
  entry.ts_ns = launch.ts_ns;
  entry.name = kNoName;
  entry.graph = true;
  entry.graph_exec_id = launch.graph_exec_id;
  entry.node_name = kNoName;
  // At its correlation id's place: the graph log is read apart from the launch ring, so launches
  // made after it may be pending already.
  int32_t prev = kNone;
  int32_t at = s->head;
  while (at != kNone && entries_[at].correlation_id < id) {
    prev = at;
    at = entries_[at].next;
  }
  entry.next = at;
  if (prev == kNone) {
    s->head = e;
    s->completed_at_wait = completed_;
  } else {
    entries_[prev].next = e;
  }
  if (at == kNone) s->tail = e;
  ++s->count;
  ++pending_;
}

void StallTracker::PopHead(Stream& s) noexcept {
  const int32_t e = s.head;
  Entry& entry = entries_[e];
  s.head = entry.next;
  if (s.head == kNone) s.tail = kNone;
  --s.count;
  --pending_;
  ReleaseEntry(entry);
  entry.next = free_;
  free_ = e;
}

template <class Pred>
int64_t StallTracker::RemoveIf(Stream& s, Pred pred) noexcept {
  int64_t removed = 0;
  int32_t prev = kNone;
  for (int32_t e = s.head; e != kNone;) {
    Entry& entry = entries_[e];
    const int32_t next = entry.next;
    const Verdict verdict = pred(entry);
    if (verdict == Verdict::kStop) break;
    if (verdict == Verdict::kRemove || verdict == Verdict::kRemoveAndStop) {
      if (prev == kNone) {
        s.head = next;
      } else {
        entries_[prev].next = next;
      }
      if (s.tail == e) s.tail = prev;
      --s.count;
      --pending_;
      ReleaseEntry(entry);
      entry.next = free_;
      free_ = e;
      ++removed;
      if (verdict == Verdict::kRemoveAndStop) break;
    } else {
      prev = e;
    }
    e = next;
  }
  return removed;
}

void StallTracker::Progressed(Stream& s, bool popped, Clock::time_point now,
                              Clock::time_point finished_at) noexcept {
  if (!s.confirming) {
    s.progress_at = now;
  } else if (finished_at != Clock::time_point::min()) {
    // A confirmation: when it ended, not when that was seen (point 6).
    s.progress_at = std::max(s.progress_at, std::min(finished_at, now));
  }
  s.last_used = now;
  if (popped && !s.confirming) s.confirmed = false;  // the stream moved: a new head to confirm
  if (s.count > 0) s.completed_at_wait = completed_;
}

void StallTracker::OnFinished(uint64_t context, uint64_t stream, uint32_t correlation_id,
                              Clock::time_point now, uint64_t end_ns) noexcept {
  ++completed_;
  const uint64_t id = ids_.Unwrap(correlation_id);
  Stream* s = FindOrAddStream(context, stream, now);
  if (s == nullptr) return;
  // A stream of one thread holds its launches in id order: the search and the removal below
  // stop at the first launch after this one.
  const bool mixed = s->mixed;
  const Entry* own = nullptr;
  for (int32_t e = s->head; e != kNone; e = entries_[e].next) {
    if (entries_[e].correlation_id == id) {
      own = &entries_[e];
      break;
    }
    if (!mixed && entries_[e].correlation_id > id) break;
  }
  Clock::time_point finished_at = Clock::time_point::min();
  if (own != nullptr && s->confirming && end_ns != 0) {
    // Its end against its launch record's time; never before its launch.
    const int64_t ran_ns = static_cast<int64_t>(end_ns) - own->ts_ns;
    finished_at = own->launched_at + std::chrono::nanoseconds(std::max<int64_t>(0, ran_ns));
  }
  const uint64_t last_early = s->early[static_cast<size_t>((s->next_early + kEarly - 1) % kEarly)];
  if (own == nullptr && last_early != id) {
    // Its launch record is still to come (or it has none: a graph node, a sampled-out launch).
    // A graph's nodes share its id: remembered once.
    s->early[static_cast<size_t>(s->next_early)] = id;
    s->next_early = (s->next_early + 1) % kEarly;
  }
  s->finished_up_to = std::max(s->finished_up_to, id);
  // Untimed launches before it finished too, on a stream of one thread (point 10).
  if (!mixed) FinishedUntimedBelow(*s, id + 1, now);
  // What this kernel finishing shows finished (point 1): its own launch, and the launches before
  // it the stream runs in order with it.
  const bool known_thread = own != nullptr;
  const int32_t tid = known_thread ? own->tid : 0;
  const int64_t popped = RemoveIf(*s, [&](const Entry& entry) {
    if (entry.correlation_id == id && entry.graph) {
      return mixed ? Verdict::kKeep : Verdict::kStop;  // one node of it (point 11)
    }
    if (entry.correlation_id == id) return mixed ? Verdict::kRemove : Verdict::kRemoveAndStop;
    if (entry.correlation_id > id) return mixed ? Verdict::kKeep : Verdict::kStop;
    if (entry.primary) return Verdict::kKeep;
    return !mixed || (known_thread && entry.tid == tid) ? Verdict::kRemove : Verdict::kKeep;
  });
  Progressed(*s, popped > 0 || (own != nullptr && own->graph), now, finished_at);
}

void StallTracker::FinishedUntimedBelow(Stream& s, uint64_t below, Clock::time_point now) noexcept {
  if (s.untimed_first == 0 || below <= s.untimed_first) return;
  if (below > s.untimed_last) {
    s.untimed_first = 0;  // every untimed launch is known finished
    return;
  }
  // Those after `below` are not; which id the first of them has is not kept: `below` bounds it.
  // They wait from now, as pending launches wait from a kernel seen finishing (point 2).
  s.untimed_first = below;
  s.untimed_at = std::max(s.untimed_at, now);
}

bool StallTracker::AskTimingWindow(Clock::time_point now) noexcept {
  bool ask = false;
  for (Stream& s : streams_) {
    if (!s.used || s.untimed_first == 0 || s.count > 0) continue;
    if (now - std::max(s.untimed_at, s.progress_at) < threshold_) continue;
    // Judged from a call (point 9) or asked about already for these launches, or within the
    // threshold: no window.
    if (Covering(s, now, /*stalling=*/false) != nullptr) continue;
    if (s.window_asked_for >= s.untimed_last || now - s.window_asked_at < threshold_) continue;
    s.window_asked_for = s.untimed_last;
    s.window_asked_at = now;
    ++window_asks_;
    ask = true;
  }
  return ask;
}

void StallTracker::OnSynchronized(uint64_t context, uint64_t stream, uint32_t correlation_id,
                                  Clock::time_point now) noexcept {
  if (correlation_id == 0) return;
  const uint64_t below = ids_.Unwrap(correlation_id);
  // Launches made before the synchronize finished; each counts as a kernel seen finishing.
  const auto finish = [&](Stream& s) {
    s.synced_below = std::max(s.synced_below, below);
    s.untimed_since_sync = 0;  // launches handled after the call began are counted from 0 too
    FinishedUntimedBelow(s, below, now);
    const bool mixed = s.mixed;
    const int64_t popped = RemoveIf(s, [below, mixed](const Entry& entry) {
      if (entry.correlation_id < below) return Verdict::kRemove;
      return mixed ? Verdict::kKeep : Verdict::kStop;
    });
    completed_ += static_cast<uint64_t>(popped);
    Progressed(s, popped > 0, now);
  };
  if (stream != kAllStreams) {
    if (Stream* s = FindOrAddStream(context, stream, now)) finish(*s);
    return;
  }
  SyncedContext* mark = nullptr;
  for (SyncedContext& c : synced_contexts_) {
    if (c.below != 0 && c.context == context) mark = &c;
  }
  if (mark == nullptr) {
    mark = &synced_contexts_[static_cast<size_t>(next_synced_context_)];
    next_synced_context_ = (next_synced_context_ + 1) % kMaxSyncedContexts;
    *mark = SyncedContext{context, 0};
  }
  mark->below = std::max(mark->below, below);
  for (Stream& s : streams_) {
    if (s.used && s.context == context) finish(s);
  }
}

void StallTracker::OnSyncCalls(std::span<const SyncCall> in_progress) noexcept {
  wait_count_ = 0;
  for (const SyncCall& call : in_progress) {
    if (wait_count_ == kMaxSyncWaits) break;
    waits_[static_cast<size_t>(wait_count_++)] = call;
  }
}

StallTracker::Clock::time_point StallTracker::EnteredAt(const SyncCall& call) noexcept {
  // CLOCK_MONOTONIC, which steady_clock reads on Linux.
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::nanoseconds(call.entered_ns)));
}

const SyncCall* StallTracker::Covering(const Stream& s, Clock::time_point now,
                                       bool stalling) const noexcept {
  const SyncCall* best = nullptr;
  for (int i = 0; i < wait_count_; ++i) {
    const SyncCall& call = waits_[static_cast<size_t>(i)];
    if (call.context != s.context) continue;
    if (call.scope == SyncScope::kStream && call.stream != s.stream) continue;
    if (stalling) {
      if (now - EnteredAt(call) < threshold_) continue;
      // What the call shows (point 9): a stream call, work of the stream not seen finishing; a
      // context or event call, work of this stream not seen finishing for the threshold.
      const bool pending_old = s.count > 0 && OverThreshold(s, now);
      const bool shown = call.scope == SyncScope::kStream
                             ? (s.count == 0 || pending_old)
                             : (s.count > 0 ? pending_old : s.untimed_since_sync > 0);
      if (!shown) continue;
    }
    if (best == nullptr || call.entered_ns < best->entered_ns) best = &call;
  }
  return best;
}

StallTracker::Clock::time_point StallTracker::StallStart(const Stream& s,
                                                         const SyncCall* call) const noexcept {
  if (s.count > 0) return WaitStart(s);
  return call != nullptr ? EnteredAt(*call) : s.last_used;
}

bool StallTracker::OverThreshold(const Stream& s, Clock::time_point now) const noexcept {
  return s.used && s.count > 0 && now - WaitStart(s) >= threshold_;
}

bool StallTracker::ConfirmationDue(Clock::time_point now) const noexcept {
  if (now < next_confirmation_ || now < next_check_) return false;
  bool due = false;
  for (const Stream& s : streams_) {
    if (!s.used) continue;
    // A call covers it: the call confirms it once it waited the threshold (point 9). One stalled
    // by a call, or that will be once its call waited the threshold: no forced flush at all.
    if (Covering(s, now, /*stalling=*/true) != nullptr) return false;
    if (Covering(s, now, /*stalling=*/false) != nullptr) {
      if (s.count > 0 && OverThreshold(s, now)) return false;
      continue;
    }
    if (!s.confirmed && OverThreshold(s, now)) due = true;
  }
  return due;
}

void StallTracker::BeginConfirmation(Clock::time_point now) noexcept {
  confirming_ = true;
  last_confirmation_ = now;
  ++confirmations_;
  next_confirmation_ = now + threshold_;
  flush_cost_records_ = 0;
  untracked_incomplete_count_ = 0;
  flush_cost_streams_ = 0;
  for (Stream& s : streams_) {
    s.confirming = OverThreshold(s, now);
    s.incomplete = false;
    s.flush_incomplete = false;
  }
}

void StallTracker::OnIncomplete(uint64_t context, uint64_t stream,
                                uint32_t correlation_id) noexcept {
  OnIncomplete(context, stream, correlation_id, Node{});
}

void StallTracker::OnIncomplete(uint64_t context, uint64_t stream, uint32_t correlation_id,
                                const Node& node) noexcept {
  if (!confirming_) return;
  // The flush's cost (point 12): every incomplete record, of any stream.
  ++flush_cost_records_;
  ++flush_incomplete_;
  const uint64_t id = ids_.Unwrap(correlation_id);
  Stream* s = FindStream(context, stream);
  if (s == nullptr) {
    const uint64_t key = Mix64(context * 0x9E3779B97F4A7C15ULL ^ stream) | 1;
    bool seen = false;
    for (int i = 0; i < untracked_incomplete_count_; ++i) {
      seen = seen || untracked_incomplete_[static_cast<size_t>(i)] == key;
    }
    if (!seen) {
      ++flush_cost_streams_;
      if (untracked_incomplete_count_ < static_cast<int>(untracked_incomplete_.size())) {
        untracked_incomplete_[static_cast<size_t>(untracked_incomplete_count_++)] = key;
      }
    }
    return;
  }
  if (!s->flush_incomplete) ++flush_cost_streams_;
  s->flush_incomplete = true;
  s->incomplete = true;
  for (int32_t e = s->head; e != kNone; e = entries_[e].next) {
    Entry& entry = entries_[e];
    if (entry.correlation_id != id) continue;
    entry.seen_running = true;  // its record is gone now; it is known to have run on
    entry.unsure = false;
    if (entry.graph && node.node_id != 0 && entry.node_id == 0) {
      // The first of its nodes still incomplete: the one running (its nodes' records are written
      // in launch order), or the first queued behind it.
      entry.node_graph_id = node.graph_id;
      entry.node_id = node.node_id;
      entry.node_name = AcquireName(Mix64(node.node_id) | (uint64_t{1} << 63), node.name,
                                    node.demangled);
      entry.grid = node.grid;
      entry.block = node.block;
    }
    break;
  }
}

void StallTracker::EndConfirmation() noexcept {
  confirming_ = false;
  flush_cost_pending_ = true;
  for (Stream& s : streams_) {
    if (!s.used) continue;
    // Unsure launches of which the flush showed no record at all: theirs was lost (point 5).
    // Graph launches of which it showed no record incomplete: every node had ended (point 11).
    if (s.confirming) {
      RemoveIf(s, [](const Entry& entry) {
        return (entry.unsure || entry.graph) && !entry.seen_running ? Verdict::kRemove
                                                                    : Verdict::kKeep;
      });
    }
    // Still over the threshold with what the flush showed: stalled, its pending launches kept
    // until shown finished. Otherwise those whose records came back incomplete may now finish
    // unseen.
    const bool stalled = OverThreshold(s, last_confirmation_);
    if (s.confirming) {
      s.confirmed = stalled;
      // Not yet the threshold since the kernel holding it began: looked at again then, its
      // launches kept (they may be the start of a hang).
      if (!stalled && s.count > 0) {
        next_confirmation_ = std::min(next_confirmation_, WaitStart(s) + threshold_);
      }
    } else if (!stalled && s.incomplete && !s.reported) {
      while (s.head != kNone) PopHead(s);
    }
    s.confirming = false;
    s.incomplete = false;
  }
}

void StallTracker::ConfirmWithoutRecords(Clock::time_point now) noexcept {
  confirming_ = false;
  last_confirmation_ = now;
  next_confirmation_ = now + threshold_;
  for (Stream& s : streams_) {
    s.confirming = false;
    s.incomplete = false;
    if (OverThreshold(s, now)) s.confirmed = true;
  }
}

bool StallTracker::NeedsSynchronizations() const noexcept {
  for (const Stream& s : streams_) {
    if (!s.used || s.count == 0) continue;
    if (s.confirmed) return true;
    for (int32_t e = s.head; e != kNone; e = entries_[e].next) {
      if (entries_[e].seen_running) return true;
    }
  }
  return false;
}

void StallTracker::OnTimingLost() noexcept {
  for (Stream& s : streams_) {
    if (!s.used) continue;
    for (int32_t e = s.head; e != kNone; e = entries_[e].next) {
      if (!entries_[e].seen_running) entries_[e].unsure = true;
    }
  }
}

StallTracker::Clock::time_point StallTracker::WaitStart(const Stream& s) const noexcept {
  return std::max(entries_[s.head].launched_at, s.progress_at);
}

bool StallTracker::PollAtExit(Clock::time_point now, schema::StallEvent* out) noexcept {
  if (!stalled_) return false;
  now = std::max(now, last_poll_);
  for (const Stream& s : streams_) {
    if (s.confirmed && OverThreshold(s, now)) return false;
    if (s.used && Covering(s, now, /*stalling=*/true) != nullptr) return false;
  }
  next_check_ = Clock::time_point{};
  return Poll(now, out);  // resolved
}

bool StallTracker::Poll(Clock::time_point now, schema::StallEvent* out) noexcept {
  if (now < next_check_) return false;
  next_check_ = now + check_interval_;
  last_poll_ = now;
  int n = 0;
  for (size_t i = 0; i < streams_.size(); ++i) {
    const Stream& s = streams_[i];
    if (!s.used) continue;
    const SyncCall* call = Covering(s, now, /*stalling=*/true);
    order_call_[i] = call;
    if (call != nullptr || (s.confirmed && OverThreshold(s, now))) {
      order_[n++] = static_cast<int>(i);
    }
  }
  if (n == 0) {
    if (!stalled_) return false;
    *out = schema::StallEvent{};
    out->state = schema::StallState::kResolved;
    out->stall_ms = threshold_.count();
    out->stalled_ms = Ms(now - stall_began_);
    out->completed = completed_ - completed_at_event_;
    stalled_ = false;
    for (Stream& s : streams_) {
      s.reported = false;
      s.confirmed = false;
    }
    return true;
  }
  if (!stalled_) {
    stalled_ = true;
    stall_began_ = now;
    completed_at_event_ = completed_;
    for (int k = 0; k < n; ++k) {
      const auto i = static_cast<size_t>(order_[k]);
      const Stream& s = streams_[i];
      stall_began_ = std::min(stall_began_, StallStart(s, order_call_[i]));
      if (s.count > 0) completed_at_event_ = std::min(completed_at_event_, s.completed_at_wait);
    }
  } else if (now < next_event_) {
    return false;
  }
  next_event_ = now + repeat_;
  // Longest waiting first.
  std::sort(order_.begin(), order_.begin() + n, [this](int a, int b) {
    const auto i = static_cast<size_t>(a);
    const auto j = static_cast<size_t>(b);
    return StallStart(streams_[i], order_call_[i]) < StallStart(streams_[j], order_call_[j]);
  });
  for (Stream& s : streams_) s.reported = false;
  for (int k = 0; k < n; ++k) streams_[static_cast<size_t>(order_[k])].reported = true;
  const int listed = std::min(n, static_cast<int>(schema::kMaxStallStreams));
  const auto set_name = [this](uint16_t index, schema::StallLaunch* l) {
    if (index != kNoName) {
      const Name& name = names_[index];
      l->name = std::string_view(name.name, name.name_size);
      l->demangled = std::string_view(name.demangled, name.demangled_size);
    } else {
      l->name = {};
      l->demangled = {};
    }
  };
  for (int k = 0; k < listed; ++k) {
    const auto i = static_cast<size_t>(order_[k]);
    const Stream& s = streams_[i];
    const SyncCall* call = order_call_[i];
    schema::StallStream& view = event_streams_[static_cast<size_t>(k)];
    view = schema::StallStream{};
    view.device = s.device;
    view.context = s.context;
    view.stream = s.stream;
    view.waiting_ms = Ms(now - StallStart(s, call));
    view.unfinished = s.count + s.untimed_since_sync;
    if (call != nullptr) {
      view.evidence = schema::kStallEvidenceSyncCall;
      view.sync_api = SyncCallName(call->cbid);
      view.sync_tid = call->tid;
      view.sync_waited_ms = Ms(now - EnteredAt(*call));
    } else {
      view.evidence = schema::kStallEvidenceTimingRecords;
    }
    auto& launches = event_launches_[static_cast<size_t>(k)];
    size_t m = 0;
    // Pending launches, what the records show unfinished, unless untimed launches before the
    // oldest of them are not known finished either: any of those may be the one that runs (point
    // 10), so the last launches are listed instead.
    const bool untimed_before =
        s.untimed_first != 0 && s.count > 0 && s.untimed_first < entries_[s.head].correlation_id;
    if (s.count > 0 && !untimed_before) {
      view.launches_from = schema::kStallLaunchesFromTimingRecords;
      for (int32_t e = s.head; e != kNone && m < launches.size(); e = entries_[e].next, ++m) {
        const Entry& entry = entries_[e];
        schema::StallLaunch& l = launches[m];
        l = schema::StallLaunch{};
        l.correlation_id = CorrelationUnwrapper::Cupti(entry.correlation_id);
        set_name(entry.graph ? entry.node_name : entry.name, &l);
        l.grid = entry.grid;
        l.block = entry.block;
        l.occupancy = entry.occupancy;
        l.age_ms = Ms(now - entry.launched_at);
        if (entry.graph) {
          l.graph_launch = true;
          if (entry.graph_exec_id != 0) l.graph_exec_id = entry.graph_exec_id;
          if (entry.node_id != 0) {
            l.graph_id = entry.node_graph_id;
            l.graph_node_id = entry.node_id;
          }
        }
      }
    } else {  // the last launches recorded (design point 10), oldest first
      view.launches_from = schema::kStallLaunchesFromRecent;
      for (int r = 0; r < s.recent_count && m < launches.size(); ++r, ++m) {
        const int at = (s.next_recent - s.recent_count + r + kRecent) % kRecent;
        const Recent& recent = s.recent[static_cast<size_t>(at)];
        schema::StallLaunch& l = launches[m];
        l = schema::StallLaunch{};
        l.correlation_id = CorrelationUnwrapper::Cupti(recent.correlation_id);
        set_name(recent.name, &l);
        l.grid = recent.grid;
        l.block = recent.block;
        l.occupancy = recent.occupancy;
        l.age_ms = Ms(now - recent.launched_at);
        if (recent.graph) {
          l.graph_launch = true;
          if (recent.graph_exec_id != 0) l.graph_exec_id = recent.graph_exec_id;
        }
      }
    }
    view.launches = std::span<const schema::StallLaunch>(launches.data(), m);
  }
  *out = schema::StallEvent{};
  out->state = schema::StallState::kStalled;
  out->stall_ms = threshold_.count();
  out->stalled_ms = event_streams_[0].waiting_ms;
  out->completed = completed_ - completed_at_event_;
  completed_at_event_ = completed_;
  out->streams_stalled = n;
  out->streams =
      std::span<const schema::StallStream>(event_streams_.data(), static_cast<size_t>(listed));
  if (flush_cost_pending_) {  // what confirming it cost (point 12), said once
    out->flush_incomplete = flush_cost_records_;
    out->flush_incomplete_streams = flush_cost_streams_;
    flush_cost_pending_ = false;
  }
  return true;
}

}  // namespace cuflight::inject
