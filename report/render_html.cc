// The HTML page of the report: sections and tables here, charts in html_charts.cc.
#include "cuflight/report/render_html.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cuflight/logread/log_reader.h"
#include "cuflight/logread/progress_line.h"
#include "cuflight/report/build_report.h"
#include "cuflight/report/findings.h"
#include "cuflight/report/kernel_names.h"
#include "cuflight/report/render.h"
#include "cuflight/report/job_view.h"
#include "cuflight/report/review.h"
#include "cuflight/report/run_report.h"
#include "cuflight/report/text_format.h"
#include "html_charts.h"
#include "html_text.h"

namespace cuflight::report {
namespace {

using html::Escape;
using html::FormatCount;
using html::FormatUtc;

// Width the timeline is drawn at, in px (html_charts.cc: 1200 minus the label column).
constexpr int kTimelinePlotPx = 930;

constexpr std::string_view kStyle = R"css(
:root{--fg:#1b1b1b;--muted:#5f6368;--line:#d9d9d9;--band:#f4f4f4;--bad:#D55E00}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);margin:0;padding:20px 28px;background:#fff}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:14px 0 6px}
.meta,.muted,.note{color:var(--muted)}
nav a{margin-right:14px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:150px}
.card b{display:block;font-size:20px}
.charts{display:flex;flex-wrap:wrap;gap:20px}
figure{margin:0}
figcaption{font-weight:600;margin:6px 0}
svg.chart{max-width:100%;height:auto;font-size:12px;font-family:inherit}
svg .grid{stroke:#e6e6e6;stroke-width:1}
svg .axis{stroke:#777;stroke-width:1}
svg .tick,svg .legend,svg .lane{fill:#444}
svg .axis-title{fill:var(--muted)}
svg .value{fill:#222}
svg .label{fill:#222}
svg .name-legend{fill:#444;font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:11px}
svg .track{fill:#eeeeee}
svg .laneband{fill:var(--band)}
svg .phead{font-weight:600;fill:#222}
svg .failed .phead{fill:var(--bad)}
svg .k.untimed{stroke:#000;stroke-width:.6}
svg .k.bin.untimed{stroke:none;opacity:.6}
svg .marker line{stroke:#000;stroke-width:1.5;stroke-dasharray:4 2}
svg .mlabel{font-weight:600;fill:#000}
svg .bar:hover,svg .k:hover,svg .row:hover .bar{opacity:.75}
table{border-collapse:collapse;margin:6px 0 12px}
th,td{padding:3px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{text-align:left;background:#fafafa;position:sticky;top:0}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td.n,.card b,.v,td.time{white-space:nowrap}
.wide{max-width:100%;overflow-x:auto}
tr.detail td{border-bottom:1px solid var(--line);font-size:13px;padding-top:0}
tbody.proc-row tr:first-child td{border-bottom:none}
#findings ul{margin:4px 0 8px;padding-left:20px}
#findings li{margin:4px 0}
#findings .where,#findings .more{color:var(--muted)}
details.more-procs>summary{cursor:pointer;font-weight:600;margin:6px 0}
td.name{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:12.5px;
word-break:break-all;max-width:620px}
td.path{overflow-wrap:anywhere;min-width:14em;max-width:420px}
td.time{white-space:nowrap}
table.sortable th{cursor:pointer}
tr.advice td{color:#0b5394;border-bottom:1px solid var(--line);font-size:13px}
tbody.sig tr:first-child td{border-bottom:none}
.bad{color:var(--bad);font-weight:600}
.warn{color:#9a5b00}
.est{font-style:italic}
.ending{display:inline-block;padding:0 6px;border-radius:4px;background:#fbe3d6;color:#8a3200;
font-weight:600}
.proc{border-left:4px solid var(--bad);padding:2px 0 2px 12px;margin:12px 0}
.stalled{display:inline-block;padding:0 6px;border-radius:4px;background:#D55E00;color:#fff;
font-weight:600}
.proc.stall{border-left-color:#000}
code{font-family:ui-monospace,Menlo,Consolas,monospace}
details{margin:6px 0}
)css";

// Sorts a table.sortable by the clicked column: each <tbody> is one entry (a signature and its
// advice row stay together), compared by the cells' data-v (numbers when both parse).
constexpr std::string_view kScript = R"js(
(function () {
  var tables = document.querySelectorAll('table.sortable');
  Array.prototype.forEach.call(tables, function (table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, col) {
      th.title = 'Sort by this column';
      th.addEventListener('click', function () {
        var asc = th.getAttribute('aria-sort') !== 'ascending';
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
        var bodies = Array.prototype.slice.call(table.tBodies);
        function key(body) {
          var cell = body.rows[0] && body.rows[0].cells[col];
          if (!cell) return '';
          var v = cell.getAttribute('data-v');
          return v === null ? cell.textContent : v;
        }
        bodies.sort(function (a, b) {
          var x = key(a), y = key(b);
          var nx = parseFloat(x), ny = parseFloat(y);
          var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
          return asc ? c : -c;
        });
        bodies.forEach(function (b) { table.appendChild(b); });
      });
    });
  });
})();
)js";

// Plural (text_format.h) with the count grouped: "1,234 files".
std::string GroupedPlural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", FormatCount(n), PluralWord(static_cast<int64_t>(n), one, many));
}

// A numeric cell: shown text, sort value.
std::string Num(std::string_view text, double sort_value, std::string_view cls = "n") {
  return fmt::format("<td class=\"{}\" data-v=\"{}\">{}</td>", cls, sort_value, Escape(text));
}

std::string Cell(std::string_view text, std::string_view cls = "") {
  if (cls.empty()) return fmt::format("<td>{}</td>", Escape(text));
  return fmt::format("<td class=\"{}\">{}</td>", cls, Escape(text));
}

std::string Header(const Report& r, const HtmlOptions& h) {
  int64_t first = 0;
  int64_t last = 0;
  std::set<std::string> hosts;
  for (const ProcessSummary& p : r.processes) {
    if (p.events == 0) continue;
    if (first == 0 || p.first_ts_ns < first) first = p.first_ts_ns;
    last = std::max(last, p.last_ts_ns);
    if (!p.hostname.empty()) hosts.insert(p.hostname);
  }
  std::string host_list;
  for (const std::string& host : hosts) {
    if (!host_list.empty()) host_list += ", ";
    host_list += host;
  }
  std::string out = fmt::format("<header>\n<h1>{}</h1>\n<p class=\"meta\">", Escape(h.title));
  out += fmt::format("<span class=\"span\">{}</span>", Escape(html::FormatUtcSpan(first, last)));
  out += fmt::format(" &middot; {}: {}", hosts.size() == 1 ? "host" : "hosts",
                     hosts.empty() ? std::string("unknown") : Escape(host_list));
  out += "</p>\n</header>\n";
  out += "<nav><a href=\"#findings\">Findings</a><a href=\"#summary\">Summary</a>";
  if (!r.jobs.empty()) out += "<a href=\"#jobs\">Jobs</a>";
  out += "<a href=\"#review\">Review</a>"
         "<a href=\"#charts\">Charts</a><a href=\"#timeline\">Timeline</a>"
         "<a href=\"#kernels\">Kernels</a><a href=\"#processes\">Processes</a>"
         "<a href=\"#logs\">Logs read</a></nav>\n";
  return out;
}

std::string Summary(const Report& r) {
  uint64_t gpu_ns = 0;
  for (const Signature& s : r.signatures) gpu_ns += s.gpu_time ? s.gpu_time->total_ns : 0;
  const logread::ReadSummary& s = r.read;
  std::string out = "<section id=\"summary\">\n<h2>Summary</h2>\n<div class=\"cards\">\n";
  auto card = [&](std::string_view label, const std::string& value, std::string_view cls = "") {
    out += fmt::format("<div class=\"card\"><b{}>{}</b>{}</div>\n",
                       cls.empty() ? std::string() : fmt::format(" class=\"{}\"", cls),
                       Escape(value), Escape(label));
  };
  card("processes", FormatCount(r.processes.size()));
  size_t stalled = 0;
  for (const ProcessSummary& p : r.processes) stalled += p.stall && p.stall->ongoing ? 1 : 0;
  if (stalled > 0) card("stalled at the end of the log", FormatCount(stalled), "bad");
  card("did not end normally or stalled", FormatCount(r.review.size()),
       r.review.empty() ? "" : "bad");
  card("kernel launches", FormatCount(r.launches));
  card("timed launches", FormatCount(r.timed_launches));
  card("kernel signatures", FormatCount(r.signatures.size()));
  if (r.sampled_launches > 0) {
    // Sampled timing: what was measured, and apart from it what it suggests, labelled so.
    const GpuTimeTotals t = TotalGpuTime(r);
    card("measured GPU time (timed launches)",
         r.timed_launches > 0 ? FormatDuration(t.measured_ns) : std::string("-"));
    card(fmt::format("estimated GPU time, an estimate: {} of launches under sampled timing timed{}",
                     FormatShare(static_cast<double>(r.sampled_timed) /
                                 static_cast<double>(r.sampled_launches)),
                     t.unknown_signatures > 0 ? "; a lower bound" : ""),
         "~" + FormatDuration(t.estimate_ns.value_or(0)), "est");
  } else {
    card("total GPU time", r.timed_launches > 0 ? FormatDuration(gpu_ns) : std::string("-"));
  }
  out += "</div>\n";
  std::string read = fmt::format("Read {}", GroupedPlural(s.files, "file", "files"));
  if (s.compressed_files > 0) read += fmt::format(" ({} zstd)", FormatCount(s.compressed_files));
  read += fmt::format(", {}, {}", GroupedPlural(s.lines, "line", "lines"),
                      GroupedPlural(s.events, "event", "events"));
  out += fmt::format("<p>{}; <span class=\"{}\">{} torn, {} rejected</span>", Escape(read),
                     s.torn_lines + s.rejected_lines > 0 ? "warn" : "muted",
                     FormatCount(s.torn_lines), FormatCount(s.rejected_lines));
  if (s.unknown_type_lines > 0) {
    out += fmt::format(", {} of event types this cuflight does not know (skipped)",
                       GroupedPlural(s.unknown_type_lines, "line", "lines"));
  }
  out += ". <a href=\"#logs\">Details</a></p>\n";
  for (const ProcessSummary& p : r.processes) {
    if (const std::string note = TimingStoppedNote(p); !note.empty()) {
      out += fmt::format("<p class=\"note warn\">{}.</p>\n", Escape(note));
    }
  }
  if (r.sampled_launches > 0) {
    size_t sampled = 0;
    for (const ProcessSummary& p : r.processes) {
      sampled += p.timing_policy == TimingPolicy::kSampled ? 1 : 0;
    }
    out += fmt::format(
        "<p class=\"note\" id=\"timing-sampled\">Kernel timing was sampled "
        "(CUFLIGHT_TIMING=sampled) in {} of {}: {} of {} launches under it were timed. MEASURED "
        "is the GPU time of the timed launches; EST is an estimate, not a measurement: MEASURED "
        "x launches / timed launches.</p>\n",
        FormatCount(sampled), GroupedPlural(r.processes.size(), "process", "processes"),
        FormatCount(r.sampled_timed), FormatCount(r.sampled_launches));
  }
  if (r.launches > 0 && r.timed_launches == 0) {
    out += "<p class=\"note\">No launch was timed (no kernel_time event joined): GPU times are "
           "unavailable, and the charts weigh kernels by launches.</p>\n";
  } else if (r.timed_launches > 0 && r.timed_launches < r.launches) {
    out += fmt::format("<p class=\"note\">{} of {} launches were timed; the charts weigh kernels "
                       "by the GPU time of the timed ones.</p>\n",
                       FormatCount(r.timed_launches), FormatCount(r.launches));
  }
  out += "</section>\n";
  return out;
}

std::string Seconds(int64_t ms) { return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000); }

// A value that must not break across lines ("12.0 s", "48 KiB") inside running text.
std::string Value(std::string_view text) {
  return fmt::format("<span class=\"v\">{}</span>", Escape(text));
}

// What the latest stall event of `p` says was stalled: per stream, the oldest unfinished
// launches, by correlation id and, when the stream's last launches hold it, seq (the launch
// tables' key).
std::string StallTables(const ProcessSummary& p) {
  const StallSummary& s = *p.stall;
  const schema::OwnedStallEvent& e = s.latest;
  std::string out = fmt::format(
      "<p class=\"{}\">{}: {} into the stall, {} stalled{}; {}.</p>\n", s.ongoing ? "bad" : "warn",
      s.ongoing ? "Stalled now, as last reported" : "The last stall, before it resolved",
      Value(Seconds(e.stalled_ms)),
      GroupedPlural(static_cast<uint64_t>(e.streams_stalled), "stream", "streams"),
      e.streams.size() < static_cast<size_t>(e.streams_stalled)
          ? fmt::format(" ({} listed)", e.streams.size())
          : std::string(),
      e.completed == 0
          ? std::string("nothing finished since the report before")
          : GroupedPlural(e.completed, "kernel", "kernels") + " finished since the report before");
  for (const schema::OwnedStallStream& stream : e.streams) {
    out += fmt::format("<p>Device {}, stream {}: waiting {}, {} unfinished{}</p>\n", stream.device,
                       Escape(FormatStreamId(stream.stream)), Value(Seconds(stream.waiting_ms)),
                       FormatCount(static_cast<uint64_t>(stream.unfinished)),
                       stream.launches.empty() ? "."
                                               : ", the oldest (the first is what the stream "
                                                 "waits on):");
    if (stream.launches.empty()) continue;
    out +=
        "<div class=\"wide\"><table class=\"stall\"><thead><tr><th class=\"n\">CORR</th>"
        "<th class=\"n\" title=\"the launch's seq in the stream tables below\">SEQ</th>"
        "<th class=\"n\">AGE</th>"
        "<th class=\"n\">GRID</th><th class=\"n\">BLOCK</th><th class=\"n\">OCC</th>"
        "<th>KERNEL</th></tr></thead>\n<tbody>\n";
    for (const schema::OwnedStallLaunch& l : stream.launches) {
      const std::string& name = l.demangled.empty() ? l.name : l.demangled;
      const std::optional<uint64_t> seq =
          SeqOfStalledLaunch(p, stream.device, stream.stream, l.correlation_id);
      out += "<tr>" + Cell(fmt::format("{}", l.correlation_id), "n") +
             (seq ? Cell(fmt::format("{}", *seq), "n") : Cell("-", "n muted")) +
             Cell(Seconds(l.age_ms), "n") + Cell(FormatDim3(l.grid), "n") +
             Cell(FormatDim3(l.block), "n") + Cell(FormatPercent(l.occupancy), "n") +
             Cell(name.empty() ? std::string("(name not kept)") : name, "name") + "</tr>\n";
    }
    out += "</tbody></table></div>\n";
  }
  return out;
}

// Per job, its ranks: host, GPU, how each ended, in which order, the first to fail
// (job_view.h).
std::string Jobs(const Report& r) {
  if (r.jobs.empty()) return "";
  std::string out = "<section id=\"jobs\">\n<h2>Jobs</h2>\n";
  for (const JobView& job : r.jobs) {
    out += fmt::format("<div class=\"job\" id=\"job-{}\">\n<h3 class=\"{}\">{}</h3>\n",
                       Escape(job.job), job.first_failed ? "bad" : "",
                       Escape(JobHeadline(job, r.processes)));
    out += "<table class=\"sortable job-ranks\"><thead><tr><th class=\"n\">RANK</th>"
           "<th>HOST</th><th>GPU</th><th>POD</th><th class=\"n\">PID</th><th>ENDED</th>"
           "<th class=\"n\">ORDER</th><th>AT (UTC)</th><th>LAST KERNEL</th></tr></thead>\n";
    for (size_t i = 0; i < job.ranks.size(); ++i) {
      const RankRow& row = job.ranks[i];
      const ProcessSummary& p = r.processes[row.process];
      const bool first = job.first_failed && *job.first_failed == i;
      const std::optional<int64_t> at = row.ended_ns ? row.ended_ns : row.failed_ns;
      std::string last = "none launched";
      if (p.last_kernel) {
        last = p.last_kernel->name;
        if (p.last_kernel->completion == Completion::kNotFinished) last += " (not finished)";
      }
      std::string gpus;
      for (const std::string& g : row.gpus) gpus += (gpus.empty() ? "" : ", ") + g;
      out += fmt::format("<tbody><tr class=\"rank{}\">", first ? " first-failed" : "");
      out += row.rank ? Num(fmt::format("{}", *row.rank), *row.rank) : Num("?", 1e12, "n muted");
      out += Cell(row.host.empty() ? "?" : row.host);
      out += Cell(gpus.empty() ? "?" : gpus);
      out += Cell(row.pod.empty() ? "-" : row.pod);
      out += Num(fmt::format("{}", p.key.pid), p.key.pid);
      out += fmt::format("<td class=\"{}\" title=\"{}\">{}{}</td>",
                         row.ending == RankEnding::kFinished  ? ""
                         : row.ending == RankEnding::kRunning ? "muted"
                                                               : "bad",
                         Escape(p.ending_detail), Escape(RankEndingName(row.ending)),
                         first ? " (first to fail)" : "");
      out += row.end_order ? Num(fmt::format("{}", *row.end_order), *row.end_order)
                           : Num("-", 1e12, "n muted");
      out += Cell(at ? FormatClockMs(*at) + (row.ended_ns ? "" : " (since)") : "-");
      out += Cell(last, "name");
      out += "</tr></tbody>\n";
    }
    out += "</table>\n";
    if (!job.end_order.empty()) {
      std::string order;
      for (const size_t i : job.end_order) {
        const RankRow& row = job.ranks[i];
        order += fmt::format("{}{} ({})", order.empty() ? "" : ", ",
                             row.rank ? fmt::format("{}", *row.rank) : "?",
                             RankEndingName(row.ending));
      }
      out += fmt::format("<p>Ranks ended in this order (each host's clock): {}.</p>\n",
                         Escape(order));
    }
    if (!job.missing_ranks.empty()) {
      std::string missing;
      for (const int32_t m : job.missing_ranks) {
        missing += fmt::format("{}{}", missing.empty() ? "" : ", ", m);
      }
      out += fmt::format("<p class=\"warn\">Ranks of the world size with no process in these "
                         "logs: {}.</p>\n",
                         missing);
    }
    out += "</div>\n";
  }
  if (r.processes_without_job > 0) {
    out += fmt::format("<p class=\"muted\">{} without a job in its attribution.</p>\n",
                       GroupedPlural(r.processes_without_job, "process", "processes"));
  }
  out += "</section>\n";
  return out;
}

// One reviewed process in full: how it ended, its stall, and per stream its last launches.
std::string ProcessReview(const ProcessSummary& p) {
  std::string out;
  const bool stalled_now = p.stall && p.stall->ongoing;
  out += fmt::format("<div class=\"proc{}\" id=\"review-{}-{}-{}\">\n", stalled_now ? " stall" : "",
                     p.key.pid, p.key.start_ns, p.key.instance_id);
  out += fmt::format("<h3>{} <span class=\"{}\">{}</span>{}</h3>\n", Escape(ProcessWho(p)),
                     p.ending == Ending::kStalled ? "stalled" : "ending",
                     Escape(EndingName(p.ending)),
                     stalled_now && p.ending != Ending::kStalled
                         ? std::string(" <span class=\"stalled\">STALLED</span>")
                         : std::string());
  out += fmt::format("<p>{}</p>\n", Escape(p.ending_detail));
  if (p.stall && p.stall->stalls > 0) out += StallTables(p);
  if (p.streams.empty()) return out + "<p class=\"muted\">No kernel launch stored.</p>\n</div>\n";
  for (const StreamTail& s : p.streams) {
    out += fmt::format("<p>Device {}, stream {}: {}", s.device, Escape(FormatStreamId(s.stream)),
                       GroupedPlural(s.launches, "launch", "launches"));
    if (s.last.empty()) {
      out += ".</p>\n";
      continue;
    }
    out += s.last.size() < s.launches ? fmt::format(", the last {}:</p>\n", s.last.size())
                                      : std::string(":</p>\n");
    // SEQ orders the process's events; CORR is what the stall table, CUPTI and Nsight Systems
    // name a launch by.
    out += "<div class=\"wide\"><table class=\"launches\"><thead><tr><th class=\"n\">SEQ</th>"
           "<th class=\"n\" title=\"correlation id, as the stall table names a launch\">CORR</th>"
           "<th class=\"n\">GRID</th><th class=\"n\">BLOCK</th><th class=\"n\">OCC</th>"
           "<th>FINISHED</th><th>KERNEL</th></tr></thead>\n<tbody>\n";
    for (const LaunchSummary& l : s.last) {
      const std::string finished = FinishedText(l);
      const std::string cls = l.completion == Completion::kFinished  ? "v"
                              : l.completion == Completion::kUnknown ? "v muted"
                              : l.in_error                           ? "v bad"
                                                                     : "v warn";
      out += "<tr>" + Cell(fmt::format("{}", l.seq), "n") +
             Cell(fmt::format("{}", l.correlation_id), "n") + Cell(FormatDim3(l.grid), "n") +
             Cell(FormatDim3(l.block), "n") + Cell(FormatPercent(l.occupancy), "n") +
             Cell(finished, cls) + Cell(l.name, "name") + "</tr>\n";
    }
    out += "</tbody></table></div>\n";
  }
  out += "</div>\n";
  return out;
}

// "4001-4031" and, when every one has a rank, " (ranks 1-31)".
std::string PidsAndRanks(const Report& r, const std::vector<size_t>& processes) {
  std::vector<int64_t> pids;
  std::vector<int64_t> ranks;
  for (const size_t i : processes) {
    pids.push_back(r.processes[i].key.pid);
    const std::string_view rank = AttributionValue(r.processes[i], "rank");
    if (!rank.empty()) ranks.push_back(std::strtoll(std::string(rank).c_str(), nullptr, 10));
  }
  const bool many = processes.size() > 1;
  std::string out = fmt::format("pid{} {}", many ? "s" : "", CompactList(pids));
  if (ranks.size() == pids.size()) {
    out += fmt::format(" (rank{} {})", many ? "s" : "", CompactList(ranks));
  }
  return out;
}

// Processes whose reviews say the same are one block: the first to fail in full, the others
// one click away (<details>), each in full there.
std::string Review(const Report& r) {
  std::string out =
      "<section id=\"review\">\n<h2>Processes that did not end normally or stalled</h2>\n";
  if (r.review.empty()) {
    out +=
        "<p class=\"muted\">None: every process ended normally or is still running, and none "
        "stalled.</p>\n";
    out += "</section>\n";
    return out;
  }
  if (r.review_groups.size() < r.review.size()) {
    out += fmt::format("<p class=\"muted\">{} in {}: the processes whose reviews say the same "
                       "are one block, the first to fail shown, the others under it.</p>\n",
                       GroupedPlural(r.review.size(), "process", "processes"),
                       GroupedPlural(r.review_groups.size(), "block", "blocks"));
  }
  for (const ReviewGroup& g : r.review_groups) {
    out += ProcessReview(r.processes[g.processes.front()]);
    if (g.processes.size() < 2) continue;
    const std::vector<size_t> others(g.processes.begin() + 1, g.processes.end());
    out += fmt::format("<details class=\"more-procs\"><summary>\u00d7 {} more, the same: {}"
                       "</summary>\n",
                       FormatCount(others.size()), Escape(PidsAndRanks(r, others)));
    for (const size_t i : others) out += ProcessReview(r.processes[i]);
    out += "</details>\n";
  }
  out += "</section>\n";
  return out;
}

// What matters first (findings.h): what failed, the first to fail first; failed launches and
// calls; the top kernels with their advice.
std::string FindingsSection(const Report& r) {
  const Findings f = BuildFindings(r);
  std::string out = "<section id=\"findings\">\n<h2>Findings</h2>\n";
  if (r.review_groups.empty() && f.failed_launches.empty() && f.failed_calls.empty() &&
      f.top_kernels.empty()) {
    return out + "<p class=\"muted\">Nothing failed, and no kernel launch.</p>\n</section>\n";
  }
  constexpr size_t kNameRoom = 100;
  if (!r.review_groups.empty()) {
    out += "<ul class=\"failures\">\n";
    for (const ReviewGroup& g : r.review_groups) {
      const ProcessSummary& first = r.processes[g.processes.front()];
      const bool failed = FailedAt(first).has_value();
      const size_t n = g.processes.size();
      out += fmt::format("<li><span class=\"{}\">{}</span>: {}<br><span class=\"where\">{}{}"
                         "</span>",
                         failed ? "bad" : "warn",
                         Escape(n == 1 ? ProcessWho(first) : fmt::format("{} processes", n)),
                         Escape(g.says),
                         n == 1 ? "" : (failed ? "the first to fail: " : "the first: "),
                         Escape((n == 1 ? "" : ProcessWho(first) + ", ") +
                                WhereItFailed(first, kNameRoom)));
      if (n > 1) {
        const std::vector<size_t> others(g.processes.begin() + 1, g.processes.end());
        out += fmt::format("<br><span class=\"more\">\u00d7 {} more, the same: {}</span>",
                           FormatCount(others.size()), Escape(PidsAndRanks(r, others)));
      }
      out += fmt::format(" <a href=\"#review-{}-{}-{}\">details</a></li>\n", first.key.pid,
                         first.key.start_ns, first.key.instance_id);
    }
    out += "</ul>\n";
  }
  auto calls = [&](const std::vector<FailedCallFinding>& kinds) {
    std::string list = "<ul>\n";
    for (const FailedCallFinding& k : kinds) {
      const schema::OwnedApiErrorEvent& e = k.first;
      std::string first = fmt::format("{} at {} UTC, seq {}", ProcessWho(r.processes[k.first_process]),
                                      FormatClockMs(e.header.ts_ns), e.header.seq);
      if (e.device >= 0) first += fmt::format(", device {}", e.device);
      if (e.stream != 0xffffffffu) first += ", stream " + FormatStreamId(e.stream);
      if (!e.message.empty()) first += ": " + e.message;
      list += fmt::format("<li><code>{}</code>: {} in {}; the first: {}</li>\n",
                          Escape(FailedCallText(e)), FormatCount(k.count),
                          GroupedPlural(k.processes, "process", "processes"), Escape(first));
    }
    return list + "</ul>\n";
  };
  if (!f.failed_launches.empty()) {
    out += fmt::format(
        "<p><span class=\"bad\">{} in {}</span>: a launch that returns an error runs nothing, "
        "and a program that goes on without its results is wrong; check the launch's grid, "
        "block, shared memory and arguments.</p>\n",
        GroupedPlural(f.failed_launch_count, "failed launch", "failed launches"),
        GroupedPlural(f.failed_launch_processes, "process", "processes"));
    out += calls(f.failed_launches);
  }
  if (!f.failed_calls.empty()) {
    uint64_t count = 0;
    for (const FailedCallFinding& k : f.failed_calls) count += k.count;
    out += fmt::format("<p class=\"warn\">{}:</p>\n",
                       GroupedPlural(count, "failed call", "failed calls"));
    out += calls(f.failed_calls);
  }
  if (f.failed_calls_left_out > 0) {
    out += fmt::format("<p class=\"muted\">And {} of other kinds.</p>\n",
                       GroupedPlural(f.failed_calls_left_out, "failed call", "failed calls"));
  }
  if (!f.top_kernels.empty()) {
    out += fmt::format(
        "<p><b>Top kernels by {}</b></p>\n",
        f.by_launches ? std::string("launches (no launch was timed)")
        : f.estimated
            ? fmt::format("GPU time, estimated under sampled timing (~{} in all; an estimate, "
                          "not a measurement)",
                          FormatDuration(f.gpu_ns))
            : fmt::format("GPU time ({} measured in all)", FormatDuration(f.gpu_ns)));
    out += fmt::format("<div class=\"wide\"><table id=\"findings-kernels\"><thead><tr>"
                       "<th class=\"n\">SHARE</th><th class=\"n\">{}</th><th class=\"n\">OCC"
                       "</th><th>LIMITER</th><th>KERNEL</th></tr></thead>\n",
                       f.by_launches ? "LAUNCHES" : f.estimated ? "EST" : "GPU TIME");
    std::vector<std::string> names;
    for (const size_t i : f.top_kernels) names.push_back(r.signatures[i].display_name());
    const ShortKernelNames short_names = ShortenKernelNames(names, kNameRoom);
    names = short_names.names;
    for (size_t k = 0; k < f.top_kernels.size(); ++k) {
      const Signature& s = r.signatures[f.top_kernels[k]];
      const uint64_t w = f.top_weights[k];
      const schema::OccupancyFields& fields = s.fields();
      out += "<tbody class=\"sig\"><tr>";
      out += Num(FormatShare(static_cast<double>(w) /
                             static_cast<double>(std::max<uint64_t>(f.top_total, 1))),
                 static_cast<double>(w));
      out += Num(f.by_launches ? FormatCount(w)
                               : (f.estimated && s.sampled.launches > 0 ? "~" : "") +
                                     FormatDuration(w),
                 static_cast<double>(w));
      out += Num(FormatPercent(fields.occupancy), fields.occupancy,
                 fields.occupancy < 0.5 ? "n warn" : "n");
      out += Cell(LimiterLabel(fields));
      out += fmt::format("<td class=\"name\" title=\"{}\">{}</td>", Escape(s.display_name()),
                         Escape(names[k]));
      out += "</tr>";
      if (!s.advice.empty()) {
        out += fmt::format("<tr class=\"advice\"><td colspan=\"5\">&gt; {}</td></tr>",
                           Escape(s.advice));
      }
      out += "</tbody>\n";
    }
    out += "</table></div>\n";
    // The ids of names too long to tell apart in the column (kernel_names.h), under the table.
    for (const KernelNameLegendEntry& entry : short_names.legend) {
      out += fmt::format("<p class=\"note\">{}&nbsp; {}</p>\n", Escape(entry.id),
                         Escape(entry.name));
    }
  }
  out += "</section>\n";
  return out;
}

std::string Charts(const Report& r, const HtmlOptions& h, const std::vector<size_t>& ranking) {
  const bool by_time = html::WeighByTime(r);
  std::string out = "<section id=\"charts\">\n<h2>Charts</h2>\n";
  if (by_time && r.timed_launches < r.launches) {
    out += "<p class=\"note\">Charts weigh each kernel signature by the GPU time of its timed "
           "launches; untimed launches add nothing to them.</p>\n";
  }
  out += "<div class=\"charts\">\n";
  out += fmt::format("<figure><figcaption>{}</figcaption>\n{}</figure>\n",
                     by_time ? "Occupancy distribution (GPU time)"
                             : "Occupancy distribution (launches)",
                     html::OccupancyChart(r));
  out += fmt::format("<figure><figcaption>{}</figcaption>\n{}</figure>\n",
                     by_time ? "GPU time by limiting resource" : "Launches by limiting resource",
                     html::LimiterChart(r));
  out += "</div>\n";
  const size_t top = std::min(h.top_kernels_chart, ranking.size());
  out += fmt::format(
      "<figure><figcaption>Top {} kernel signature{} by {}{}</figcaption>\n{}</figure>\n", top,
      top == 1 ? "" : "s", by_time ? "GPU time" : "launches",
      top < ranking.size() ? fmt::format(" (of {})", ranking.size()) : std::string(),
      html::TopKernelsChart(r, ranking, h.top_kernels_chart));
  out += "</section>\n";
  return out;
}

std::string TimelineSection(const Report& r, const HtmlOptions& h, Timeline timeline,
                            const std::vector<size_t>& ranking) {
  const size_t lanes = timeline.lanes.size();
  const uint64_t launches = timeline.launches;
  const TimelineReduction red =
      ReduceTimeline(r, h.max_timeline_lanes, h.max_timeline_slices, kTimelinePlotPx, &timeline);
  std::string out = "<section id=\"timeline\">\n<h2>Timeline</h2>\n";
  out += fmt::format("<p>{} on {} (process, device, stream); {} timed. Kernels take the colours "
                     "of the top-kernels chart; others are grey.</p>\n",
                     GroupedPlural(launches, "launch", "launches"), GroupedPlural(lanes, "lane", "lanes"),
                     FormatCount(timeline.timed));
  if (red.lanes_left_out > 0 || red.merged) {
    out += "<p class=\"note\" id=\"timeline-capped\">Capped: ";
    std::vector<std::string> parts;
    if (red.lanes_left_out > 0) {
      parts.push_back(fmt::format(
          "the {} busiest lanes are drawn (processes that did not end normally first); left "
          "out: {} with {}",
          FormatCount(timeline.lanes.size()), GroupedPlural(red.lanes_left_out, "lane", "lanes"),
          GroupedPlural(red.launches_left_out, "launch", "launches")));
    }
    if (red.merged) {
      parts.push_back(fmt::format(
          "to draw at most {} shapes, each lane's launches are counted in bins of {} ({} bars "
          "drawn; a bar's height is the share of its bin the GPU was busy; hover a bar for its "
          "launches merged; striped: several kernels)",
          FormatCount(h.max_timeline_slices), FormatDuration(static_cast<uint64_t>(red.merge_gap_ns)),
          FormatCount(red.slices)));
    }
    for (size_t i = 0; i < parts.size(); ++i) out += (i > 0 ? "; " : "") + Escape(parts[i]);
    out += ".</p>\n";
  }
  out += "<figure>\n" + html::TimelineChart(r, timeline, ranking) + "</figure>\n";
  out += "</section>\n";
  return out;
}

size_t KernelRows(const Report& r, const ReportOptions& o) {
  if (o.top <= 0) return r.signatures.size();
  return std::min(r.signatures.size(), static_cast<size_t>(o.top));
}

std::string KernelTable(const Report& r, const ReportOptions& o) {
  std::string out = "<section id=\"kernels\">\n<h2>Kernels</h2>\n";
  if (r.signatures.empty()) {
    const bool filtered = !o.kernel_regex.empty() || !o.pids.empty() || !o.limiter.empty() ||
                          o.since_ns || o.until_ns;
    out += fmt::format("<p>No kernel launches {}.</p>\n</section>\n",
                       filtered ? "match the filters" : "in these logs");
    return out;
  }
  const size_t shown = KernelRows(r, o);
  out += fmt::format("<p>{}{}. Click a column header to sort.</p>\n", SortTitle(o.sort),
                     shown < r.signatures.size()
                         ? fmt::format(" (top {} of {})", shown, r.signatures.size())
                         : std::string());
  const bool sampled = r.sampled_launches > 0;
  out += "<div class=\"wide\"><table class=\"sortable\" id=\"kernel-table\"><thead><tr>";
  std::vector<std::string_view> numeric = {"LAUNCHES", sampled ? "MEASURED" : "TOTAL"};
  if (sampled) numeric.insert(numeric.end(), {"TIMED", "EST"});
  numeric.insert(numeric.end(), {"MEAN", "P50", "P99", "OCC"});
  for (const std::string_view h : numeric) out += fmt::format("<th class=\"n\">{}</th>", h);
  out += "<th>LIMITER</th>";
  for (const char* h : {"BLOCK", "REGS", "SMEM", "WAVES", "SPILL"}) {
    out += fmt::format("<th class=\"n\">{}</th>", h);
  }
  if (r.several_device_models) out += "<th>DEVICE</th>";
  out += "<th>KERNEL</th></tr></thead>\n";
  const int columns = (r.several_device_models ? 14 : 13) + (sampled ? 2 : 0);
  bool unknown = false;
  bool varies = false;
  for (size_t i = 0; i < shown; ++i) {
    const Signature& s = r.signatures[i];
    const schema::OccupancyFields& f = s.fields();
    out += "<tbody class=\"sig\"><tr>";
    out += Num(FormatCount(s.launches), static_cast<double>(s.launches));
    out += s.gpu_time ? Num(FormatDuration(s.gpu_time->total_ns),
                            static_cast<double>(s.gpu_time->total_ns))
                      : Num("-", -1, "n muted");
    if (sampled) {
      const uint64_t timed = s.gpu_time ? s.gpu_time->count : 0;
      out += Num(fmt::format("{}/{} {}", FormatCount(timed), FormatCount(s.launches),
                             FormatShare(TimedFraction(s))),
                 TimedFraction(s));
      if (s.sampled.launches == 0) {
        out += s.gpu_time ? Num(FormatDuration(s.gpu_time->total_ns),
                                static_cast<double>(s.gpu_time->total_ns))
                          : Num("-", -1, "n muted");
      } else if (const std::optional<uint64_t> estimate = EstimatedGpuNs(s)) {
        out += fmt::format(
            "<td class=\"n est\" data-v=\"{}\" title=\"an estimate, not a measurement: {} of "
            "{} sampled launches timed\">~{}</td>",
            *estimate, FormatCount(s.sampled.timed), FormatCount(s.sampled.launches),
            Escape(FormatDuration(*estimate)));
      } else {
        unknown = true;
        out += Num("unknown", -1, "n warn");
      }
    }
    if (s.gpu_time) {
      const DurationStats& t = *s.gpu_time;
      const auto mean = static_cast<uint64_t>(std::llround(t.mean_ns));
      out += Num(FormatDuration(mean), static_cast<double>(mean));
      out += Num(FormatDuration(t.p50_ns), static_cast<double>(t.p50_ns));
      out += Num(FormatDuration(t.p99_ns), static_cast<double>(t.p99_ns));
    } else {
      for (int k = 0; k < 3; ++k) out += Num("-", -1, "n muted");
    }
    std::string occ = FormatPercent(f.occupancy);
    const bool differs = FormatPercent(s.occupancy_min) != FormatPercent(s.occupancy_max);
    if (differs) {
      occ += "*";
      varies = true;
    }
    out += fmt::format("<td class=\"n{}\" data-v=\"{}\"{}>{}</td>",
                       f.occupancy < 0.5 ? " warn" : "", f.occupancy,
                       differs ? fmt::format(" title=\"{} to {} between launches\"",
                                             FormatPercent(s.occupancy_min),
                                             FormatPercent(s.occupancy_max))
                               : std::string(),
                       Escape(occ));
    out += Cell(LimiterLabel(f));
    out += Num(FormatDim3(s.block),
               static_cast<double>(s.block.x) * s.block.y * static_cast<double>(s.block.z));
    out += Num(fmt::format("{}", s.regs), s.regs);
    const int64_t smem = s.first.static_shared_bytes + s.dyn_smem;
    out += Num(FormatBytes(smem), static_cast<double>(smem));
    out += Num(s.waves_mean > 0 ? fmt::format("{:.1f}", s.waves_mean) : "-", s.waves_mean);
    out += s.spills() ? Num(FormatBytes(s.first.local_bytes),
                            static_cast<double>(s.first.local_bytes), "n warn")
                      : Num("-", 0);
    if (r.several_device_models) out += Cell(s.device_model.empty() ? "?" : s.device_model);
    out += fmt::format("<td class=\"name\" title=\"{}\">{}</td>", Escape(s.name),
                       Escape(s.display_name()));
    out += "</tr>";
    if (!s.advice.empty()) {
      out += fmt::format("<tr class=\"advice\"><td colspan=\"{}\">&gt; {}</td></tr>", columns,
                         Escape(s.advice));
    }
    out += "</tbody>\n";
  }
  out += "</table></div>\n";
  std::vector<std::string> legend;
  for (size_t i = 0; i < shown; ++i) {
    if (!r.signatures[i].gpu_time) {
      legend.emplace_back(sampled ? "-: no launch of the signature was timed (GPU time unknown)"
                                  : "-: no launch of the signature was timed");
      break;
    }
  }
  if (sampled) {
    legend.emplace_back(
        "MEASURED: GPU time of the timed launches; TIMED: timed/launches; EST (~): an estimate, "
        "not a measurement: MEASURED x launches / timed for launches under sampled timing");
  }
  if (unknown) legend.emplace_back("unknown: sampled, and none of its launches was timed");
  if (varies) legend.emplace_back("*: occupancy differs between launches (hover for the range)");
  if (!legend.empty()) {
    out += "<p class=\"note\">";
    for (size_t i = 0; i < legend.size(); ++i) out += (i > 0 ? "; " : "") + Escape(legend[i]);
    out += "</p>\n";
  }
  out += "</section>\n";
  return out;
}

std::string RetargetTable(const Report& r, const ReportOptions& o) {
  if (!r.retarget || r.signatures.empty()) return "";
  const RetargetDevice& d = *r.retarget;
  std::string out = fmt::format(
      "<section id=\"retarget\">\n<h2>Retargeted to {} ({})</h2>\n<p>Occupancy per SM "
      "recomputed from each kernel's resources.</p>\n",
      Escape(d.name), Escape(d.key));
  out += "<table class=\"sortable\" id=\"retarget-table\"><thead><tr><th class=\"n\">BLK/SM"
         "</th><th class=\"n\">OCC</th><th>LIMITER</th><th class=\"n\">NEW BLK/SM</th>"
         "<th class=\"n\">NEW OCC</th><th>NEW LIMITER</th><th>CHANGE</th><th>KERNEL</th></tr>"
         "</thead>\n";
  const size_t shown = KernelRows(r, o);
  for (size_t i = 0; i < shown; ++i) {
    const Signature& s = r.signatures[i];
    if (!s.retarget) continue;
    const schema::OccupancyFields& f = s.fields();
    const Retarget& t = *s.retarget;
    out += "<tbody><tr>";
    out += Num(fmt::format("{}", f.max_active_blocks), f.max_active_blocks);
    out += Num(FormatPercent(f.occupancy), f.occupancy);
    out += Cell(LimiterLabel(f));
    if (t.ok) {
      const schema::OccupancyFields& n = t.result.fields;
      const std::string_view cls = n.occupancy < f.occupancy ? "n warn" : "n";
      out += Num(fmt::format("{}", n.max_active_blocks), n.max_active_blocks, cls);
      out += Num(FormatPercent(n.occupancy), n.occupancy, cls);
      out += Cell(LimiterLabel(n));
    } else {
      for (int k = 0; k < 2; ++k) out += Num("-", -1);
      out += Cell("-");
    }
    out += Cell(t.change);
    out += fmt::format("<td class=\"name\" title=\"{}\">{}</td>", Escape(s.name),
                       Escape(s.display_name()));
    out += "</tr></tbody>\n";
  }
  out += "</table>\n</section>\n";
  return out;
}

std::string Processes(const Report& r) {
  std::string out = "<section id=\"processes\">\n<h2>Processes</h2>\n";
  if (r.processes.empty()) return out + "<p class=\"muted\">None.</p>\n</section>\n";
  bool policies = false;  // a TIMING column when some process did not time every launch
  for (const ProcessSummary& p : r.processes) policies |= p.timing_policy != TimingPolicy::kAll;
  out += "<div class=\"wide\"><table class=\"sortable\" id=\"process-table\"><thead><tr>"
         "<th class=\"n\">PID</th><th>EXE</th><th>HOST</th><th>STARTED (UTC)</th><th class=\"n\">EVENTS</th>"
         "<th class=\"n\">KERNELS</th><th class=\"n\">TIMED</th>";
  if (policies) out += "<th title=\"CUFLIGHT_TIMING\">TIMING</th>";
  out += "<th class=\"n\">API ERRORS</th>"
         "<th class=\"n\">DROPPED</th><th class=\"n\" title=\"kernel timing records lost\">"
         "TIMING LOST</th><th>ENDING</th></tr></thead>\n";
  // The ending's detail is a row of its own under the process, as wide as the table: a column
  // of it pushed the table past the right edge of the window.
  const int columns = policies ? 12 : 11;
  for (const ProcessSummary& p : r.processes) {
    out += "<tbody class=\"proc-row\"><tr>";
    out += Num(fmt::format("{}", p.key.pid), p.key.pid);
    out += fmt::format("<td class=\"path\" title=\"{}\">{}</td>",
                       Escape(fmt::format("{}", fmt::join(p.argv, " "))), Escape(p.exe));
    out += Cell(p.hostname);
    out += fmt::format("<td class=\"time\" data-v=\"{}\" title=\"{}\">{}</td>", p.key.start_ns,
                       Escape(FormatUtc(p.key.start_ns)),
                       Escape(p.key.start_ns > 0 ? FormatClockMs(p.key.start_ns) : "-"));
    out += Num(FormatCount(p.events), static_cast<double>(p.events));
    out += Num(FormatCount(p.kernels), static_cast<double>(p.kernels));
    out += Num(FormatCount(p.timed_kernels), static_cast<double>(p.timed_kernels));
    if (policies) out += Cell(TimingPolicyName(p.timing_policy));
    out += Num(FormatCount(p.api_errors), static_cast<double>(p.api_errors),
               p.api_errors > 0 ? "n bad" : "n");
    out += Num(FormatCount(p.dropped), static_cast<double>(p.dropped),
               p.dropped > 0 ? "n warn" : "n");
    out += Num(FormatCount(p.timing_dropped), static_cast<double>(p.timing_dropped),
               p.timing_dropped > 0 ? "n warn" : "n");
    out += fmt::format("<td class=\"{}\" data-v=\"{}\">{}</td>",
                       NeedsReview(p.ending) ? "v bad" : "v", Escape(EndingName(p.ending)),
                       Escape(EndingName(p.ending)));
    out += "</tr>";
    out += fmt::format("<tr class=\"detail\"><td colspan=\"{}\">{}</td></tr>", columns,
                       Escape(p.ending_detail));
    out += "</tbody>\n";
  }
  out += "</table></div>\n</section>\n";
  return out;
}

std::string LogsRead(const Report& r) {
  const logread::ReadSummary& s = r.read;
  std::string out = "<section id=\"logs\">\n<h2>Logs read</h2>\n";
  out += fmt::format(
      "<p>{} ({} zstd), {}, {}; {} torn (an incomplete last line), {} rejected (a line the "
      "decoder refused), {} of unknown event types. Damaged lines are skipped.</p>\n",
      GroupedPlural(s.files, "file", "files"), FormatCount(s.compressed_files),
      GroupedPlural(s.lines, "line", "lines"), GroupedPlural(s.events, "event", "events"),
      FormatCount(s.torn_lines), FormatCount(s.rejected_lines), FormatCount(s.unknown_type_lines));
  if (!s.notes.empty()) {
    out += "<ul class=\"notes\">\n";
    for (const std::string& note : s.notes) out += fmt::format("<li>{}</li>\n", Escape(note));
    if (s.notes_left_out > 0) {
      out += fmt::format("<li>... and {} more torn or rejected lines</li>\n",
                         FormatCount(s.notes_left_out));
    }
    out += "</ul>\n";
  }
  out += fmt::format("<details><summary>{}</summary>\n<ul class=\"files\">\n",
                     GroupedPlural(r.files.size(), "file", "files"));
  for (const std::filesystem::path& f : r.files) {
    out += fmt::format("<li><code>{}</code></li>\n", Escape(f.native()));
  }
  out += "</ul>\n</details>\n</section>\n";
  return out;
}

}  // namespace

std::string RenderHtmlPage(const Report& report, const ReportOptions& options,
                           const HtmlOptions& html, Timeline timeline) {
  const std::vector<size_t> ranking = html::RankSignatures(report);
  std::string out;
  out.reserve(1 << 16);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // Nothing may be fetched: the page is whole by itself.
  out += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<meta name=\"generator\" content=\"cuflight report\">\n";
  out += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n",
                     Escape(html.title), kStyle);
  out += Header(report, html);
  out += "<main>\n";
  out += FindingsSection(report);
  out += Summary(report);
  out += Jobs(report);
  out += Review(report);
  out += Charts(report, html, ranking);
  out += TimelineSection(report, html, std::move(timeline), ranking);
  out += KernelTable(report, options);
  out += RetargetTable(report, options);
  out += Processes(report);
  out += LogsRead(report);
  out += "</main>\n";
  out += fmt::format("<script>{}</script>\n</body>\n</html>\n", kScript);
  return out;
}

bool RenderHtml(const Report& report, const ReportOptions& options, const HtmlOptions& html,
                std::ostream& out, std::string* error) {
  Timeline timeline;
  BuildTimeline(report, &timeline);
  out << RenderHtmlPage(report, options, html, std::move(timeline));
  out.flush();
  if (!out) {
    *error = "cannot write the HTML page";
    return false;
  }
  return true;
}

int RunHtmlReport(const ReportOptions& options, const std::string& html_path, std::ostream& out,
                  std::ostream& err) {
  auto fail = [&](const std::string& line) {
    err << options.error_prefix << ": " << line << '\n';
    return kReportUsage;
  };
  if (html_path.empty()) return fail("--html needs a file name");
  std::string error;
  if (!CheckReportOptions(options, &error)) return fail(error);
  std::vector<std::filesystem::path> files;
  if (!logread::ExpandLogPaths(options.paths, &files, &error)) return fail(error);
  ReportOptions with_launches = options;
  with_launches.keep_launches = true;  // for the timeline
  Report report;
  {
    logread::ProgressLine progress(options.error_prefix, err);
    if (!with_launches.on_progress) with_launches.on_progress = progress.Callback();
    if (!BuildReport(with_launches, files, &report, &error)) return fail(error);
  }
  HtmlOptions html;
  if (html_path == "-") {
    if (!RenderHtml(report, options, html, out, &error)) return fail(error);
  } else {
    std::ostringstream page;
    if (!RenderHtml(report, options, html, page, &error)) return fail(error);
    const std::filesystem::path target(html_path);
    std::filesystem::path temp = target;
    temp += fmt::format(".tmp.{}", ::getpid());
    {
      std::ofstream file(temp, std::ios::binary | std::ios::trunc);
      if (!file) {
        return fail(fmt::format("cannot write {}: {}", html_path, std::strerror(errno)));
      }
      const std::string bytes = page.str();
      file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      file.close();
      if (!file) {
        const int saved = errno;
        std::error_code ignored;
        std::filesystem::remove(temp, ignored);
        return fail(fmt::format("cannot write {}: {}", html_path, std::strerror(saved)));
      }
    }
    std::error_code ec;
    std::filesystem::rename(temp, target, ec);
    if (ec) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      return fail(fmt::format("cannot write {}: {}", html_path, ec.message()));
    }
  }
  err << options.error_prefix << ": wrote " << (html_path == "-" ? "the page" : html_path) << " ("
      << GroupedPlural(report.processes.size(), "process", "processes") << ", "
      << GroupedPlural(report.launches, "launch", "launches") << ", "
      << GroupedPlural(report.signatures.size(), "kernel signature", "kernel signatures") << ")\n";
  return kReportOk;
}

}  // namespace cuflight::report
