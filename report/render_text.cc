// The terminal form of the report.
#include <fmt/format.h>

#include <algorithm>

#include "cuflight/report/findings.h"
#include "cuflight/report/job_view.h"
#include "cuflight/report/kernel_names.h"
#include "cuflight/report/render.h"
#include "cuflight/report/review.h"
#include "cuflight/report/text_format.h"
#include "cuflight/report/text_table.h"

namespace cuflight::report {
namespace {

constexpr size_t kMinNameWidth = 20;

std::string HeaderLine(const Report& r) {
  const logread::ReadSummary& s = r.read;
  std::string files = Plural(s.files, "file", "files");
  if (s.compressed_files > 0) files += fmt::format(" ({} zstd)", s.compressed_files);
  size_t stalled = 0;
  size_t abnormal = 0;
  for (const size_t i : r.review) {
    const ProcessSummary& p = r.processes[i];
    stalled += p.stall && p.stall->ongoing ? 1 : 0;
    abnormal += NeedsReview(p.ending) && p.ending != Ending::kStalled ? 1 : 0;
  }
  std::string processes = Plural(r.processes.size(), "process", "processes");
  std::string notes;
  if (stalled > 0) notes += fmt::format("{} stalled", stalled);
  if (abnormal > 0) {
    notes += fmt::format("{}{} did not end normally", notes.empty() ? "" : ", ", abnormal);
  }
  if (!notes.empty()) processes += " (" + notes + ")";
  return fmt::format("cuflight report: {}, {}, {}, {} ({} timed) in {}", files,
                     Plural(s.events, "event", "events"), processes,
                     Plural(r.launches, "launch", "launches"), r.timed_launches,
                     Plural(r.signatures.size(), "kernel signature", "kernel signatures"));
}

// Shortens the KERNEL column as --name-width says (report_options.h).
void FitNames(TextTable* table, int name_width) {
  if (name_width == 0) return;
  const size_t room = name_width > 0 ? static_cast<size_t>(name_width)
                                     : table->LastColumnRoom(kTableWidth, 0, kMinNameWidth);
  table->ShortenLastColumn(room, ShortenKernelNames);
}

// `kernel_names` receives the KERNEL cells as shown, one per signature.
std::string KernelTable(const Report& r, size_t shown, bool color, int name_width,
                        std::vector<std::string>* kernel_names) {
  // Under sampled timing the measured total is not the whole: MEASURED, how many launches were
  // timed, and the estimate apart from it (docs/report.md, "Sampled timing").
  const bool sampled = r.sampled_launches > 0;
  std::vector<TextTable::Column> columns = {{"LAUNCHES", TextTable::Align::kRight},
                                            {sampled ? "MEASURED" : "TOTAL",
                                             TextTable::Align::kRight}};
  if (sampled) {
    columns.push_back({"TIMED", TextTable::Align::kRight});
    columns.push_back({"EST", TextTable::Align::kRight});
  }
  columns.insert(columns.end(), {
      {"MEAN", TextTable::Align::kRight},     {"P50", TextTable::Align::kRight},
      {"P99", TextTable::Align::kRight},      {"OCC", TextTable::Align::kRight},
      {"LIMITER", TextTable::Align::kLeft},   {"BLOCK", TextTable::Align::kRight},
      {"REGS", TextTable::Align::kRight},     {"SMEM", TextTable::Align::kRight},
      {"WAVES", TextTable::Align::kRight},    {"SPILL", TextTable::Align::kRight}});
  if (r.several_device_models) columns.push_back({"DEVICE", TextTable::Align::kLeft});
  columns.push_back({"KERNEL", TextTable::Align::kLeft});
  TextTable table(std::move(columns));
  bool varies = false;
  bool untimed = false;
  bool unknown = false;
  for (size_t i = 0; i < shown; ++i) {
    const Signature& s = r.signatures[i];
    const schema::OccupancyFields& f = s.fields();
    std::vector<TextTable::Cell> cells;
    cells.push_back({fmt::format("{}", s.launches), ""});
    cells.push_back(s.gpu_time ? TextTable::Cell{FormatDuration(s.gpu_time->total_ns), ""}
                               : TextTable::Cell{"-", ansi::kDim});
    if (sampled) {
      const uint64_t timed = s.gpu_time ? s.gpu_time->count : 0;
      // The share alone: LAUNCHES is beside it, the counts are in --json and --csv.
      cells.push_back({FormatShare(TimedFraction(s)), timed == 0 ? ansi::kDim : ""});
      if (s.sampled.launches == 0) {
        // Every launch of it was made under timing all (or off): nothing to estimate.
        cells.push_back(s.gpu_time ? TextTable::Cell{FormatDuration(s.gpu_time->total_ns), ""}
                                   : TextTable::Cell{"-", ansi::kDim});
      } else if (const std::optional<uint64_t> estimate = EstimatedGpuNs(s)) {
        cells.push_back({"~" + FormatDuration(*estimate), ansi::kCyan});
      } else {
        unknown = true;
        cells.push_back({"unknown", ansi::kYellow});
      }
    }
    if (s.gpu_time) {
      cells.push_back(
          {FormatDuration(static_cast<uint64_t>(std::llround(s.gpu_time->mean_ns))), ""});
      cells.push_back({FormatDuration(s.gpu_time->p50_ns), ""});
      cells.push_back({FormatDuration(s.gpu_time->p99_ns), ""});
    } else {
      untimed = true;
      for (int k = 0; k < 3; ++k) cells.push_back({"-", ansi::kDim});
    }
    std::string occ = FormatPercent(f.occupancy);
    if (FormatPercent(s.occupancy_min) != FormatPercent(s.occupancy_max)) {
      occ += "*";
      varies = true;
    }
    cells.push_back({occ, f.occupancy < 0.5 ? ansi::kYellow : std::string_view()});
    cells.push_back({std::string(LimiterLabel(f)), ""});
    cells.push_back({FormatDim3(s.block), ""});
    cells.push_back({fmt::format("{}", s.regs), ""});
    cells.push_back({FormatBytes(s.first.static_shared_bytes + s.dyn_smem), ""});
    cells.push_back({s.waves_mean > 0 ? fmt::format("{:.1f}", s.waves_mean) : "-", ""});
    cells.push_back({s.spills() ? FormatBytes(s.first.local_bytes) : "-",
                     s.spills() ? ansi::kYellow : std::string_view()});
    if (r.several_device_models) {
      cells.push_back({s.device_model.empty() ? "?" : s.device_model, ""});
    }
    cells.push_back({s.display_name(), ""});
    table.AddRow(std::move(cells));
    if (!s.advice.empty()) {
      for (std::string& line : WrapWords(s.advice, kTableWidth, "  > ", "    ")) {
        table.AddNote(std::move(line), ansi::kCyan);
      }
    }
  }
  FitNames(&table, name_width);
  *kernel_names = table.LastColumn();
  std::string out = table.Render(0, color);
  std::vector<std::string> legend;
  if (untimed) {
    legend.push_back(sampled ? "-: no launch of the signature was timed (GPU time unknown)"
                             : "-: no launch of the signature was timed");
  }
  if (sampled) {
    legend.push_back(
        "MEASURED: GPU time of the timed launches; TIMED: timed launches / launches; EST (~): an "
        "estimate, "
        "not a measurement: MEASURED x launches / timed for launches under sampled timing");
  }
  if (unknown) legend.push_back("unknown: sampled, and none of its launches was timed");
  if (varies) legend.push_back("*: occupancy differs between launches (min and max in --json)");
  if (!legend.empty()) {
    for (const std::string& line :
         WrapWords(fmt::format("{}", fmt::join(legend, "; ")), kTableWidth, "", "  ")) {
      out += Paint(line + "\n", ansi::kDim, color);
    }
  }
  return out;
}

// The kernels of the table above, named as there (`kernel_names`, one per signature): one
// shortening, so an id (K3) means the same kernel in both, and its legend is the one above.
std::string RetargetTable(const Report& r, size_t shown, bool color,
                          const std::vector<std::string>& kernel_names) {
  const RetargetDevice& d = *r.retarget;
  std::string out = Paint(fmt::format("Retargeted to {} ({}): occupancy per SM recomputed from "
                                      "each kernel's resources",
                                      d.name, d.key),
                          ansi::kBold, color);
  out += '\n';
  TextTable table({{"BLK/SM", TextTable::Align::kRight},
                     {"OCC", TextTable::Align::kRight},
                     {"LIMITER", TextTable::Align::kLeft},
                     {"NEW BLK/SM", TextTable::Align::kRight},
                     {"NEW OCC", TextTable::Align::kRight},
                     {"NEW LIMITER", TextTable::Align::kLeft},
                     {"KERNEL", TextTable::Align::kLeft}});
  for (size_t i = 0; i < shown; ++i) {
    const Signature& s = r.signatures[i];
    if (!s.retarget) continue;
    const schema::OccupancyFields& f = s.fields();
    const Retarget& t = *s.retarget;
    std::vector<TextTable::Cell> cells = {{fmt::format("{}", f.max_active_blocks), ""},
                                            {FormatPercent(f.occupancy), ""},
                                            {std::string(LimiterLabel(f)), ""}};
    if (t.ok) {
      const schema::OccupancyFields& n = t.result.fields;
      std::string_view style = n.occupancy > f.occupancy   ? ansi::kGreen
                               : n.occupancy < f.occupancy ? ansi::kYellow
                                                           : std::string_view();
      cells.push_back({fmt::format("{}", n.max_active_blocks), style});
      cells.push_back({FormatPercent(n.occupancy), style});
      cells.push_back({std::string(LimiterLabel(n)), ""});
    } else {
      for (int k = 0; k < 3; ++k) cells.push_back({"-", ""});
    }
    cells.push_back({i < kernel_names.size() ? kernel_names[i] : s.display_name(), ""});
    table.AddRow(std::move(cells));
    table.AddNote("  > " + t.change, ansi::kCyan);
  }
  out += table.Render(0, color);
  return out;
}

}  // namespace

std::string SortTitle(SortKey key) {
  switch (key) {
    case SortKey::kTime:
      return "by total GPU time";
    case SortKey::kLaunches:
      return "by launches";
    case SortKey::kOccupancy:
      return "by occupancy, lowest first";
  }
  return "";
}

size_t ShownSignatures(const Report& report, const ReportOptions& options) {
  const size_t all = report.signatures.size();
  int top = options.top;
  if (top < 0) top = options.format == OutputFormat::kTable ? kDefaultTableTop : 0;
  return top == 0 ? all : std::min(all, static_cast<size_t>(top));
}

std::string RenderText(const Report& r, const ReportOptions& options) {
  const bool color = options.color;
  std::string out;
  for (const std::string& line : WrapWords(HeaderLine(r), kTableWidth, "", "  ")) {
    out += Paint(line, ansi::kBold, color);
    out += '\n';
  }
  // What matters first: what failed, failed launches and calls, where the GPU time goes.
  FindingsTextOptions findings_options;
  findings_options.color = color;
  findings_options.width = kTableWidth;
  findings_options.name_width = options.name_width;
  const std::string findings = RenderFindingsText(r, BuildFindings(r), findings_options);
  if (!findings.empty()) out += "\n" + findings;
  for (const std::string& note : r.read.notes) out += "note: " + note + "\n";
  if (r.read.notes_left_out > 0) {
    out += fmt::format("note: ... and {} more torn or rejected lines\n", r.read.notes_left_out);
  }
  if (r.duplicate_events > 0) {
    out += fmt::format("note: {} read twice (same process and seq, e.g. in a spill file and a "
                       "collector log) counted once\n",
                       Plural(r.duplicate_events, "event", "events"));
  }
  if (r.read.unknown_type_lines > 0) {
    out += fmt::format("note: {} skipped (event types this cuflight does not know)\n",
                       Plural(r.read.unknown_type_lines, "line", "lines"));
  }
  for (const ProcessSummary& p : r.processes) {
    if (const std::string note = TimingStoppedNote(p); !note.empty()) out += "note: " + note + "\n";
  }
  if (r.sampled_launches > 0) {
    size_t sampled = 0;
    for (const ProcessSummary& p : r.processes) {
      sampled += p.timing_policy == TimingPolicy::kSampled ? 1 : 0;
    }
    const GpuTimeTotals t = TotalGpuTime(r);
    const std::string note = fmt::format(
        "note: kernel timing sampled (CUFLIGHT_TIMING=sampled) in {} of {}: {} of {} launches "
        "under it timed ({}); GPU time measured {}, estimated ~{}{} (an estimate, not a "
        "measurement)",
        sampled, Plural(static_cast<int64_t>(r.processes.size()), "process", "processes"),
        r.sampled_timed, r.sampled_launches,
        FormatShare(static_cast<double>(r.sampled_timed) /
                    static_cast<double>(r.sampled_launches)),
        FormatDuration(t.measured_ns), FormatDuration(t.estimate_ns.value_or(0)),
        t.unknown_signatures > 0
            ? fmt::format(" at least: {} with no timed launch unknown",
                          Plural(static_cast<int64_t>(t.unknown_signatures), "signature",
                                 "signatures"))
            : std::string());
    for (const std::string& line : WrapWords(note, kTableWidth, "", "  ")) out += line + "\n";
  }
  if (r.launches > 0 && r.timed_launches == 0) {
    out += "note: no launch was timed (no kernel_time event joined): GPU times are unavailable\n";
  }
  if (r.processes_not_selected > 0 || r.events_before_attribution > 0) {
    out += fmt::format(
        "note: {} left out by --job/--rank/--pod{}\n",
        Plural(static_cast<int64_t>(r.processes_not_selected), "process", "processes"),
        r.events_before_attribution > 0
            ? fmt::format(" ({} read before their process_start: who sent them is unknown)",
                          Plural(static_cast<int64_t>(r.events_before_attribution), "event",
                                 "events"))
            : std::string());
  }
  const std::string jobs = RenderJobsText(r, color, kTableWidth);
  if (!jobs.empty()) out += "\n" + jobs;
  ReviewTextOptions review_options;
  review_options.color = color;
  review_options.width = kTableWidth;
  review_options.name_width = options.name_width;
  review_options.per_process = options.per_process;
  const std::string review = RenderReviewText(r, review_options);
  if (!review.empty()) out += "\n" + review;
  out += '\n';
  if (r.signatures.empty()) {
    out += "No kernel launches";
    const bool filtered = !options.kernel_regex.empty() || !options.pids.empty() ||
                          !options.limiter.empty() || options.since_ns || options.until_ns;
    out += filtered ? " match the filters.\n" : " in these logs.\n";
    return out;
  }
  const size_t shown = ShownSignatures(r, options);
  std::string title = fmt::format("Kernels {}", SortTitle(options.sort));
  if (shown < r.signatures.size()) {
    title += fmt::format(" (top {} of {}; --top 0 for all)", shown, r.signatures.size());
  }
  out += Paint(title, ansi::kBold, color);
  out += '\n';
  std::vector<std::string> kernel_names;
  out += KernelTable(r, shown, color, options.name_width, &kernel_names);
  if (r.retarget) {
    out += '\n';
    out += RetargetTable(r, shown, color, kernel_names);
  }
  return out;
}

}  // namespace cuflight::report
