#include "cuflight/report/findings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>

#include "cuflight/report/job_view.h"
#include "cuflight/report/kernel_names.h"
#include "cuflight/report/review.h"
#include "cuflight/report/text_format.h"
#include "cuflight/report/text_table.h"
#include "cuflight/schema/sticky_errors.h"

namespace cuflight::report {
namespace {

constexpr size_t kMinNameWidth = 20;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

// Where a finding's lines wrap: the first line at 2 columns, the rest at 6.
void AddWrapped(std::string* out, const std::string& text, int width, std::string_view first,
                std::string_view rest, std::string_view style, bool color) {
  for (const std::string& line : WrapWords(text, static_cast<size_t>(width), first, rest)) {
    *out += Paint(line, style, color);
    *out += '\n';
  }
}

std::string FirstInstance(const Report& r, const FailedCallFinding& f) {
  const schema::OwnedApiErrorEvent& e = f.first;
  std::string text = fmt::format("the first: {} at {} UTC, seq {}",
                                 ProcessWho(r.processes[f.first_process]),
                                 FormatClockMs(e.header.ts_ns), e.header.seq);
  if (e.device >= 0) text += fmt::format(", device {}", e.device);
  if (e.stream != 0xffffffffu) text += fmt::format(", stream {}", FormatStreamId(e.stream));
  if (!e.message.empty()) text += ": " + Clip(e.message, 200);
  return text;
}

std::string CallLine(const FailedCallFinding& f) {
  return fmt::format("{}: {} in {}", FailedCallText(f.first), f.count,
                     Plural(static_cast<int64_t>(f.processes), "process", "processes"));
}

}  // namespace

std::string FailedCallText(const schema::OwnedApiErrorEvent& e) {
  return fmt::format("{} returned {} ({})", e.api, e.error_name, e.code);
}

std::string ProcessWho(const ProcessSummary& p) {
  std::string who = ProcessName(p);
  if (!p.hostname.empty()) who += " on " + p.hostname;
  return who;
}

std::string WhereItFailed(const ProcessSummary& p, size_t name_width) {
  std::string text;
  if (const std::optional<int64_t> at = FailedAt(p)) {
    text = fmt::format("{} {} UTC", p.ending == Ending::kStalled ? "stalled since" : "at",
                       FormatClockMs(*at));
  }
  // A hang names the kernel it waits on in what it says; any other failure its last launch.
  if (p.ending != Ending::kStalled && p.last_kernel) {
    const LaunchSummary& l = *p.last_kernel;
    std::string finished;
    switch (l.completion) {
      case Completion::kFinished:
        finished = "finished in " + FormatDuration(l.duration_ns.value_or(0));
        break;
      case Completion::kNotFinished:
        finished = "did not finish";
        break;
      case Completion::kUnknown:
        finished = "whether it finished is unknown";
        break;
    }
    text += fmt::format("{}its last kernel launched: {} (device {}, stream {}, seq {}): {}",
                        text.empty() ? "" : "; ",
                        ShortenKernelName(l.name, std::max<size_t>(name_width, 8)),
                        p.last_kernel_device, FormatStreamId(p.last_kernel_stream), l.seq,
                        finished);
  } else if (p.ending != Ending::kStalled) {
    text += text.empty() ? "no kernel launched" : "; no kernel launched";
  }
  return text;
}

Findings BuildFindings(const Report& r, size_t top_kernels) {
  Findings f;
  // (launch, api, code) -> finding; the processes with it counted once each.
  std::map<std::tuple<std::string, int32_t>, FailedCallFinding> calls;
  for (size_t i = 0; i < r.processes.size(); ++i) {
    const ProcessSummary& p = r.processes[i];
    f.failed_calls_left_out += p.failed_calls_left_out;
    bool launched = false;
    for (const FailedCall& c : p.failed_calls) {
      FailedCallFinding& k = calls[{c.first.api, c.first.code}];
      const bool earlier = k.count == 0 || c.first.header.ts_ns < k.first.header.ts_ns;
      k.count = SaturatingAdd(k.count, c.count);
      ++k.processes;
      if (earlier) {
        k.first = c.first;
        k.first_process = i;
        k.launch = IsLaunchCall(c.first.api);
      }
      if (k.launch) {
        f.failed_launch_count = SaturatingAdd(f.failed_launch_count, c.count);
        launched = true;
      }
    }
    f.failed_launch_processes += launched ? 1 : 0;
  }
  for (auto& [key, k] : calls) (k.launch ? f.failed_launches : f.failed_calls).push_back(k);
  auto by_first = [](const FailedCallFinding& a, const FailedCallFinding& b) {
    return std::tie(a.first.header.ts_ns, a.first_process) <
           std::tie(b.first.header.ts_ns, b.first_process);
  };
  std::stable_sort(f.failed_launches.begin(), f.failed_launches.end(), by_first);
  std::stable_sort(f.failed_calls.begin(), f.failed_calls.end(), by_first);

  f.by_launches = r.timed_launches == 0;
  f.estimated = !f.by_launches && r.sampled_launches > 0;
  std::vector<std::pair<size_t, uint64_t>> order;
  for (size_t i = 0; i < r.signatures.size(); ++i) {
    const Signature& s = r.signatures[i];
    std::optional<uint64_t> weight;
    if (f.by_launches) {
      weight = s.launches;
    } else if (f.estimated && s.sampled.launches > 0) {
      weight = EstimatedGpuNs(s);
    } else if (s.gpu_time) {
      weight = s.gpu_time->total_ns;
    }
    if (!weight || *weight == 0) continue;
    order.emplace_back(i, *weight);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  uint64_t all = 0;
  for (const auto& [i, w] : order) all = SaturatingAdd(all, w);
  f.top_total = all;
  f.gpu_ns = f.by_launches ? 0 : all;
  if (order.size() > top_kernels) order.resize(top_kernels);
  for (const auto& [i, w] : order) {
    f.top_kernels.push_back(i);
    f.top_weights.push_back(w);
  }
  return f;
}

std::string RenderFindingsText(const Report& r, const Findings& f, const FindingsTextOptions& o) {
  if (r.review_groups.empty() && f.failed_launches.empty() && f.failed_calls.empty() &&
      f.top_kernels.empty()) {
    return "";
  }
  const bool bad = !r.review_groups.empty() || !f.failed_launches.empty();
  const size_t name_room = o.name_width > 0 ? static_cast<size_t>(o.name_width) : 60;
  std::string out = Paint("Findings", bad ? ansi::kRed : ansi::kBold, o.color);
  out += '\n';
  // 1. What died or hung, the first to fail first.
  for (const ReviewGroup& g : r.review_groups) {
    const ProcessSummary& first = r.processes[g.processes.front()];
    const size_t n = g.processes.size();
    const bool failed = FailedAt(first).has_value();
    const std::string_view style = failed ? ansi::kRed : ansi::kYellow;
    if (n == 1) {
      AddWrapped(&out, fmt::format("{}: {}", ProcessWho(first), g.says), o.width, "  ",
                 "      ", style, o.color);
      AddWrapped(&out, WhereItFailed(first, name_room), o.width, "    ", "      ", "", o.color);
      continue;
    }
    AddWrapped(&out, fmt::format("{} processes: {}", n, g.says), o.width, "  ", "      ", style,
               o.color);
    AddWrapped(&out,
               fmt::format("{} {}, {}", failed ? "the first to fail:" : "the first:",
                           ProcessWho(first), WhereItFailed(first, name_room)),
               o.width, "    ", "      ", "", o.color);
    std::vector<int64_t> pids;
    std::vector<int64_t> ranks;
    for (size_t k = 1; k < n; ++k) {
      const ProcessSummary& p = r.processes[g.processes[k]];
      pids.push_back(p.key.pid);
      const std::string_view rank = AttributionValue(p, "rank");
      if (!rank.empty()) ranks.push_back(std::strtoll(std::string(rank).c_str(), nullptr, 10));
    }
    AddWrapped(&out,
               fmt::format("\u00d7 {} more, the same: pid{} {}{}", n - 1, n == 2 ? "" : "s",
                           CompactList(pids),
                           ranks.size() == pids.size()
                               ? fmt::format(" (rank{} {})", n == 2 ? "" : "s", CompactList(ranks))
                               : std::string()),
               o.width, "    ", "      ", "", o.color);
  }
  // 2. Failed launches: a bug in the program. Then the other failed calls.
  if (!f.failed_launches.empty()) {
    AddWrapped(&out,
               fmt::format("{} in {}: a launch that returns an error runs nothing, and a program "
                           "that goes on without its results is wrong; check the launch's grid, "
                           "block, shared memory and arguments",
                           Plural(static_cast<int64_t>(f.failed_launch_count), "failed launch",
                                  "failed launches"),
                           Plural(static_cast<int64_t>(f.failed_launch_processes), "process",
                                  "processes")),
               o.width, "  ", "      ", ansi::kRed, o.color);
    for (const FailedCallFinding& k : f.failed_launches) {
      std::string line = CallLine(k);
      if (schema::IsStickyError(k.first.code)) {
        line += " (a sticky error: an earlier fault broke the context)";
      }
      AddWrapped(&out, line + "; " + FirstInstance(r, k), o.width, "    ", "      ", "", o.color);
    }
  }
  if (!f.failed_calls.empty()) {
    uint64_t count = 0;
    for (const FailedCallFinding& k : f.failed_calls) count = SaturatingAdd(count, k.count);
    AddWrapped(&out, fmt::format("{}:", Plural(static_cast<int64_t>(count), "failed call",
                                               "failed calls")),
               o.width, "  ", "      ", ansi::kYellow, o.color);
    for (const FailedCallFinding& k : f.failed_calls) {
      AddWrapped(&out, CallLine(k) + "; " + FirstInstance(r, k), o.width, "    ", "      ", "",
                 o.color);
    }
  }
  if (f.failed_calls_left_out > 0) {
    AddWrapped(&out,
               fmt::format("and {} of other kinds (--json has each process's first {} kinds)",
                           Plural(static_cast<int64_t>(f.failed_calls_left_out), "failed call",
                                  "failed calls"),
                           kMaxFailedCallKinds),
               o.width, "    ", "      ", ansi::kDim, o.color);
  }
  // 3. Where the GPU time goes, and what to try.
  if (!f.top_kernels.empty()) {
    out += Paint(f.by_launches ? std::string("  Top kernels by launches (no launch was timed):")
                 : f.estimated
                     ? fmt::format("  Top kernels by GPU time, estimated under sampled timing (~{} "
                                   "in all; an estimate, not a measurement):",
                                   FormatDuration(f.gpu_ns))
                     : fmt::format("  Top kernels by GPU time ({} measured in all):",
                                   FormatDuration(f.gpu_ns)),
                 ansi::kBold, o.color);
    out += '\n';
    TextTable table({{"SHARE", TextTable::Align::kRight},
                     {f.by_launches ? "LAUNCHES" : f.estimated ? "EST" : "GPU TIME",
                      TextTable::Align::kRight},
                     {"OCC", TextTable::Align::kRight},
                     {"LIMITER", TextTable::Align::kLeft},
                     {"KERNEL", TextTable::Align::kLeft}});
    for (size_t k = 0; k < f.top_kernels.size(); ++k) {
      const Signature& s = r.signatures[f.top_kernels[k]];
      const uint64_t w = f.top_weights[k];
      const schema::OccupancyFields& fields = s.fields();
      const double share =
          static_cast<double>(w) / static_cast<double>(std::max<uint64_t>(f.top_total, 1));
      table.AddRow({{FormatShare(share), ""},
                    {f.by_launches ? fmt::format("{}", w)
                                   : (f.estimated && s.sampled.launches > 0 ? "~" : "") +
                                         FormatDuration(w),
                     ""},
                    {FormatPercent(fields.occupancy),
                     fields.occupancy < 0.5 ? ansi::kYellow : std::string_view()},
                    {std::string(LimiterLabel(fields)), ""},
                    {s.display_name(), ""}});
      if (!s.advice.empty()) {
        for (std::string& line : WrapWords(s.advice, static_cast<size_t>(o.width - 4), "  > ",
                                           "    ")) {
          table.AddNote(std::move(line), ansi::kCyan);
        }
      }
    }
    if (o.name_width != 0) {
      table.ShortenLastColumn(o.name_width > 0
                                  ? static_cast<size_t>(o.name_width)
                                  : table.LastColumnRoom(static_cast<size_t>(o.width), 4,
                                                         kMinNameWidth),
                              ShortenKernelNames);
    }
    out += table.Render(4, o.color);
  }
  return out;
}

}  // namespace cuflight::report
