#include "html_charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "cuflight/report/kernel_names.h"
#include "cuflight/report/render_html.h"
#include "cuflight/report/review.h"
#include "cuflight/report/text_format.h"
#include "html_text.h"

namespace cuflight::report::html {
namespace {

using schema::Resource;

constexpr int kBuckets = 10;
constexpr double kFullWidth = 1200;

uint64_t Weight(const Signature& s, bool by_time) {
  if (!by_time) return s.launches;
  return s.gpu_time ? s.gpu_time->total_ns : 0;
}

std::string FormatWeight(uint64_t value, bool by_time) {
  if (by_time) return FormatDuration(value);
  return FormatCount(value) + (value == 1 ? " launch" : " launches");
}

std::string Share(uint64_t part, uint64_t total) {
  if (total == 0) return "0%";
  const double fraction = static_cast<double>(part) / static_cast<double>(total);
  return fraction > 0 && fraction < 0.005 ? std::string("<1%") : FormatPercent(fraction);
}

std::string SvgOpen(std::string_view id, double width, double height, std::string_view label) {
  return fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n",
      id, Coord(width), Coord(height), Coord(width), Coord(height), Escape(label));
}

std::string Text(double x, double y, std::string_view text, std::string_view cls = "",
                 std::string_view anchor = "start") {
  return fmt::format("<text x=\"{}\" y=\"{}\"{}{}>{}</text>\n", Coord(x), Coord(y),
                     cls.empty() ? std::string() : fmt::format(" class=\"{}\"", cls),
                     anchor == "start" ? std::string()
                                       : fmt::format(" text-anchor=\"{}\"", anchor),
                     Escape(text));
}

std::string Rect(double x, double y, double w, double h, std::string_view fill,
                 std::string_view title, std::string_view cls = "") {
  return fmt::format(
      "<rect{} x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
      cls.empty() ? std::string() : fmt::format(" class=\"{}\"", cls), Coord(x), Coord(y),
      Coord(w), Coord(h), fill, Escape(title));
}

// A step of 1, 2 or 5 x 10^k at least `raw`.
double NiceStep(double raw) {
  if (raw <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

std::string AxisLabel(double value, bool by_time) {
  if (by_time) return value == 0 ? std::string("0") : FormatDuration(static_cast<uint64_t>(value));
  return FormatCount(static_cast<uint64_t>(value));
}

std::string Empty(std::string_view id, std::string_view label, std::string_view message) {
  std::string out = SvgOpen(id, 560, 60, label);
  out += Text(10, 35, message, "muted");
  out += "</svg>\n";
  return out;
}

// Chart slots: one per resource, and kNoLimit for kernels at full occupancy, which no resource
// limits.
constexpr int kNoLimit = schema::kResourceCount;
constexpr int kSlots = schema::kResourceCount + 1;
constexpr std::string_view kNoLimitColor = "#999999";

int SlotOf(const Signature& s) {
  return Limited(s.fields()) ? static_cast<int>(s.fields().limiting_resource) : kNoLimit;
}
std::string_view SlotName(int slot) {
  return slot == kNoLimit ? std::string_view("none (full occupancy)")
                          : schema::ResourceName(static_cast<Resource>(slot));
}
std::string_view SlotColor(int slot) {
  return slot == kNoLimit ? kNoLimitColor : ResourceColor(static_cast<Resource>(slot));
}

int Bucket(double occupancy) {
  const int b = static_cast<int>(std::floor(occupancy * kBuckets + 1e-9));
  return std::clamp(b, 0, kBuckets - 1);
}

std::string StreamLabel(uint64_t stream) {
  return stream == 0 ? std::string("default stream") : fmt::format("stream {:#x}", stream);
}

}  // namespace

bool WeighByTime(const Report& report) { return report.timed_launches > 0; }

std::vector<size_t> RankSignatures(const Report& report) {
  const bool by_time = WeighByTime(report);
  std::vector<size_t> order(report.signatures.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Signature& x = report.signatures[a];
    const Signature& y = report.signatures[b];
    const uint64_t wx = Weight(x, by_time);
    const uint64_t wy = Weight(y, by_time);
    if (wx != wy) return wx > wy;
    return x.launches > y.launches;
  });
  return order;
}

std::string OccupancyChart(const Report& report) {
  const bool by_time = WeighByTime(report);
  const std::string label =
      by_time ? "GPU time by theoretical occupancy" : "Kernel launches by theoretical occupancy";
  if (report.signatures.empty()) {
    return Empty(kHtmlOccupancyChartId, label, "No kernel launches.");
  }
  std::array<std::array<uint64_t, kSlots>, kBuckets> cells{};
  std::array<uint64_t, kBuckets> totals{};
  std::array<uint64_t, kBuckets> launches{};
  std::array<bool, kSlots> used{};
  uint64_t total = 0;
  for (const Signature& s : report.signatures) {
    const int b = Bucket(s.fields().occupancy);
    const auto r = static_cast<size_t>(SlotOf(s));
    const uint64_t w = Weight(s, by_time);
    cells[static_cast<size_t>(b)][r] += w;
    totals[static_cast<size_t>(b)] += w;
    launches[static_cast<size_t>(b)] += s.launches;
    if (w > 0) used[r] = true;
    total += w;
  }
  constexpr double kWidth = 560, kHeight = 320;
  constexpr double kLeft = 70, kRight = 10, kTop = 24, kPlot = 200;
  const double band = (kWidth - kLeft - kRight) / kBuckets;
  const uint64_t max = *std::max_element(totals.begin(), totals.end());
  const double step = NiceStep(static_cast<double>(std::max<uint64_t>(max, 1)) / 4);
  const double top = step * std::ceil(static_cast<double>(std::max<uint64_t>(max, 1)) / step);
  auto y_of = [&](double v) { return kTop + kPlot - v / top * kPlot; };

  std::string out = SvgOpen(kHtmlOccupancyChartId, kWidth, kHeight, label);
  out += Text(kLeft, 14, by_time ? "GPU time" : "launches", "axis-title");
  for (double v = 0; v <= top + step / 2; v += step) {
    const double y = y_of(v);
    out += fmt::format("<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n",
                       Coord(kLeft), Coord(y), Coord(kWidth - kRight), Coord(y));
    out += Text(kLeft - 6, y + 4, AxisLabel(v, by_time), "tick", "end");
  }
  for (int b = 0; b < kBuckets; ++b) {
    const double x = kLeft + b * band + 3;
    const double w = band - 6;
    double y = kTop + kPlot;
    const std::string range = fmt::format("{}-{}%", b * 10, (b + 1) * 10);
    for (int r = 0; r < kSlots; ++r) {
      const uint64_t v = cells[static_cast<size_t>(b)][static_cast<size_t>(r)];
      if (v == 0) continue;
      const double h = static_cast<double>(v) / top * kPlot;
      y -= h;
      out +=
          Rect(x, y, w, std::max(h, 0.5), SlotColor(r),
               r == kNoLimit ? fmt::format("occupancy 100%, no resource limits it: {} ({} of all)",
                                           FormatWeight(v, by_time), Share(v, total))
                             : fmt::format("occupancy {}, limited by {}: {} ({} of all)", range,
                                           SlotName(r), FormatWeight(v, by_time), Share(v, total)),
               "bar");
    }
    if (totals[static_cast<size_t>(b)] > 0) {
      out += Text(x + w / 2, y - 4, Share(totals[static_cast<size_t>(b)], total), "value",
                  "middle");
    } else if (by_time && launches[static_cast<size_t>(b)] > 0) {
      out += Text(x + w / 2, y - 4, "untimed", "value", "middle");
    }
    out += Text(x + w / 2, kTop + kPlot + 16, fmt::format("{}-{}", b * 10, (b + 1) * 10), "tick",
                "middle");
  }
  out += fmt::format("<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n",
                     Coord(kLeft), Coord(kTop + kPlot), Coord(kWidth - kRight),
                     Coord(kTop + kPlot));
  out += Text((kLeft + kWidth - kRight) / 2, kTop + kPlot + 34,
              "theoretical occupancy, % (a 100% launch counts in 90-100)", "axis-title", "middle");
  double lx = kLeft;
  const double ly = kTop + kPlot + 56;
  for (int r = 0; r < kSlots; ++r) {
    if (!used[static_cast<size_t>(r)]) continue;
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>\n",
                       Coord(lx), Coord(ly - 9), SlotColor(r));
    out += Text(lx + 14, ly, SlotName(r), "legend");
    lx += 24 + 7.0 * static_cast<double>(SlotName(r).size());
  }
  out += "</svg>\n";
  return out;
}

std::string LimiterChart(const Report& report) {
  const bool by_time = WeighByTime(report);
  const std::string label = by_time ? "GPU time by limiting resource"
                                    : "Kernel launches by limiting resource";
  if (report.signatures.empty()) {
    return Empty(kHtmlLimiterChartId, label, "No kernel launches.");
  }
  std::array<uint64_t, kSlots> values{};
  std::array<uint64_t, kSlots> sigs{};
  uint64_t total = 0;
  for (const Signature& s : report.signatures) {
    const auto r = static_cast<size_t>(SlotOf(s));
    values[r] += Weight(s, by_time);
    ++sigs[r];
    total += Weight(s, by_time);
  }
  constexpr double kWidth = 560, kLeft = 100, kRow = 34, kTop = 28, kBar = 300;
  const double height = kTop + kRow * kSlots + 10;
  const uint64_t max = std::max<uint64_t>(*std::max_element(values.begin(), values.end()), 1);
  std::string out = SvgOpen(kHtmlLimiterChartId, kWidth, height, label);
  out += Text(kLeft, 16, by_time ? "GPU time of the kernels each resource limits"
                                 : "launches of the kernels each resource limits",
              "axis-title");
  for (int r = 0; r < kSlots; ++r) {
    const uint64_t v = values[static_cast<size_t>(r)];
    const double y = kTop + r * kRow;
    out += Text(kLeft - 8, y + 19, r == kNoLimit ? std::string_view("none") : SlotName(r), "label",
                "end");
    const double w = static_cast<double>(v) / static_cast<double>(max) * kBar;
    out += fmt::format("<rect class=\"track\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"22\"/>\n",
                       Coord(kLeft), Coord(y + 4), Coord(kBar));
    out += Rect(kLeft, y + 4, std::max(w, v > 0 ? 1.0 : 0.0), 22, SlotColor(r),
                fmt::format("{}: {} ({} of all) in {} kernel signature{}", SlotName(r),
                            FormatWeight(v, by_time), Share(v, total), sigs[static_cast<size_t>(r)],
                            sigs[static_cast<size_t>(r)] == 1 ? "" : "s"),
                "bar");
    out += Text(kLeft + kBar + 8, y + 19,
                fmt::format("{} ({})", FormatWeight(v, by_time), Share(v, total)), "value");
  }
  out += "</svg>\n";
  return out;
}

std::string TopKernelsChart(const Report& report, const std::vector<size_t>& ranking,
                            size_t top) {
  const bool by_time = WeighByTime(report);
  const std::string label = by_time ? "Top kernels by GPU time, with their occupancy"
                                    : "Top kernels by launches, with their occupancy";
  const size_t n = std::min(top, ranking.size());
  if (n == 0) return Empty(kHtmlTopKernelsChartId, label, "No kernel launches.");
  constexpr double kRow = 26, kTop = 30, kNameRight = 470, kBarLeft = 480, kBarWidth = 420;
  constexpr double kOccLeft = 1010, kOccWidth = 100;
  constexpr double kLegendLine = 16;
  constexpr size_t kLegendChars = 160;  // ~7 px a character in the 1200 px chart
  double height = kTop + kRow * static_cast<double>(n) + 8;
  uint64_t max = 1;
  for (size_t i = 0; i < n; ++i) max = std::max(max, Weight(report.signatures[ranking[i]], by_time));
  std::vector<std::string> names;  // told apart among the kernels shown (kernel_names.h)
  for (size_t i = 0; i < n; ++i) names.push_back(report.signatures[ranking[i]].display_name());
  const ShortKernelNames short_names = ShortenKernelNames(names, 64);
  names = short_names.names;
  // The ids of names too long to tell apart in 64 bytes, under the bars.
  std::vector<std::string> legend;
  for (const KernelNameLegendEntry& entry : short_names.legend) {
    for (std::string& line : WrapWords(entry.name, kLegendChars, entry.id + "  ", "    ")) {
      legend.push_back(std::move(line));
    }
  }
  const double bars_height = height;
  if (!legend.empty()) height += kLegendLine * static_cast<double>(legend.size()) + 8;
  std::string out = SvgOpen(kHtmlTopKernelsChartId, kFullWidth, height, label);
  out += Text(8, 18, "kernel", "axis-title");
  out += Text(kBarLeft, 18, by_time ? "total GPU time" : "launches", "axis-title");
  out += Text(kOccLeft, 18, "theoretical occupancy, limiter", "axis-title");
  for (size_t i = 0; i < n; ++i) {
    const Signature& s = report.signatures[ranking[i]];
    const double y = kTop + static_cast<double>(i) * kRow;
    const uint64_t v = Weight(s, by_time);
    const std::string name = s.display_name();
    std::string detail = fmt::format("{}\n{} launches", name, FormatCount(s.launches));
    if (s.gpu_time) {
      detail += fmt::format(", {} timed: total {}, mean {}, p50 {}, p99 {}",
                            FormatCount(s.gpu_time->count), FormatDuration(s.gpu_time->total_ns),
                            FormatDuration(static_cast<uint64_t>(std::llround(s.gpu_time->mean_ns))),
                            FormatDuration(s.gpu_time->p50_ns), FormatDuration(s.gpu_time->p99_ns));
    } else {
      detail += ", none timed";
    }
    detail += fmt::format("\nblock {}, {} regs/thread, theoretical occupancy {}",
                          FormatDim3(s.block), s.regs, FormatPercent(s.fields().occupancy));
    detail += Limited(s.fields()) ? fmt::format(" limited by {}",
                                                schema::ResourceName(s.fields().limiting_resource))
                                  : std::string(", no resource limits it");
    if (!s.advice.empty()) detail += "\n" + s.advice;
    out += fmt::format("<g class=\"row\"><title>{}</title>\n", Escape(detail));
    out += Text(kNameRight, y + 17, names[i], "label", "end");
    const double w = static_cast<double>(v) / static_cast<double>(max) * kBarWidth;
    const std::string_view color = KernelColor(static_cast<int>(i));
    out += fmt::format("<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"18\" "
                       "fill=\"{}\"/>\n",
                       Coord(kBarLeft), Coord(y + 4), Coord(std::max(w, v > 0 ? 1.0 : 0.0)),
                       color);
    out += Text(kBarLeft + std::max(w, 0.0) + 6, y + 17,
                by_time && !s.gpu_time ? std::string("untimed") : FormatWeight(v, by_time),
                "value");
    const double occ = std::clamp(s.fields().occupancy, 0.0, 1.0);
    out += fmt::format("<rect class=\"track\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"18\"/>\n",
                       Coord(kOccLeft), Coord(y + 4), Coord(kOccWidth));
    out += fmt::format(
        "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"18\" "
        "fill=\"{}\"/>\n",
        Coord(kOccLeft), Coord(y + 4), Coord(occ * kOccWidth), SlotColor(SlotOf(s)));
    out += Text(kOccLeft + kOccWidth + 6, y + 17,
                Limited(s.fields()) ? fmt::format("{} {}", FormatPercent(s.fields().occupancy),
                                                  LimiterLabel(s.fields()))
                                    : FormatPercent(s.fields().occupancy),
                "value");
    out += "</g>\n";
  }
  for (size_t i = 0; i < legend.size(); ++i) {
    out += Text(8, bars_height + kLegendLine * static_cast<double>(i + 1), legend[i],
                "name-legend");
  }
  out += "</svg>\n";
  return out;
}

std::string TimelineChart(const Report& report, const Timeline& timeline,
                          const std::vector<size_t>& ranking) {
  const std::string label = "Kernels per process and stream over time";
  if (timeline.lanes.empty()) {
    return Empty(kHtmlTimelineChartId, label, "No kernel launches to place on the timeline.");
  }
  std::vector<int> color_rank(report.signatures.size(), -1);
  for (size_t i = 0; i < ranking.size() && i < static_cast<size_t>(kKernelColorCount); ++i) {
    color_rank[ranking[i]] = static_cast<int>(i);
  }
  struct Marker {
    int64_t ts_ns;
    std::string label;
  };
  auto marker_of = [&](const ProcessSummary& p) -> std::optional<Marker> {
    if (p.ending == Ending::kCrash && p.crash) {
      return Marker{p.crash->header.ts_ns,
                    p.crash->signal_name.empty() ? std::string("crash")
                                                 : "crash " + p.crash->signal_name};
    }
    if (p.ending == Ending::kLost && p.lost) return Marker{p.lost->header.ts_ns, "lost"};
    if (p.ending == Ending::kApiError && p.last_api_error) {
      return Marker{p.last_api_error->header.ts_ns, "api_error " + p.last_api_error->error_name};
    }
    return std::nullopt;
  };
  int64_t begin = timeline.begin_ns;
  int64_t end = timeline.end_ns;
  for (const TimelineLane& lane : timeline.lanes) {
    if (const auto m = marker_of(report.processes[lane.process])) {
      begin = std::min(begin, m->ts_ns);
      end = std::max(end, m->ts_ns);
    }
  }
  const int64_t range = std::max<int64_t>(end - begin, 1000);
  constexpr double kLeft = 250, kRight = 20, kHeader = 22, kLane = 18, kTop = 8, kAxis = 40;
  const double plot = kFullWidth - kLeft - kRight;
  auto x_of = [&](int64_t ns) {
    return kLeft + static_cast<double>(ns - begin) / static_cast<double>(range) * plot;
  };
  size_t processes = 0;
  for (size_t i = 0; i < timeline.lanes.size(); ++i) {
    if (i == 0 || timeline.lanes[i].process != timeline.lanes[i - 1].process) ++processes;
  }
  const double height = kTop + static_cast<double>(processes) * kHeader +
                        static_cast<double>(timeline.lanes.size()) * kLane + kAxis;
  std::string out = SvgOpen(kHtmlTimelineChartId, kFullWidth, height, label);
  out += "<defs><pattern id=\"mixed\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\">"
         "<rect width=\"4\" height=\"4\" fill=\"#BBBBBB\"/><path d=\"M0 4L4 0\" "
         "stroke=\"#555555\" stroke-width=\"1\"/></pattern></defs>\n";
  const double axis_y = height - kAxis + 6;
  const double step = NiceStep(static_cast<double>(range) / 8);
  for (double t = 0; t <= static_cast<double>(range) + step / 1000; t += step) {
    const double x = x_of(begin + static_cast<int64_t>(t));
    out += fmt::format("<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n",
                       Coord(x), Coord(kTop), Coord(x), Coord(axis_y));
    out += Text(x, axis_y + 14,
                t == 0 ? std::string("0") : "+" + FormatDuration(static_cast<uint64_t>(t)), "tick",
                "middle");
  }
  out += Text(kLeft, axis_y + 30,
              fmt::format("time from {} (timed kernels at their GPU start and end; untimed ones "
                          "as ticks at their launch)",
                          FormatUtc(begin)),
              "axis-title");
  double y = kTop;
  size_t i = 0;
  while (i < timeline.lanes.size()) {
    const size_t process = timeline.lanes[i].process;
    const ProcessSummary& p = report.processes[process];
    size_t j = i;
    while (j < timeline.lanes.size() && timeline.lanes[j].process == process) ++j;
    const bool reviewed = NeedsReview(p.ending);
    std::string head = ProcessName(p);
    if (!p.hostname.empty()) head += " on " + p.hostname;
    out += fmt::format("<g class=\"process{}\">\n", reviewed ? " failed" : "");
    out += fmt::format("<text x=\"4\" y=\"{}\" class=\"phead\"><title>{}</title>{}</text>\n",
                       Coord(y + 15), Escape(p.ending_detail),
                       Escape(Clip(head, 40) + " - " +
                              std::string(EndingName(p.ending))));
    const double block_top = y;
    y += kHeader;
    for (size_t k = i; k < j; ++k) {
      const TimelineLane& lane = timeline.lanes[k];
      out += Text(14, y + 13,
                  fmt::format("dev {} {} ({})", lane.device, StreamLabel(lane.stream),
                              FormatCount(lane.launches)),
                  "lane");
      out += fmt::format("<rect class=\"laneband\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n",
                         Coord(kLeft), Coord(y + 1), Coord(plot), Coord(kLane - 2));
      for (const TimelineSlice& s : lane.slices) {
        // A bin without launches holds GPU time of a kernel that started in an earlier bin.
        const bool carried = s.launches == 0;
        const bool mixed = !carried && s.signature == kMixedSignatures;
        const int rank = mixed || carried ? -1 : color_rank[s.signature];
        const std::string fill = mixed ? std::string("url(#mixed)") : std::string(KernelColor(rank));
        const std::string name = carried ? std::string()
                                 : mixed ? std::string("several kernels")
                                         : report.signatures[s.signature].display_name();
        std::string title;
        if (s.bin || s.launches > 1) {
          const int64_t span = std::max<int64_t>(s.end_ns - s.start_ns, 1);
          const double busy =
              std::clamp(static_cast<double>(s.busy_ns) / static_cast<double>(span), 0.0, 1.0);
          const std::string span_text =
              fmt::format("+{} to +{}", FormatDuration(static_cast<uint64_t>(s.start_ns - begin)),
                          FormatDuration(static_cast<uint64_t>(s.end_ns - begin)));
          title = carried ? fmt::format("{}: GPU busy {} with kernels launched before", span_text,
                                        FormatPercent(busy))
                          : fmt::format("{} launches merged ({} timed), {}, GPU busy {}: {}",
                                        FormatCount(s.launches), FormatCount(s.timed), span_text,
                                        FormatPercent(busy), name);
          // Density: the bar fills the bin's width, its height the share of the bin the GPU
          // was busy (a thin bar for launches without GPU time).
          const double x = x_of(s.start_ns);
          const double w = std::max(x_of(std::min(s.end_ns, end)) - x, 1.0);
          const double full = kLane - 4;
          const double h = s.timed > 0 || s.busy_ns > 0 ? std::max(full * busy, 2.0) : 2.0;
          out += Rect(x, y + 2 + full - h, w, h, fill, title,
                      s.timed > 0 || s.busy_ns > 0 ? "k bin" : "k bin untimed");
          continue;
        }
        if (s.timed > 0) {
          title = fmt::format("{}\nseq {}, correlation {}: GPU {} from +{}", name, s.seq,
                              s.correlation_id,
                              FormatDuration(static_cast<uint64_t>(s.end_ns - s.start_ns)),
                              FormatDuration(static_cast<uint64_t>(s.start_ns - begin)));
        } else {
          title = fmt::format("{}\nseq {}, correlation {}: not timed (no kernel_time), launched "
                              "at +{}",
                              name, s.seq, s.correlation_id,
                              FormatDuration(static_cast<uint64_t>(s.start_ns - begin)));
        }
        const bool point = s.timed == 0;
        double x = x_of(s.start_ns);
        double w = x_of(s.end_ns) - x;
        if (point) {
          x -= 1;
          w = 2;
        }
        out += Rect(x, y + 2, std::max(w, 1.0), kLane - 4, fill, title,
                    point ? "k untimed" : "k");
      }
      y += kLane;
    }
    if (const auto m = marker_of(p)) {
      const double x = x_of(m->ts_ns);
      out += fmt::format(
          "<g class=\"marker\"><title>{}</title><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
          Escape(p.ending_detail), Coord(x), Coord(block_top + 4), Coord(x), Coord(y));
      const bool right = x > kLeft + plot * 0.75;
      out += fmt::format("<text x=\"{}\" y=\"{}\" class=\"mlabel\"{}>{}</text></g>\n",
                         Coord(right ? x - 4 : x + 4), Coord(block_top + 15),
                         right ? " text-anchor=\"end\"" : "", Escape(m->label));
    }
    out += "</g>\n";
    i = j;
  }
  out += "</svg>\n";
  return out;
}

}  // namespace cuflight::report::html
