#include "cuflight/report/job_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "cuflight/report/kernel_names.h"
#include "cuflight/report/review.h"
#include "cuflight/report/text_format.h"
#include "cuflight/report/text_table.h"

namespace cuflight::report {
namespace {

// A decimal integer in [0, 2^31-1] as the attribution writes rank and world_size; nullopt else.
std::optional<int32_t> Rank(std::string_view text) {
  int32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

RankRow RowOf(const std::vector<ProcessSummary>& processes, size_t index) {
  const ProcessSummary& p = processes[index];
  RankRow row;
  row.process = index;
  row.rank = Rank(AttributionValue(p, "rank"));
  row.local_rank = std::string(AttributionValue(p, "local_rank"));
  row.host = p.hostname;
  for (const auto& [ordinal, uuid] : p.device_uuids) {
    row.gpus.push_back(uuid.empty() ? fmt::format("device {} (no UUID)", ordinal) : uuid);
  }
  const std::string_view name = AttributionValue(p, "pod_name");
  const std::string_view ns = AttributionValue(p, "pod_namespace");
  if (!name.empty()) {
    row.pod = ns.empty() ? std::string(name) : fmt::format("{}/{}", ns, name);
  } else {
    row.pod = std::string(AttributionValue(p, "pod_uid"));
  }
  switch (p.ending) {
    case Ending::kEnded:
      row.ended_ns = p.end->header.ts_ns;
      if (p.end->exit_code && *p.end->exit_code != 0) {
        row.ending = RankEnding::kExited;
      } else {
        row.ending = RankEnding::kFinished;
      }
      break;
    case Ending::kApiError:
      row.ending = RankEnding::kFailedCall;
      if (p.end) row.ended_ns = p.end->header.ts_ns;
      break;
    case Ending::kCrash:
      row.ending = RankEnding::kCrashed;
      row.ended_ns = p.crash->header.ts_ns;
      break;
    case Ending::kLost:
      // The collector's time: when it saw the connection end, right after the kill.
      row.ending = RankEnding::kLost;
      row.ended_ns = p.lost->header.ts_ns;
      break;
    case Ending::kStalled:
      // Hung, not ended: it failed when its stall began (review.h: FailedAt).
      row.ending = RankEnding::kStalled;
      break;
    case Ending::kRunning:
      row.ending = RankEnding::kRunning;
      break;
  }
  row.failed_ns = FailedAt(p);
  return row;
}

// Sorts by rank (unknown last), then start, then pid; then fills the order and the first to fail.
void Finish(const std::vector<ProcessSummary>& processes, JobView* job) {
  auto key = [&](const RankRow& r) {
    const ProcessKey& k = processes[r.process].key;
    return std::make_tuple(!r.rank.has_value(), r.rank.value_or(0), k.start_ns, k.pid,
                           processes[r.process].hostname);
  };
  std::sort(job->ranks.begin(), job->ranks.end(),
            [&](const RankRow& a, const RankRow& b) { return key(a) < key(b); });
  std::set<std::string> hosts;
  std::map<int32_t, int> held;
  std::set<std::string> sizes;
  for (size_t i = 0; i < job->ranks.size(); ++i) {
    const RankRow& r = job->ranks[i];
    if (!r.host.empty()) hosts.insert(r.host);
    if (r.rank) ++held[*r.rank];
    const std::string_view size = AttributionValue(processes[r.process], "world_size");
    if (!size.empty()) sizes.insert(std::string(size));
    if (r.ended_ns) job->end_order.push_back(i);
    if (r.failed_ns) {
      const RankRow* first = job->first_failed ? &job->ranks[*job->first_failed] : nullptr;
      // Ties keep the lower rank: ranks are sorted, and only a strictly earlier time replaces.
      if (first == nullptr || *r.failed_ns < *first->failed_ns) job->first_failed = i;
    }
  }
  std::stable_sort(job->end_order.begin(), job->end_order.end(), [&](size_t a, size_t b) {
    return *job->ranks[a].ended_ns < *job->ranks[b].ended_ns;
  });
  for (size_t i = 0; i < job->end_order.size(); ++i) job->ranks[job->end_order[i]].end_order = i + 1;
  job->hosts = hosts.size();
  job->world_sizes.assign(sizes.begin(), sizes.end());
  for (const auto& [rank, count] : held) {
    if (count > 1) job->repeated_ranks.push_back(rank);
  }
  if (job->world_sizes.size() == 1) {
    if (const std::optional<int32_t> size = Rank(job->world_sizes.front())) {
      for (int32_t r = 0; r < *size && job->missing_ranks.size() < 1000; ++r) {
        if (held.count(r) == 0) job->missing_ranks.push_back(r);
      }
    }
  }
}

std::string RankText(const RankRow& r) { return r.rank ? fmt::format("{}", *r.rank) : "?"; }

std::string Ranks(const std::vector<int32_t>& ranks) {
  std::string out;
  for (const int32_t r : ranks) out += (out.empty() ? "" : ", ") + fmt::format("{}", r);
  return out;
}

}  // namespace

std::string_view RankEndingName(RankEnding ending) {
  switch (ending) {
    case RankEnding::kFinished:
      return "finished";
    case RankEnding::kExited:
      return "exited";
    case RankEnding::kFailedCall:
      return "failed call";
    case RankEnding::kCrashed:
      return "crashed";
    case RankEnding::kLost:
      return "lost";
    case RankEnding::kStalled:
      return "stalled";
    case RankEnding::kRunning:
      return "running";
  }
  return "running";
}

std::vector<JobView> BuildJobViews(const std::vector<ProcessSummary>& processes,
                                   uint64_t* without_job) {
  std::map<std::string, JobView> jobs;
  *without_job = 0;
  for (size_t i = 0; i < processes.size(); ++i) {
    const std::string_view job = AttributionValue(processes[i], "job");
    if (job.empty()) {
      ++*without_job;
      continue;
    }
    JobView& view = jobs[std::string(job)];
    view.job = std::string(job);
    view.ranks.push_back(RowOf(processes, i));
  }
  std::vector<JobView> out;
  for (auto& [id, view] : jobs) {
    Finish(processes, &view);
    out.push_back(std::move(view));
  }
  return out;
}

std::string FormatClockMs(int64_t ns) {
  if (ns <= 0) return "-";
  const std::time_t seconds = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  if (gmtime_r(&seconds, &tm) == nullptr) return "-";
  return fmt::format("{:02}:{:02}:{:02}.{:03}", tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (ns % 1000000000) / 1000000);
}

std::string JobHeadline(const JobView& job, const std::vector<ProcessSummary>& processes) {
  std::string line = fmt::format("job {}: {}", job.job,
                                 Plural(static_cast<int64_t>(job.ranks.size()), "process",
                                        "processes"));
  if (job.world_sizes.size() == 1) {
    line += fmt::format(" (world size {})", job.world_sizes.front());
  } else if (job.world_sizes.size() > 1) {
    line += fmt::format(" (world sizes disagree: {})", fmt::join(job.world_sizes, ", "));
  }
  line += fmt::format(" on {}", Plural(static_cast<int64_t>(job.hosts), "host", "hosts"));
  std::map<RankEnding, size_t> counts;
  for (const RankRow& r : job.ranks) ++counts[r.ending];
  std::vector<std::string> parts;
  for (const auto& [ending, n] : counts) parts.push_back(fmt::format("{} {}", n, RankEndingName(ending)));
  line += fmt::format("; {}", fmt::join(parts, ", "));
  if (job.first_failed) {
    const RankRow& r = job.ranks[*job.first_failed];
    line += fmt::format("; first to fail: rank {} ({} at {} UTC on {})", RankText(r),
                        RankEndingName(r.ending), FormatClockMs(*r.failed_ns),
                        r.host.empty() ? "an unknown host" : r.host);
  } else {
    line += "; none failed";
  }
  (void)processes;
  return line;
}

std::string RenderJobsText(const Report& report, bool color, int width) {
  if (report.jobs.empty()) return "";
  std::string out;
  for (const JobView& job : report.jobs) {
    for (const std::string& line :
         WrapWords(JobHeadline(job, report.processes), static_cast<size_t>(width), "", "  ")) {
      out += Paint(line, job.first_failed ? ansi::kRed : ansi::kBold, color);
      out += '\n';
    }
    TextTable table({{"RANK", TextTable::Align::kRight},
                     {"HOST", TextTable::Align::kLeft},
                     {"GPU", TextTable::Align::kLeft},
                     {"PID", TextTable::Align::kRight},
                     {"ENDED", TextTable::Align::kLeft},
                     {"ORDER", TextTable::Align::kRight},
                     {"AT (UTC)", TextTable::Align::kLeft},
                     {"LAST KERNEL", TextTable::Align::kLeft}});
    for (size_t i = 0; i < job.ranks.size(); ++i) {
      const RankRow& r = job.ranks[i];
      const ProcessSummary& p = report.processes[r.process];
      const bool first = job.first_failed && *job.first_failed == i;
      std::string ending(RankEndingName(r.ending));
      if (first) ending += " (first)";
      const std::string_view style = r.ending == RankEnding::kFinished ? std::string_view()
                                     : r.ending == RankEnding::kRunning ? ansi::kDim
                                                                        : ansi::kRed;
      const std::optional<int64_t> at = r.ended_ns ? r.ended_ns : r.failed_ns;
      std::string last = "none launched";
      if (p.last_kernel) {
        last = p.last_kernel->name;
        if (p.last_kernel->completion == Completion::kNotFinished) last += " (not finished)";
      }
      table.AddRow({{RankText(r), ""},
                    {r.host.empty() ? "?" : r.host, ""},
                    {r.gpus.empty() ? "?" : fmt::format("{}", fmt::join(r.gpus, ",")), ""},
                    {fmt::format("{}", p.key.pid), ""},
                    {ending, style},
                    {r.end_order ? fmt::format("{}", *r.end_order) : "-", ""},
                    {at ? FormatClockMs(*at) + (r.ended_ns ? "" : " (since)") : "-", ""},
                    {last, ""}});
    }
    table.ShortenLastColumn(table.LastColumnRoom(static_cast<size_t>(width), 2, 16),
                            ShortenKernelNames);
    out += table.Render(2, color);
    std::vector<std::string> notes;
    if (!job.end_order.empty()) {
      std::vector<std::string> order;
      for (const size_t i : job.end_order) {
        order.push_back(fmt::format("{} ({})", RankText(job.ranks[i]),
                                    RankEndingName(job.ranks[i].ending)));
      }
      notes.push_back(fmt::format("ranks ended in this order (each host's clock): {}",
                                  fmt::join(order, ", ")));
    }
    std::vector<std::string> not_ended;
    for (const RankRow& r : job.ranks) {
      if (!r.ended_ns) {
        not_ended.push_back(fmt::format("{} ({})", RankText(r), RankEndingName(r.ending)));
      }
    }
    if (!not_ended.empty()) {
      notes.push_back(fmt::format("not ended when the log ends: {}", fmt::join(not_ended, ", ")));
    }
    size_t no_rank = 0;
    for (const RankRow& r : job.ranks) no_rank += r.rank ? 0 : 1;
    if (no_rank > 0) {
      notes.push_back(fmt::format("{} without a rank in its attribution (RANK ?: unknown)",
                                  Plural(static_cast<int64_t>(no_rank), "process", "processes")));
    }
    if (!job.missing_ranks.empty()) {
      notes.push_back(fmt::format("ranks of the world size with no process in these logs: {}",
                                  Ranks(job.missing_ranks)));
    }
    if (!job.repeated_ranks.empty()) {
      notes.push_back(fmt::format("ranks held by more than one process (restarted?): {}",
                                  Ranks(job.repeated_ranks)));
    }
    for (const std::string& note : notes) {
      for (const std::string& line : WrapWords(note, static_cast<size_t>(width), "  ", "    ")) {
        out += line + "\n";
      }
    }
  }
  if (report.processes_without_job > 0) {
    out += fmt::format("{} no job in its attribution (not in a job view)\n",
                       Plural(static_cast<int64_t>(report.processes_without_job), "process has",
                              "processes have"));
  }
  return out;
}

}  // namespace cuflight::report
