#include "cuflight/report/review.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "cuflight/report/kernel_names.h"
#include "cuflight/report/text_format.h"
#include "cuflight/report/text_table.h"

namespace cuflight::report {
namespace {

constexpr size_t kMinNameWidth = 16;
// Longest api_error message quoted in a process's ending line (the driver's are one sentence).
constexpr size_t kMaxMessageBytes = 1000;


std::string Events(uint64_t n) { return fmt::format("{} event{}", n, n == 1 ? "" : "s"); }

// What the log knows of the events a lost process sent: stored, missing before the last stored
// seq (exact: the seqs the collector saw), and after it (unknown: the process was gone before
// saying). `closed`: a process_crash ended the stream, sent after every event before it.
std::string LossText(const schema::OwnedProcessLostEvent& lost, bool closed) {
  if (!lost.last_seq)
    return closed ? "" : "; nothing stored: whether it recorded anything is unknown";
  std::string out = fmt::format(
      "; {} stored up to seq {}, {} before it", Events(lost.events_stored), *lost.last_seq,
      lost.events_lost == 0 ? std::string("none missing")
                            : fmt::format("{} missing", lost.events_lost));
  if (!closed) out += fmt::format("; whether it sent more after seq {} is unknown", *lost.last_seq);
  return out;
}

std::string Seconds(int64_t ms) { return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000); }

}  // namespace

std::optional<uint64_t> SeqOfStalledLaunch(const ProcessSummary& p, int32_t device,
                                           uint64_t stream, uint64_t correlation_id) {
  std::optional<uint64_t> seq;
  for (const StreamTail& tail : p.streams) {
    if (tail.device != device || tail.stream != stream) continue;
    // A graph's kernel nodes share their launch's correlation id: the latest of them.
    for (const LaunchSummary& l : tail.last) {
      if (l.correlation_id == correlation_id) seq = l.seq;
    }
  }
  return seq;
}

namespace {

// What the latest stall event of `p` says was stalled: per stream, its oldest unfinished
// launches (the first is what the stream waits on, the others are queued behind it), each by
// its correlation id and, when the stream's last launches hold it, its seq.
std::string RenderStall(const ProcessSummary& p, bool color, int width) {
  const StallSummary& s = *p.stall;
  const schema::OwnedStallEvent& e = s.latest;
  std::string out =
      Paint(fmt::format(
                "    {} ({} into the stall, {} stream{} stalled{}):",
                s.ongoing ? "stalled now, as last reported" : "the last stall, before it resolved",
                Seconds(e.stalled_ms), e.streams_stalled, e.streams_stalled == 1 ? "" : "s",
                e.streams.size() < static_cast<size_t>(e.streams_stalled)
                    ? fmt::format(", {} listed", e.streams.size())
                    : std::string()),
            s.ongoing ? ansi::kRed : ansi::kYellow, color);
  out += '\n';
  for (const schema::OwnedStallStream& stream : e.streams) {
    out += fmt::format("    device {}, stream {}: waiting {}, {} unfinished", stream.device,
                       FormatStreamId(stream.stream), Seconds(stream.waiting_ms), stream.unfinished);
    if (stream.launches.empty()) {
      out += '\n';
      continue;
    }
    out += ", the oldest:\n";
    TextTable table({{"CORR", TextTable::Align::kRight},
                       {"SEQ", TextTable::Align::kRight},
                       {"AGE", TextTable::Align::kRight},
                       {"GRID", TextTable::Align::kRight},
                       {"BLOCK", TextTable::Align::kRight},
                       {"OCC", TextTable::Align::kRight},
                       {"KERNEL", TextTable::Align::kLeft}});
    for (const schema::OwnedStallLaunch& l : stream.launches) {
      const std::string& name = l.demangled.empty() ? l.name : l.demangled;
      const std::optional<uint64_t> seq =
          SeqOfStalledLaunch(p, stream.device, stream.stream, l.correlation_id);
      table.AddRow({{fmt::format("{}", l.correlation_id), ""},
                    {seq ? fmt::format("{}", *seq) : "-", seq ? "" : ansi::kDim},
                    {Seconds(l.age_ms), ""},
                    {FormatDim3(l.grid), ""},
                    {FormatDim3(l.block), ""},
                    {FormatPercent(l.occupancy), ""},
                    {name.empty() ? std::string("(name not kept)") : name, ""}});
    }
    table.ShortenLastColumn(table.LastColumnRoom(static_cast<size_t>(width), 6, kMinNameWidth),
                            ShortenKernelNames);
    out += table.Render(6, color);
  }
  return out;
}

}  // namespace

Completion CompletionOf(const CompletionEvidence& e, uint64_t launch_seq, bool timed,
                        std::optional<bool> timing_window) {
  if (timed) return Completion::kFinished;
  const bool time_expected =
      timing_window ? *timing_window : e.timing == TimingPolicy::kAll;
  if (!time_expected || e.timing_dropped > 0) return Completion::kUnknown;
  if (e.ended) return Completion::kNotFinished;
  if (e.sticky_error_seq && launch_seq < *e.sticky_error_seq && e.last_kernel_time_seq &&
      *e.last_kernel_time_seq > *e.sticky_error_seq) {
    return Completion::kNotFinished;
  }
  return Completion::kUnknown;
}

// Longest kernel name quoted in a process's ending line.
constexpr size_t kMaxKernelNameBytes = 80;

// What a process's stalls were, in one phrase: the one going on ("kernels unfinished for 42.0 s:
// device 0 stream 14 waits on spin(int volatile*) (corr 17); 2 streams stalled, nothing
// finished since the stall began"), or a count and the longest ("stalled 2 times, the longest
// 42.0 s, resolved").
std::string StallText(const StallSummary& s) {
  if (!s.ongoing) {
    return fmt::format("stalled {} time{}, the longest {}, resolved", s.stalls,
                       s.stalls == 1 ? "" : "s", Seconds(s.longest_ms));
  }
  const schema::OwnedStallEvent& e = s.latest;
  std::string text = fmt::format("kernels unfinished for {}", Seconds(e.stalled_ms));
  if (!e.streams.empty()) {
    const schema::OwnedStallStream& first = e.streams.front();
    text += fmt::format(": device {} stream {} waits on ", first.device,
                        FormatStreamId(first.stream));
    if (first.launches.empty()) {
      text += "launches not listed";
    } else {
      const schema::OwnedStallLaunch& l = first.launches.front();
      const std::string& name = l.demangled.empty() ? l.name : l.demangled;
      text += fmt::format("{} (corr {})",
                          name.empty() ? "a kernel not named" : Clip(name, kMaxKernelNameBytes),
                          l.correlation_id);
    }
  }
  text += fmt::format(
      "; {} stream{} stalled, {}", e.streams_stalled, e.streams_stalled == 1 ? "" : "s",
      e.completed == 0 ? std::string("nothing finished since the last report")
                       : fmt::format("{} kernels finished since the last report", e.completed));
  return text;
}

void DescribeEnding(bool api_error_last, ProcessSummary* s) {
  s->last_call_failed = api_error_last && s->last_api_error.has_value();
  std::string error_line;
  if (s->last_api_error) {
    const schema::OwnedApiErrorEvent& e = *s->last_api_error;
    error_line = fmt::format("{} returned {} ({})", e.api, e.error_name, e.code);
    if (!e.message.empty()) error_line += ": " + Clip(e.message, kMaxMessageBytes);
  }
  const std::string failed_call =
      api_error_last ? "; its last CUDA call failed: " + error_line : "";
  if (s->crash) {
    const schema::OwnedProcessCrashEvent& e = *s->crash;
    s->ending = Ending::kCrash;
    s->ending_detail =
        fmt::format("crash: {} (signal {}, code {}) in thread {}",
                    e.signal_name.empty() ? "signal" : e.signal_name, e.signal, e.code, e.tid);
    if (e.addr != 0) s->ending_detail += fmt::format(" at {:#x}", e.addr);
    if (e.app_handler) s->ending_detail += "; the application's own handler ran first and gave up";
    s->ending_detail += failed_call;
    if (s->lost) s->ending_detail += LossText(*s->lost, /*closed=*/true);
    if (e.dropped > 0)
      s->ending_detail += fmt::format("; {} dropped in the process", Events(e.dropped));
  } else if (s->lost) {
    const schema::OwnedProcessLostEvent& e = *s->lost;
    s->ending = Ending::kLost;
    s->ending_detail =
        e.reason == schema::LostReason::kCollectorShutdown
            ? "lost: the collector stopped while the process was connected"
            : "lost: the connection ended without process_end (killed, or no exit flush)";
    s->ending_detail += LossText(e, /*closed=*/false);
    if (s->dropped > 0) {
      s->ending_detail +=
          fmt::format("; {} dropped in the process by its last stats", Events(s->dropped));
    }
    s->ending_detail += failed_call;
  } else if (api_error_last) {
    s->ending = Ending::kApiError;
    s->ending_detail = "api_error: " + error_line;
    if (s->end && s->end->exit_code) {
      s->ending_detail += fmt::format("; exit code {}", *s->end->exit_code);
    }
  } else if (s->end) {
    s->ending = Ending::kEnded;
    s->ending_detail = s->end->exit_code ? fmt::format("ended: exit code {}", *s->end->exit_code)
                                         : std::string("ended");
  } else if (s->stall && s->stall->ongoing) {
    s->ending = Ending::kStalled;
    s->ending_detail = "stalled: " + StallText(*s->stall);
    return;
  } else {
    s->ending = Ending::kRunning;
    s->ending_detail = "no process_end (still running, or the log is cut)";
  }
  if (s->stall) s->ending_detail += "; " + StallText(*s->stall);
}

std::string FinishedText(const LaunchSummary& l) {
  switch (l.completion) {
    case Completion::kFinished:
      return "yes " + FormatDuration(l.duration_ns.value_or(0));
    case Completion::kNotFinished:
      return l.in_error ? "NO (failed)" : "NO";
    case Completion::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string_view EndingName(Ending ending) {
  switch (ending) {
    case Ending::kEnded:
      return "ended";
    case Ending::kRunning:
      return "running";
    case Ending::kLost:
      return "lost";
    case Ending::kApiError:
      return "api_error";
    case Ending::kCrash:
      return "crash";
    case Ending::kStalled:
      return "stalled";
  }
  return "unknown";
}

bool NeedsReview(Ending ending) {
  return ending == Ending::kLost || ending == Ending::kApiError || ending == Ending::kCrash ||
         ending == Ending::kStalled;
}

std::vector<size_t> SelectForReview(const std::vector<ProcessSummary>& processes) {
  std::vector<size_t> stalled;
  std::vector<size_t> others;
  for (size_t i = 0; i < processes.size(); ++i) {
    const ProcessSummary& p = processes[i];
    if (p.stall && p.stall->ongoing) {
      stalled.push_back(i);
    } else if (NeedsReview(p.ending) || p.stall) {
      others.push_back(i);
    }
  }
  stalled.insert(stalled.end(), others.begin(), others.end());
  return stalled;
}

std::optional<int64_t> FailedAt(const ProcessSummary& p) {
  switch (p.ending) {
    case Ending::kApiError:
      return p.last_api_error->header.ts_ns;
    case Ending::kCrash:
      return p.crash->header.ts_ns;
    case Ending::kLost:
      return p.lost->header.ts_ns;
    case Ending::kStalled: {
      const schema::OwnedStallEvent& e = p.stall->latest;
      return e.header.ts_ns - e.stalled_ms * 1000000;
    }
    case Ending::kEnded:
      if (p.end && p.end->exit_code && *p.end->exit_code != 0) return p.end->header.ts_ns;
      return std::nullopt;
    case Ending::kRunning:
      return std::nullopt;
  }
  return std::nullopt;
}

bool IsLaunchCall(std::string_view api) {
  for (const std::string_view suffix : {std::string_view("_ptsz"), std::string_view("_ptds")}) {
    if (api.ends_with(suffix)) api.remove_suffix(suffix.size());
  }
  for (const std::string_view launch :
       {"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
        "cuLaunchCooperativeKernelMultiDevice", "cuLaunch", "cuLaunchGrid", "cuLaunchGridAsync",
        "cuGraphLaunch"}) {
    if (api == launch) return true;
  }
  return false;
}

std::string CompactList(std::vector<int64_t> numbers) {
  std::sort(numbers.begin(), numbers.end());
  numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
  std::string out;
  for (size_t i = 0; i < numbers.size();) {
    size_t j = i;
    while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", numbers[i]) : fmt::format("{}-{}", numbers[i], numbers[j]);
    i = j + 1;
  }
  return out;
}

namespace {

std::string KernelOf(const std::string& name) {
  return name.empty() ? std::string("a kernel not named") : ShortenKernelName(name, 80);
}

// What a process's review says, without what differs between processes that failed alike; and
// the key that groups them (the same, with whole kernel names).
std::pair<std::string, std::string> SaysAndKey(const ProcessSummary& p) {
  std::string says(EndingName(p.ending));
  std::string key = says;
  auto add = [&](const std::string& shown, const std::string& whole) {
    says += shown;
    key += whole;
  };
  if (p.crash) {
    const schema::OwnedProcessCrashEvent& e = *p.crash;
    std::string text = fmt::format(": {} (signal {}, code {})",
                                   e.signal_name.empty() ? "signal" : e.signal_name, e.signal,
                                   e.code);
    if (e.addr != 0) text += fmt::format(" at {:#x}", e.addr);
    if (e.app_handler) text += "; the application's own handler ran first and gave up";
    add(text, text);
  } else if (p.lost) {
    const std::string text = p.lost->reason == schema::LostReason::kCollectorShutdown
                                 ? ": the collector stopped while the process was connected"
                                 : ": the connection ended without process_end (killed, or no "
                                   "exit flush)";
    add(text, text);
  } else if (p.ending == Ending::kEnded && p.end && p.end->exit_code) {
    add(fmt::format(": exit code {}", *p.end->exit_code),
        fmt::format(": exit code {}", *p.end->exit_code));
  }
  if (p.last_api_error && p.last_call_failed) {
    const schema::OwnedApiErrorEvent& e = *p.last_api_error;
    std::string text = fmt::format("{} {} returned {} ({})",
                                   p.ending == Ending::kApiError ? ":" : "; its last CUDA call failed:",
                                   e.api, e.error_name, e.code);
    if (!e.message.empty()) text += ": " + Clip(e.message, kMaxMessageBytes);
    add(text, text);
  }
  // The kernels a sticky error stopped.
  std::vector<const LaunchSummary*> failed;
  for (const StreamTail& s : p.streams) {
    for (const LaunchSummary& l : s.last) {
      if (l.in_error) failed.push_back(&l);
    }
  }
  if (!failed.empty()) {
    says += "; it stopped ";
    key += "; stopped";
    for (size_t i = 0; i < failed.size(); ++i) {
      says += (i > 0 ? ", " : "") + KernelOf(failed[i]->name);
      key += "\n" + failed[i]->name;
    }
  }
  if (p.stall) {
    if (p.stall->ongoing) {
      std::string name;
      const schema::OwnedStallEvent& e = p.stall->latest;
      if (!e.streams.empty() && !e.streams.front().launches.empty()) {
        const schema::OwnedStallLaunch& l = e.streams.front().launches.front();
        name = l.demangled.empty() ? l.name : l.demangled;
      }
      add(fmt::format("; stalled, waiting on {}", KernelOf(name)), "; stalled on\n" + name);
    } else {
      add("; it had a stall that resolved", "; stall resolved");
    }
  }
  return {says, key};
}

}  // namespace

std::vector<ReviewGroup> GroupReview(const std::vector<ProcessSummary>& processes,
                                     const std::vector<size_t>& review) {
  // Members by failure (unknown last), then review order.
  std::vector<size_t> order(review.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<std::optional<int64_t>> failed(review.size());
  for (size_t i = 0; i < review.size(); ++i) failed[i] = FailedAt(processes[review[i]]);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (failed[a].has_value() != failed[b].has_value()) return failed[a].has_value();
    return failed[a] && *failed[a] < *failed[b];
  });
  std::vector<ReviewGroup> groups;
  std::map<std::string, size_t> by_key;
  for (const size_t i : order) {
    auto [says, key] = SaysAndKey(processes[review[i]]);
    const auto [it, added] = by_key.try_emplace(std::move(key), groups.size());
    if (added) groups.push_back(ReviewGroup{{}, std::move(says)});
    groups[it->second].processes.push_back(review[i]);
  }
  return groups;
}

namespace {

// One reviewed process in full: its ending line, its stall, and per stream its last launches.
std::string RenderProcessText(const ProcessSummary& p, const ReviewTextOptions& o) {
  const bool color = o.color;
  const auto width = static_cast<size_t>(o.width);
  std::string out;
  std::string who = ProcessName(p);
  if (!p.hostname.empty()) who += " on " + p.hostname;
  // The one line that says what happened: wrapped, never cut.
  for (const std::string& line :
       WrapWords(fmt::format("{}: {}", who, p.ending_detail), width, "  ", "      ")) {
    out += Paint(line, ansi::kBold, color);
    out += '\n';
  }
  if (p.stall && p.stall->stalls > 0) out += RenderStall(p, color, o.width);
  if (p.streams.empty()) return out + "    no kernel launch stored\n";
  bool unknown = false;
  for (const StreamTail& s : p.streams) {
    out += fmt::format("    device {}, stream {}: {} launch{}", s.device, FormatStreamId(s.stream),
                       s.launches, s.launches == 1 ? "" : "es");
    if (s.last.empty()) {
      out += '\n';
      continue;
    }
    out += s.last.size() < s.launches ? fmt::format(", the last {}:\n", s.last.size()) : ":\n";
    // SEQ orders the process's events; CORR is what CUPTI, a stall table and Nsight Systems
    // name a launch by.
    TextTable table({{"SEQ", TextTable::Align::kRight},
                     {"CORR", TextTable::Align::kRight},
                     {"GRID", TextTable::Align::kRight},
                     {"BLOCK", TextTable::Align::kRight},
                     {"OCC", TextTable::Align::kRight},
                     {"FINISHED", TextTable::Align::kLeft},
                     {"KERNEL", TextTable::Align::kLeft}});
    for (const LaunchSummary& l : s.last) {
      const std::string_view style = l.completion == Completion::kFinished  ? std::string_view()
                                     : l.completion == Completion::kUnknown ? ansi::kDim
                                     : l.in_error                           ? ansi::kRed
                                                                            : ansi::kYellow;
      unknown = unknown || l.completion == Completion::kUnknown;
      table.AddRow({{fmt::format("{}", l.seq), ""},
                    {fmt::format("{}", l.correlation_id), ""},
                    {FormatDim3(l.grid), ""},
                    {FormatDim3(l.block), ""},
                    {FormatPercent(l.occupancy), ""},
                    {FinishedText(l), style},
                    {l.name, ""}});
    }
    if (o.name_width != 0) {
      table.ShortenLastColumn(o.name_width > 0 ? static_cast<size_t>(o.name_width)
                                               : table.LastColumnRoom(width, 6, kMinNameWidth),
                              ShortenKernelNames);
    }
    out += table.Render(6, color);
  }
  if (unknown) {
    for (const std::string& line :
         WrapWords("unknown: no kernel_time, and the log cannot tell whether it finished "
                   "(timing is not flushed from a crash or a kill, records were lost, or timing "
                   "was sampled or off)",
                   width, "      ", "      ")) {
      out += Paint(line, ansi::kDim, color);
      out += '\n';
    }
  }
  return out;
}

}  // namespace

std::string RenderReviewText(const Report& r, const ReviewTextOptions& o) {
  if (r.review.empty()) return "";
  std::string out =
      Paint(fmt::format("Processes that did not end normally or stalled ({})", r.review.size()),
            ansi::kRed, o.color);
  out += '\n';
  const bool grouped = !o.per_process && r.review_groups.size() < r.review.size();
  if (grouped) {
    for (const std::string& line :
         WrapWords("processes whose reviews say the same are one block, the first to fail in "
                   "full (--per-process: each one; --pid PID: one)",
                   static_cast<size_t>(o.width), "  ", "    ")) {
      out += Paint(line, ansi::kDim, o.color);
      out += '\n';
    }
  }
  for (const ReviewGroup& g : r.review_groups) {
    if (!grouped) {
      for (const size_t i : g.processes) out += RenderProcessText(r.processes[i], o);
      continue;
    }
    out += RenderProcessText(r.processes[g.processes.front()], o);
    if (g.processes.size() < 2) continue;
    std::vector<int64_t> pids;
    for (size_t k = 1; k < g.processes.size(); ++k) pids.push_back(r.processes[g.processes[k]].key.pid);
    for (const std::string& line :
         WrapWords(fmt::format("\u00d7 {} more, the same: pid{} {}", g.processes.size() - 1,
                               pids.size() == 1 ? "" : "s", CompactList(pids)),
                   static_cast<size_t>(o.width), "  ", "    ")) {
      out += Paint(line, ansi::kBold, o.color);
      out += '\n';
    }
  }
  return out;
}

}  // namespace cuflight::report
