// The JSON and CSV forms of the report.
#include <fmt/format.h>

#include "cuflight/report/job_view.h"
#include "cuflight/report/render.h"
#include "cuflight/report/findings.h"
#include "cuflight/report/review.h"
#include "cuflight/report/text_format.h"
#include "cuflight/report/text_format.h"

namespace cuflight::report {
namespace {

using nlohmann::json;

json Dim(const schema::Dim3& d) { return json::array({d.x, d.y, d.z}); }

json OrNull(int64_t value) { return value < 0 ? json(nullptr) : json(value); }

json LaunchJson(const LaunchSummary& l) {
  json j = {{"seq", l.seq},
            {"ts_ns", l.ts_ns},
            {"correlation_id", l.correlation_id},
            {"name", l.name},
            {"grid", Dim(l.grid)},
            {"block", Dim(l.block)},
            {"occupancy", l.occupancy},
            {"finished", l.completion == Completion::kUnknown
                             ? json(nullptr)
                             : json(l.completion == Completion::kFinished)},
            {"duration_ns", l.duration_ns ? json(*l.duration_ns) : json(nullptr)},
            {"in_failed_call", l.in_error}};
  if (l.graph_node_id != 0) j["graph_node_id"] = l.graph_node_id;  // a graph's kernel node
  return j;
}

json ProcessJson(const ProcessSummary& p, bool with_streams) {
  json devices = json::array();
  for (const auto& [ordinal, name] : p.devices) devices.push_back({{"device", ordinal}, {"name", name}});
  json j = {{"pid", p.key.pid},
            {"start_ns", p.key.start_ns},
            {"hostname", p.hostname},
            {"exe", p.exe},
            {"argv", p.argv},
            {"has_process_start", p.has_start},
            {"devices", devices},
            {"events", p.events},
            {"kernels", p.kernels},
            {"timed_kernels", p.timed_kernels},
            {"api_errors", p.api_errors},
            {"dropped", p.dropped},
            {"timing_policy", TimingPolicyName(p.timing_policy)},
            {"timing_windows", p.timing_windows},
            {"timing_window_ns", p.timing_window_ns},
            {"launches_in_window", p.launches_in_window},
            {"timing_dropped", p.timing_dropped},
            {"timing_stopped", p.timing_stopped},
            {"timing_stopped_reason", schema::TimingStoppedReasonName(p.timing_stopped_reason)},
            {"first_ts_ns", p.first_ts_ns},
            {"last_ts_ns", p.last_ts_ns},
            {"ending", EndingName(p.ending)},
            {"ending_detail", p.ending_detail},
            {"exit_code", p.end && p.end->exit_code ? json(*p.end->exit_code) : json(nullptr)}};
  if (!p.attribution.empty()) {
    json attribution = json::object();
    for (const auto& [k, v] : p.attribution) attribution[k] = v;
    j["attribution"] = std::move(attribution);
  }
  if (p.lost) {
    j["lost"] = {{"reason", schema::LostReasonName(p.lost->reason)},
                 {"last_seq", p.lost->last_seq ? json(*p.lost->last_seq) : json(nullptr)},
                 {"events_stored", p.lost->events_stored},
                 {"events_lost", p.lost->events_lost}};
  }
  if (p.crash) {
    const schema::OwnedProcessCrashEvent& e = *p.crash;
    j["crash"] = {{"seq", e.header.seq},   {"ts_ns", e.header.ts_ns},
                  {"signal", e.signal},    {"signal_name", e.signal_name},
                  {"code", e.code},        {"addr", e.addr},
                  {"tid", e.tid},          {"app_handler", e.app_handler}};
  }
  if (p.last_api_error) {
    const schema::OwnedApiErrorEvent& e = *p.last_api_error;
    j["last_api_error"] = {{"seq", e.header.seq},         {"ts_ns", e.header.ts_ns},
                           {"api", e.api},                {"code", e.code},
                           {"error_name", e.error_name},  {"message", e.message},
                           {"device", e.device},          {"stream", e.stream},
                           {"last_correlation_ids", e.last_correlation_ids}};
  }
  json failed_calls = json::array();
  for (const FailedCall& c : p.failed_calls) {
    failed_calls.push_back({{"api", c.first.api},
                            {"code", c.first.code},
                            {"error_name", c.first.error_name},
                            {"count", c.count},
                            {"launch", IsLaunchCall(c.first.api)},
                            {"first", {{"seq", c.first.header.seq},
                                       {"ts_ns", c.first.header.ts_ns},
                                       {"message", c.first.message},
                                       {"device", c.first.device},
                                       {"stream", c.first.stream}}}});
  }
  j["failed_calls"] = std::move(failed_calls);
  j["failed_calls_left_out"] = p.failed_calls_left_out;
  if (p.stall) {
    const StallSummary& st = *p.stall;
    json stall = {{"stalls", st.stalls}, {"longest_ms", st.longest_ms}, {"ongoing", st.ongoing}};
    if (st.stalls > 0) {
      const schema::OwnedStallEvent& e = st.latest;
      json streams = json::array();
      for (const schema::OwnedStallStream& s : e.streams) {
        json launches = json::array();
        for (const schema::OwnedStallLaunch& l : s.launches) {
          launches.push_back({{"correlation_id", l.correlation_id},
                              {"name", l.name},
                              {"demangled", l.demangled},
                              {"grid", Dim(l.grid)},
                              {"block", Dim(l.block)},
                              {"occupancy", l.occupancy},
                              {"age_ms", l.age_ms}});
        }
        streams.push_back({{"device", s.device},
                           {"context", s.context},
                           {"stream", s.stream},
                           {"waiting_ms", s.waiting_ms},
                           {"unfinished", s.unfinished},
                           {"launches", launches}});
      }
      stall["latest"] = {{"seq", e.header.seq},      {"ts_ns", e.header.ts_ns},
                         {"stall_ms", e.stall_ms},   {"stalled_ms", e.stalled_ms},
                         {"completed", e.completed}, {"streams_stalled", e.streams_stalled},
                         {"streams", streams}};
    }
    j["stall"] = stall;
  }
  if (with_streams) {
    json streams = json::array();
    for (const StreamTail& s : p.streams) {
      json launches = json::array();
      for (const LaunchSummary& l : s.last) launches.push_back(LaunchJson(l));
      streams.push_back({{"device", s.device},
                         {"stream", s.stream},
                         {"launches", s.launches},
                         {"last_launches", launches}});
    }
    j["streams"] = streams;
  }
  return j;
}

json FieldsJson(const schema::OccupancyFields& f) {
  return {{"max_active_blocks", f.max_active_blocks},
          {"active_warps", f.active_warps},
          {"max_warps", f.max_warps},
          {"occupancy", f.occupancy},
          {"limiting_resource", schema::ResourceName(f.limiting_resource)}};
}

json JobJson(const JobView& job, const std::vector<ProcessSummary>& processes) {
  auto opt = [](const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); };
  json ranks = json::array();
  for (const RankRow& r : job.ranks) {
    const ProcessSummary& p = processes[r.process];
    json last = nullptr;
    if (p.last_kernel) {
      last = LaunchJson(*p.last_kernel);
      last["device"] = p.last_kernel_device;
      last["stream"] = p.last_kernel_stream;
    }
    ranks.push_back({{"rank", r.rank ? json(*r.rank) : json(nullptr)},
                     {"local_rank", r.local_rank.empty() ? json(nullptr) : json(r.local_rank)},
                     {"host", r.host.empty() ? json(nullptr) : json(r.host)},
                     {"gpus", r.gpus},
                     {"pod", r.pod.empty() ? json(nullptr) : json(r.pod)},
                     {"pid", p.key.pid},
                     {"start_ns", p.key.start_ns},
                     {"ending", RankEndingName(r.ending)},
                     {"ending_detail", p.ending_detail},
                     {"ended_ns", opt(r.ended_ns)},
                     {"failed_ns", opt(r.failed_ns)},
                     {"end_order", r.end_order ? json(*r.end_order) : json(nullptr)},
                     {"last_kernel", last}});
  }
  auto rank_of = [&](size_t i) {
    return job.ranks[i].rank ? json(*job.ranks[i].rank) : json(nullptr);
  };
  json order = json::array();
  for (const size_t i : job.end_order) order.push_back(rank_of(i));
  return {{"job", job.job},
          {"world_sizes", job.world_sizes},
          {"hosts", job.hosts},
          {"ranks", ranks},
          {"end_order", order},
          {"first_failed", job.first_failed ? rank_of(*job.first_failed) : json(nullptr)},
          {"first_failed_index",
           job.first_failed ? json(*job.first_failed) : json(nullptr)},
          {"missing_ranks", job.missing_ranks},
          {"repeated_ranks", job.repeated_ranks}};
}

json SignatureJson(const Signature& s) {
  const schema::OccupancyFields& f = s.fields();
  json resources = json::object();
  for (int i = 0; i < schema::kResourceCount; ++i) {
    const ResourceLimit& r = s.resources[static_cast<size_t>(i)];
    const std::string name(schema::ResourceName(static_cast<schema::Resource>(i)));
    if (!r.applies) {
      resources[name] = nullptr;
      continue;
    }
    resources[name] = {{"occupancy", r.occupancy},
                       {"blocks_per_sm", r.blocks_per_sm ? json(*r.blocks_per_sm) : json(nullptr)}};
  }
  json limiting = json::array();
  for (int i = 0; i < schema::kResourceCount; ++i) {
    if (f.limiting_resources & schema::MaskOf(static_cast<schema::Resource>(i))) {
      limiting.push_back(schema::ResourceName(static_cast<schema::Resource>(i)));
    }
  }
  json gpu = nullptr;
  if (s.gpu_time) {
    gpu = {{"count", s.gpu_time->count},   {"total_ns", s.gpu_time->total_ns},
           {"mean_ns", s.gpu_time->mean_ns}, {"p50_ns", s.gpu_time->p50_ns},
           {"p99_ns", s.gpu_time->p99_ns}, {"min_ns", s.gpu_time->min_ns},
           {"max_ns", s.gpu_time->max_ns},
           {"percentiles_exact", s.gpu_time->percentiles_exact}};
  }
  json j = {{"name", s.name},
            {"demangled", s.demangled},
            {"device_model", s.device_model},
            {"block", Dim(s.block)},
            {"registers", s.regs},
            {"static_smem", s.first.static_shared_bytes},
            {"dyn_smem", s.dyn_smem},
            {"local_bytes", s.first.local_bytes},
            {"spills", s.spills()},
            {"max_threads_per_block", s.first.max_threads_per_block},
            {"carveout", s.first.carveout},
            {"cluster", s.first.cluster ? Dim(*s.first.cluster) : json(nullptr)},
            {"launches", s.launches},
            {"processes", s.processes},
            {"timed_launches", s.gpu_time ? s.gpu_time->count : 0},
            {"gpu_time", gpu},
            {"occupancy", f.occupancy},
            {"occupancy_min", s.occupancy_min},
            {"occupancy_max", s.occupancy_max},
            {"max_active_blocks", f.max_active_blocks},
            {"active_warps", f.active_warps},
            {"max_warps", f.max_warps},
            {"warps_per_block", s.warps_per_block},
            {"limiting_resource", schema::ResourceName(f.limiting_resource)},
            {"limiting_resources", limiting},
            {"resources", resources},
            {"allocated_regs_per_block", f.allocated_regs_per_block},
            {"allocated_smem_per_block", f.allocated_smem_per_block},
            {"waves", {{"mean", s.waves_mean}, {"min", s.waves_min}, {"max", s.waves_max}}},
            {"tail_utilization_mean", s.tail_mean},
            {"what_if",
             {{"regs_for_next_block", OrNull(f.regs_for_next_block)},
              {"smem_for_next_block", OrNull(f.smem_for_next_block)},
              {"best_block_size", f.best_block_size}}},
            {"advice", s.advice.empty() ? json(nullptr) : json(s.advice)}};
  if (s.sampled.launches > 0) {
    // Never folded into gpu_time: that is what was measured, this what it suggests.
    const std::optional<uint64_t> estimate = EstimatedGpuNs(s);
    j["gpu_time_estimate"] = {
        {"estimate_ns", estimate ? json(*estimate) : json(nullptr)},
        {"is_measurement", false},
        {"method", "measured_ns x sampled_launches / sampled_timed_launches, plus the measured "
                   "time of launches not sampled"},
        {"measured_ns", s.gpu_time ? json(s.gpu_time->total_ns) : json(nullptr)},
        {"sampled_launches", s.sampled.launches},
        {"sampled_timed_launches", s.sampled.timed},
        {"sampled_measured_ns", s.sampled.measured_ns},
        {"sampled_fraction",
         static_cast<double>(s.sampled.timed) / static_cast<double>(s.sampled.launches)}};
  }
  if (s.retarget) {
    const Retarget& t = *s.retarget;
    json rt = {{"ok", t.ok}, {"change", t.change}};
    if (t.ok) {
      rt["result"] = FieldsJson(t.result.fields);
    } else {
      rt["error"] = t.error;
    }
    j["retarget"] = rt;
  }
  return j;
}

}  // namespace

json RenderJson(const Report& r, const ReportOptions& options) {
  json files = json::array();
  for (const auto& f : r.files) files.push_back(f.native());
  json read = {{"files", files},
               {"file_count", r.read.files},
               {"compressed_files", r.read.compressed_files},
               {"lines", r.read.lines},
               {"events", r.read.events},
               {"torn_lines", r.read.torn_lines},
               {"rejected_lines", r.read.rejected_lines},
               {"unknown_type_lines", r.read.unknown_type_lines},
               {"duplicate_events", r.duplicate_events},
               {"notes", r.read.notes},
               {"notes_left_out", r.read.notes_left_out}};
  json processes = json::array();
  for (const ProcessSummary& p : r.processes) processes.push_back(ProcessJson(p, false));
  json review = json::array();
  for (const size_t i : r.review) review.push_back(ProcessJson(r.processes[i], true));
  json groups = json::array();
  for (const ReviewGroup& g : r.review_groups) {
    json pids = json::array();
    for (const size_t i : g.processes) pids.push_back(r.processes[i].key.pid);
    const std::optional<int64_t> failed = FailedAt(r.processes[g.processes.front()]);
    groups.push_back({{"says", g.says},
                      {"pids", pids},
                      {"first_failed_ns", failed ? json(*failed) : json(nullptr)}});
  }
  const Findings found = BuildFindings(r);
  auto calls = [&](const std::vector<FailedCallFinding>& kinds) {
    json out = json::array();
    for (const FailedCallFinding& k : kinds) {
      out.push_back({{"api", k.first.api},
                     {"code", k.first.code},
                     {"error_name", k.first.error_name},
                     {"count", k.count},
                     {"processes", k.processes},
                     {"first", {{"pid", r.processes[k.first_process].key.pid},
                                {"seq", k.first.header.seq},
                                {"ts_ns", k.first.header.ts_ns},
                                {"message", k.first.message},
                                {"device", k.first.device},
                                {"stream", k.first.stream}}}});
    }
    return out;
  };
  json top = json::array();
  for (size_t k = 0; k < found.top_kernels.size(); ++k) {
    const Signature& s = r.signatures[found.top_kernels[k]];
    top.push_back({{"name", s.name},
                   {"demangled", s.demangled},
                   {found.by_launches ? "launches" : found.estimated ? "gpu_time_estimate_ns"
                                                                    : "gpu_time_ns",
                    found.top_weights[k]},
                   {"occupancy", s.fields().occupancy},
                   {"limiter", LimiterLabel(s.fields())},
                   {"advice", s.advice.empty() ? json(nullptr) : json(s.advice)}});
  }
  json findings = {{"review_groups", groups},
                   {"failed_launches", calls(found.failed_launches)},
                   {"failed_launch_count", found.failed_launch_count},
                   {"failed_launch_processes", found.failed_launch_processes},
                   {"failed_calls", calls(found.failed_calls)},
                   {"failed_calls_left_out", found.failed_calls_left_out},
                   {"top_kernels", top}};
  json signatures = json::array();
  const size_t shown = ShownSignatures(r, options);
  for (size_t i = 0; i < shown; ++i) signatures.push_back(SignatureJson(r.signatures[i]));
  json jobs = json::array();
  for (const JobView& job : r.jobs) jobs.push_back(JobJson(job, r.processes));
  read["processes_not_selected"] = r.processes_not_selected;
  read["events_before_attribution"] = r.events_before_attribution;
  json doc = {{"findings", findings},
              {"read", read},
              {"processes", processes},
              {"jobs", jobs},
              {"processes_without_job", r.processes_without_job},
              {"review", review},
              {"signatures", signatures},
              {"totals",
               {{"signatures", r.signatures.size()},
                {"signatures_shown", shown},
                {"launches", r.launches},
                {"timed_launches", r.timed_launches},
                {"sampled_launches", r.sampled_launches},
                {"sampled_timed_launches", r.sampled_timed},
                {"several_device_models", r.several_device_models}}}};
  if (r.sampled_launches > 0) {
    const GpuTimeTotals t = TotalGpuTime(r);
    doc["totals"]["gpu_time_measured_ns"] = t.measured_ns;
    doc["totals"]["gpu_time_estimate_ns"] = t.estimate_ns.value_or(0);
    doc["totals"]["gpu_time_estimate_unknown_signatures"] = t.unknown_signatures;
  }
  if (r.retarget) {
    doc["retarget"] = {{"key", r.retarget->key}, {"name", r.retarget->name}};
  }
  return doc;
}

std::string RenderCsv(const Report& r, const ReportOptions& options) {
  std::vector<std::string> header = {
      "name",          "demangled",        "device_model",      "block_x",
      "block_y",       "block_z",          "registers",         "static_smem",
      "dyn_smem",      "local_bytes",      "launches",          "timed_launches",
      "gpu_total_ns",  "gpu_mean_ns",      "gpu_p50_ns",        "gpu_p99_ns",
      "occupancy",     "max_active_blocks", "limiting_resource", "reg_occupancy",
      "smem_occupancy", "warp_occupancy",  "block_occupancy",   "barrier_occupancy",
      "cluster_occupancy", "waves_mean",   "tail_utilization_mean", "advice"};
  const bool sampled = r.sampled_launches > 0;
  if (sampled) {
    for (const char* h : {"sampled_launches", "sampled_timed_launches", "sampled_fraction",
                          "gpu_estimate_ns"}) {
      header.emplace_back(h);
    }
  }
  if (r.retarget) {
    for (const char* h : {"retarget_device", "retarget_max_active_blocks", "retarget_occupancy",
                          "retarget_limiting_resource", "retarget_change"}) {
      header.emplace_back(h);
    }
  }
  std::string out;
  auto row = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) out += ',';
      out += CsvField(cells[i]);
    }
    out += "\r\n";
  };
  row(header);
  const size_t shown = ShownSignatures(r, options);
  for (size_t i = 0; i < shown; ++i) {
    const Signature& s = r.signatures[i];
    const schema::OccupancyFields& f = s.fields();
    auto num = [](auto v) { return fmt::format("{}", v); };
    const bool timed = s.gpu_time.has_value();
    std::vector<std::string> cells = {
        s.name,
        s.demangled,
        s.device_model,
        num(s.block.x),
        num(s.block.y),
        num(s.block.z),
        num(s.regs),
        num(s.first.static_shared_bytes),
        num(s.dyn_smem),
        num(s.first.local_bytes),
        num(s.launches),
        num(timed ? s.gpu_time->count : 0),
        timed ? num(s.gpu_time->total_ns) : "",
        timed ? num(s.gpu_time->mean_ns) : "",
        timed ? num(s.gpu_time->p50_ns) : "",
        timed ? num(s.gpu_time->p99_ns) : "",
        num(f.occupancy),
        num(f.max_active_blocks),
        std::string(schema::ResourceName(f.limiting_resource)),
        num(f.reg_occupancy),
        num(f.smem_occupancy),
        num(f.warp_occupancy),
        num(f.block_occupancy),
        num(f.barrier_occupancy),
        f.has_cluster ? num(f.cluster_occupancy) : "",
        num(s.waves_mean),
        num(s.tail_mean),
        s.advice};
    if (sampled) {
      // Empty when the signature had no sampled launch (its measurement is whole), and the
      // estimate empty when none of them was timed (unknown).
      const bool any = s.sampled.launches > 0;
      const std::optional<uint64_t> estimate = EstimatedGpuNs(s);
      cells.push_back(num(s.sampled.launches));
      cells.push_back(num(s.sampled.timed));
      cells.push_back(any ? num(static_cast<double>(s.sampled.timed) /
                                static_cast<double>(s.sampled.launches))
                          : "");
      cells.push_back(estimate ? num(*estimate) : "");
    }
    if (r.retarget) {
      cells.push_back(r.retarget->key);
      if (s.retarget && s.retarget->ok) {
        const schema::OccupancyFields& n = s.retarget->result.fields;
        cells.push_back(num(n.max_active_blocks));
        cells.push_back(num(n.occupancy));
        cells.push_back(std::string(schema::ResourceName(n.limiting_resource)));
      } else {
        cells.insert(cells.end(), 3, "");
      }
      cells.push_back(s.retarget ? s.retarget->change : "");
    }
    row(cells);
  }
  return out;
}

}  // namespace cuflight::report
