#include "cuflight/report/review.h"

#include <fmt/format.h>

#include "cuflight/report/text_format.h"
#include "text_table.h"

namespace cuflight::report {
namespace {

constexpr size_t kMinNameWidth = 16;

std::string StreamName(uint64_t stream) {
  return stream == 0 ? std::string("0 (legacy default)") : fmt::format("{:#x}", stream);
}

std::string Seconds(int64_t ms) { return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000); }

// What the latest stall event of `s` says was stalled: per stream, its oldest unfinished
// launches (the first is what the stream waits on, the others are queued behind it).
std::string RenderStall(const StallSummary& s, bool color, int width) {
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
                       StreamName(stream.stream), Seconds(stream.waiting_ms), stream.unfinished);
    if (stream.launches.empty()) {
      out += '\n';
      continue;
    }
    out += ", the oldest:\n";
    ReportTable table({{"CORR", ReportTable::Align::kRight},
                       {"AGE", ReportTable::Align::kRight},
                       {"GRID", ReportTable::Align::kRight},
                       {"BLOCK", ReportTable::Align::kRight},
                       {"OCC", ReportTable::Align::kRight},
                       {"KERNEL", ReportTable::Align::kLeft}});
    for (const schema::OwnedStallLaunch& l : stream.launches) {
      const std::string& name = l.demangled.empty() ? l.name : l.demangled;
      table.AddRow({{fmt::format("{}", l.correlation_id), ""},
                    {Seconds(l.age_ms), ""},
                    {FormatDim3(l.grid), ""},
                    {FormatDim3(l.block), ""},
                    {FormatPercent(l.occupancy), ""},
                    {name.empty() ? std::string("(name not kept)") : name, ""}});
    }
    table.FitLastColumn(
        static_cast<size_t>(width), 6, kMinNameWidth,
        [](std::string_view name, size_t room) { return ShortenKernelName(name, room); });
    out += table.Render(6, color);
  }
  return out;
}

}  // namespace

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

std::string RenderReviewText(const std::vector<ProcessSummary>& processes,
                             const std::vector<size_t>& review, bool color, int width) {
  if (review.empty()) return "";
  std::string out =
      Paint(fmt::format("Processes that did not end normally or stalled ({})", review.size()),
            ansi::kRed, color);
  out += '\n';
  for (const size_t index : review) {
    const ProcessSummary& p = processes[index];
    std::string who = fmt::format("pid {}", p.key.pid);
    if (!p.exe.empty()) {
      const size_t slash = p.exe.rfind('/');
      who += " " + (slash == std::string::npos ? p.exe : p.exe.substr(slash + 1));
    }
    if (!p.hostname.empty()) who += " on " + p.hostname;
    std::string line = fmt::format("  {}: {}", who, p.ending_detail);
    if (line.size() > static_cast<size_t>(width)) {
      line = line.substr(0, static_cast<size_t>(width) - 3) + "...";
    }
    out += Paint(line, ansi::kBold, color);
    out += '\n';
    if (p.stall && p.stall->stalls > 0) out += RenderStall(*p.stall, color, width);
    if (p.streams.empty()) {
      out += "    no kernel launched\n";
      continue;
    }
    for (const StreamTail& s : p.streams) {
      out += fmt::format("    device {}, stream {}: {} launch{}", s.device, StreamName(s.stream),
                         s.launches, s.launches == 1 ? "" : "es");
      if (s.last.empty()) {
        out += '\n';
        continue;
      }
      out += s.last.size() < s.launches ? fmt::format(", the last {}:\n", s.last.size()) : ":\n";
      ReportTable table({{"SEQ", ReportTable::Align::kRight},
                         {"GRID", ReportTable::Align::kRight},
                         {"BLOCK", ReportTable::Align::kRight},
                         {"OCC", ReportTable::Align::kRight},
                         {"FINISHED", ReportTable::Align::kLeft},
                         {"KERNEL", ReportTable::Align::kLeft}});
      for (const LaunchSummary& l : s.last) {
        ReportTable::Cell finished =
            l.duration_ns ? ReportTable::Cell{"yes " + FormatDuration(*l.duration_ns), ""}
                          : ReportTable::Cell{"NO", ansi::kYellow};
        if (l.in_error) {
          finished.text += " (failed call)";
          finished.style = ansi::kRed;
        }
        table.AddRow({{fmt::format("{}", l.seq), ""},
                      {FormatDim3(l.grid), ""},
                      {FormatDim3(l.block), ""},
                      {FormatPercent(l.occupancy), ""},
                      finished,
                      {l.name, ""}});
      }
      table.FitLastColumn(static_cast<size_t>(width), 6, kMinNameWidth,
                          [](std::string_view name, size_t room) {
                            return ShortenKernelName(name, room);
                          });
      out += table.Render(6, color);
    }
  }
  return out;
}

}  // namespace cuflight::report
