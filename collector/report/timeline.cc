#include "cuflight/report/timeline.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <variant>

#include "cuflight/logread/log_reader.h"
#include "cuflight/report/build_report.h"
#include "cuflight/report/review.h"
#include "join_key.h"

namespace cuflight::report {
namespace {

namespace fs = std::filesystem;

// (mangled name, block x, y, z, dynamic smem, registers, device model), as BuildReport keys a
// signature.
using SignatureKey = std::tuple<std::string, uint32_t, uint32_t, uint32_t, int64_t, int32_t,
                                std::string>;

struct PendingLaunch {
  size_t lane;
  uint64_t correlation_id;
  uint64_t seq;
  int64_t ts_ns;
  uint32_t signature;
};

struct GpuSpan {
  int64_t start_ns;
  int64_t end_ns;
};

class TimelineBuilder {
 public:
  TimelineBuilder(const Report& report, const ReportOptions& options)
      : report_(report), options_(options) {
    for (size_t i = 0; i < report.processes.size(); ++i) {
      process_index_.emplace(report.processes[i].key, i);
    }
    for (size_t i = 0; i < report.signatures.size(); ++i) {
      const Signature& s = report.signatures[i];
      signature_index_.emplace(SignatureKey(s.name, s.block.x, s.block.y, s.block.z, s.dyn_smem,
                                            s.regs, s.device_model),
                               static_cast<uint32_t>(i));
    }
  }

  bool Read(std::string* error) {
    logread::ReadSummary ignored;
    for (const fs::path& file : report_.files) {
      file_key_ = ProcessKeyOfLogFile(file);
      const bool ok = logread::ReadLogFile(
          file, [&](const schema::OwnedEvent& event, const logread::Origin&) { OnEvent(event); },
          &ignored, error);
      if (!ok) return false;
    }
    return true;
  }

  void Finish(Timeline* timeline) {
    std::vector<TimelineLane> lanes(lane_keys_.size());
    std::vector<size_t> order;
    order.reserve(lane_keys_.size());
    for (const auto& [key, index] : lane_keys_) {
      TimelineLane& lane = lanes[index];
      lane.process = std::get<0>(key);
      lane.device = std::get<1>(key);
      lane.stream = std::get<2>(key);
      order.push_back(index);
    }
    for (const PendingLaunch& l : pending_) {
      TimelineSlice slice;
      slice.signature = l.signature;
      slice.correlation_id = l.correlation_id;
      slice.seq = l.seq;
      const auto it = spans_.find(JoinKey{lanes[l.lane].process, l.correlation_id});
      if (it != spans_.end()) {
        slice.start_ns = it->second.start_ns;
        slice.end_ns = std::max(it->second.start_ns, it->second.end_ns);
        slice.timed = 1;
      } else {
        slice.start_ns = l.ts_ns;
        slice.end_ns = l.ts_ns;
      }
      TimelineLane& lane = lanes[l.lane];
      ++lane.launches;
      lane.timed += slice.timed;
      lane.slices.push_back(slice);
    }
    Timeline out;
    bool any = false;
    for (const size_t index : order) {  // lane_keys_ is ordered: process, device, stream
      TimelineLane& lane = lanes[index];
      std::stable_sort(lane.slices.begin(), lane.slices.end(),
                       [](const TimelineSlice& a, const TimelineSlice& b) {
                         return a.start_ns < b.start_ns;
                       });
      for (const TimelineSlice& s : lane.slices) {
        if (!any || s.start_ns < out.begin_ns) out.begin_ns = s.start_ns;
        if (!any || s.end_ns > out.end_ns) out.end_ns = s.end_ns;
        any = true;
      }
      out.launches += lane.launches;
      out.timed += lane.timed;
      out.lanes.push_back(std::move(lane));
    }
    *timeline = std::move(out);
  }

 private:
  std::optional<size_t> ProcessOf(const schema::Header& h) const {
    ProcessKey key{h.pid, 0};
    if (file_key_ && file_key_->pid == h.pid) {
      key = *file_key_;
    } else if (const auto it = start_of_pid_.find(h.pid); it != start_of_pid_.end()) {
      key.start_ns = it->second;
    }
    const auto it = process_index_.find(key);
    if (it == process_index_.end()) return std::nullopt;
    return it->second;
  }

  void OnEvent(const schema::OwnedEvent& event) {
    const schema::Header& h = schema::HeaderOf(event);
    if (const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&event)) {
      if (!(file_key_ && file_key_->pid == h.pid)) start_of_pid_[h.pid] = start->start_ns;
      return;
    }
    const schema::EventType type = schema::TypeOf(event);
    if (type != schema::EventType::kDevice && type != schema::EventType::kKernel &&
        type != schema::EventType::kKernelTime) {
      return;
    }
    const std::optional<size_t> process = ProcessOf(h);
    if (!process) return;
    if (const auto* device = std::get_if<schema::OwnedDeviceEvent>(&event)) {
      device_names_[{*process, device->device}] = device->name;
    } else if (const auto* time = std::get_if<schema::OwnedKernelTimeEvent>(&event)) {
      spans_.try_emplace(JoinKey{*process, time->correlation_id},
                         GpuSpan{static_cast<int64_t>(time->start_ns),
                                 static_cast<int64_t>(time->end_ns)});
    } else if (const auto* kernel = std::get_if<schema::OwnedKernelEvent>(&event)) {
      OnKernel(*process, *kernel);
    }
  }

  void OnKernel(size_t process, const schema::OwnedKernelEvent& e) {
    if (options_.since_ns && e.header.ts_ns < *options_.since_ns) return;
    if (options_.until_ns && e.header.ts_ns > *options_.until_ns) return;
    const auto device = device_names_.find({process, e.device});
    SignatureKey key(e.name, e.block.x, e.block.y, e.block.z, e.dyn_shared_bytes, e.num_regs,
                     device == device_names_.end() ? std::string() : device->second);
    const auto sig = signature_index_.find(key);
    if (sig == signature_index_.end()) return;
    const auto [lane, inserted] =
        lane_keys_.try_emplace({process, e.device, e.stream}, lane_keys_.size());
    pending_.push_back({lane->second, e.correlation_id, e.header.seq, e.header.ts_ns, sig->second});
  }

  const Report& report_;
  const ReportOptions& options_;
  std::map<ProcessKey, size_t> process_index_;
  std::map<SignatureKey, uint32_t> signature_index_;
  std::optional<ProcessKey> file_key_;
  std::map<int32_t, int64_t> start_of_pid_;
  std::map<std::pair<size_t, int32_t>, std::string> device_names_;
  std::map<std::tuple<size_t, int32_t, uint64_t>, size_t> lane_keys_;
  std::vector<PendingLaunch> pending_;
  std::unordered_map<JoinKey, GpuSpan, JoinKeyHash> spans_;
};

// Merges the slices of `lane` whose gap to the previous merged slice is below `gap_ns`.
std::vector<TimelineSlice> Merge(const std::vector<TimelineSlice>& slices, int64_t gap_ns) {
  std::vector<TimelineSlice> out;
  for (const TimelineSlice& s : slices) {
    if (!out.empty() && s.start_ns - out.back().end_ns < gap_ns) {
      TimelineSlice& m = out.back();
      m.end_ns = std::max(m.end_ns, s.end_ns);
      m.launches += s.launches;
      m.timed += s.timed;
      if (m.signature != s.signature) m.signature = kMixedSignatures;
      continue;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

bool BuildTimeline(const Report& report, const ReportOptions& options, Timeline* timeline,
                   std::string* error) {
  TimelineBuilder builder(report, options);
  if (!builder.Read(error)) return false;
  builder.Finish(timeline);
  return true;
}

TimelineReduction ReduceTimeline(const Report& report, size_t max_lanes, size_t max_slices,
                                 int width_px, Timeline* timeline) {
  TimelineReduction r;
  std::vector<TimelineLane>& lanes = timeline->lanes;
  max_lanes = std::max<size_t>(max_lanes, 1);
  if (lanes.size() > max_lanes) {
    std::vector<size_t> rank(lanes.size());
    for (size_t i = 0; i < rank.size(); ++i) rank[i] = i;
    auto reviewed = [&](size_t i) {
      return NeedsReview(report.processes[lanes[i].process].ending);
    };
    std::stable_sort(rank.begin(), rank.end(), [&](size_t a, size_t b) {
      if (reviewed(a) != reviewed(b)) return reviewed(a);
      return lanes[a].launches > lanes[b].launches;
    });
    std::vector<bool> keep(lanes.size(), false);
    for (size_t i = 0; i < max_lanes; ++i) keep[rank[i]] = true;
    std::vector<TimelineLane> kept;
    for (size_t i = 0; i < lanes.size(); ++i) {
      if (keep[i]) {
        kept.push_back(std::move(lanes[i]));
      } else {
        ++r.lanes_left_out;
        r.launches_left_out += lanes[i].launches;
      }
    }
    lanes = std::move(kept);
  }
  uint64_t slices = 0;
  for (const TimelineLane& lane : lanes) slices += lane.slices.size();
  max_slices = std::max(max_slices, lanes.size());
  if (slices > max_slices) {
    const int64_t range = std::max<int64_t>(timeline->end_ns - timeline->begin_ns, 1);
    int64_t gap = std::max<int64_t>(range / std::max(width_px, 1), 1);
    std::vector<std::vector<TimelineSlice>> merged(lanes.size());
    while (true) {
      slices = 0;
      for (size_t i = 0; i < lanes.size(); ++i) {
        merged[i] = Merge(lanes[i].slices, gap);
        slices += merged[i].size();
      }
      // Past the whole range every lane is one slice, which fits since lanes <= max_slices.
      if (slices <= max_slices || gap > range) break;
      gap *= 2;
    }
    for (size_t i = 0; i < lanes.size(); ++i) lanes[i].slices = std::move(merged[i]);
    r.merged = true;
    r.merge_gap_ns = gap;
  }
  r.slices = slices;
  return r;
}

}  // namespace cuflight::report
