#include "event_text.h"

#include <fmt/format.h>
#include <time.h>

#include <optional>
#include <string_view>
#include <type_traits>

#include "cuflight/report/text_format.h"

namespace cuflight::cli {
namespace {

std::string Printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

std::string Clock(int64_t ts_ns) {
  const time_t seconds = static_cast<time_t>(ts_ns / 1'000'000'000);
  const int64_t millis = (ts_ns % 1'000'000'000) / 1'000'000;
  tm local{};
  if (localtime_r(&seconds, &local) == nullptr) return fmt::format("{}", ts_ns);
  return fmt::format("{:02}:{:02}:{:02}.{:03}", local.tm_hour, local.tm_min, local.tm_sec, millis);
}

std::string Dim(const schema::Dim3& d) { return fmt::format("{}x{}x{}", d.x, d.y, d.z); }

std::string Duration(uint64_t ns) {
  if (ns >= 1'000'000'000) return fmt::format("{:.3f} s", static_cast<double>(ns) / 1e9);
  if (ns >= 1'000'000) return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
  if (ns >= 1'000) return fmt::format("{:.3f} us", static_cast<double>(ns) / 1e3);
  return fmt::format("{} ns", ns);
}

// " graph G node N" for a graph's kernel node (what tells apart the events of one graph launch,
// which share its correlation id); "" otherwise.
std::string GraphNode(const std::optional<uint64_t>& graph_id,
                      const std::optional<uint64_t>& graph_node_id) {
  if (!graph_id || !graph_node_id) return {};
  return fmt::format(" graph {} node {}", *graph_id, *graph_node_id);
}

std::string Ms(int64_t ms) { return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000); }

// "STALLED 42.0 s: device 0 stream 14 waits on spin(int volatile*) grid 1x1x1 block 32x1x1
// occupancy 0.02 launched 42.0 s ago corr 17 (+2 queued); device 1 stream 16 ...; 2 streams
// stalled, 0 kernels finished since the last report", or "resolved after 42.0 s, ...".
std::string StallText(const schema::OwnedStallEvent& e) {
  std::string text;
  if (e.state == schema::StallState::kResolved) {
    text = fmt::format("resolved after {}", Ms(e.stalled_ms));
  } else {
    text = fmt::format("STALLED {}", Ms(e.stalled_ms));
    const char* separator = ": ";
    for (const schema::OwnedStallStream& s : e.streams) {
      text += fmt::format("{}device {} stream {} ", separator, s.device,
                          report::FormatStreamId(s.stream));
      separator = "; ";
      if (s.launches.empty()) {
        text += fmt::format("waiting {}, {} unfinished", Ms(s.waiting_ms), s.unfinished);
        continue;
      }
      const schema::OwnedStallLaunch& l = s.launches.front();
      const std::string& name = l.demangled.empty() ? l.name : l.demangled;
      text += fmt::format("waits on {} grid {} block {} occupancy {:.2f} launched {} ago corr {}",
                          name.empty() ? std::string("(name not kept)") : Printable(name),
                          Dim(l.grid), Dim(l.block), l.occupancy, Ms(l.age_ms), l.correlation_id);
      if (s.unfinished > 1) text += fmt::format(" (+{} queued)", s.unfinished - 1);
    }
    text +=
        fmt::format("; {} stream{} stalled", e.streams_stalled, e.streams_stalled == 1 ? "" : "s");
  }
  return text + fmt::format(", {} kernel{} finished since the last report", e.completed,
                            e.completed == 1 ? "" : "s");
}

std::string Occupancy(const schema::OccupancyFields& o) {
  if (o.occupancy >= 1.0) return fmt::format("occupancy {:.2f}", o.occupancy);
  return fmt::format("occupancy {:.2f} ({})", o.occupancy,
                     schema::ResourceName(o.limiting_resource));
}

std::string Fields(const schema::OwnedEvent& event, std::optional<uint64_t> launch_stream) {
  return std::visit(
      [&](const auto& e) -> std::string {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, schema::OwnedProcessStartEvent>) {
          std::string args;
          for (const std::string& a : e.argv) {
            args += ' ';  // appended piecewise: g++ -O3 warns (-Wrestrict) on " " + string
            args += Printable(a);
          }
          return fmt::format("{} on {} (ppid {}):{}", Printable(e.exe), Printable(e.hostname),
                             e.ppid, args);
        } else if constexpr (std::is_same_v<T, schema::OwnedDeviceEvent>) {
          return fmt::format("{}: {} (cc {}.{}, {} SMs)", e.device, Printable(e.name), e.cc_major,
                             e.cc_minor, e.sm_count);
        } else if constexpr (std::is_same_v<T, schema::OwnedKernelEvent>) {
          const schema::OccupancyFields& o = e.occupancy;
          return fmt::format(
              "{} grid {} block {}{} regs {} smem {} {} device {} stream {} corr {}{}",
              Printable(e.demangled.empty() ? e.name : e.demangled), Dim(e.grid), Dim(e.block),
              e.cluster ? fmt::format(" cluster {}", Dim(*e.cluster)) : std::string(), e.num_regs,
              e.static_shared_bytes + e.dyn_shared_bytes, Occupancy(o), e.device,
              report::FormatStreamId(e.stream), e.correlation_id,
              GraphNode(e.graph_id, e.graph_node_id));
        } else if constexpr (std::is_same_v<T, schema::OwnedKernelTimeEvent>) {
          return fmt::format("corr {}{} device {} stream {} {}", e.correlation_id,
                             GraphNode(e.graph_id, e.graph_node_id), e.device,
                             report::FormatStreamId(launch_stream.value_or(e.stream)),
                             Duration(e.duration_ns));
        } else if constexpr (std::is_same_v<T, schema::OwnedApiErrorEvent>) {
          return fmt::format("{} {} ({}): {}", Printable(e.api), Printable(e.error_name), e.code,
                             Printable(e.message));
        } else if constexpr (std::is_same_v<T, schema::OwnedStatsEvent>) {
          return fmt::format("launches {} emitted {} dropped {} filtered {}", e.launches, e.emitted,
                             e.dropped, e.filtered);
        } else if constexpr (std::is_same_v<T, schema::OwnedProcessEndEvent>) {
          return fmt::format("exit {} launches {} emitted {} dropped {}",
                             e.exit_code ? std::to_string(*e.exit_code) : std::string("unknown"),
                             e.launches, e.emitted, e.dropped);
        } else if constexpr (std::is_same_v<T, schema::OwnedStallEvent>) {
          return StallText(e);
        } else if constexpr (std::is_same_v<T, schema::OwnedProcessLostEvent>) {
          return fmt::format("{}: last seq {} stored {} lost {}",
                             schema::LostReasonName(e.reason),
                             e.last_seq ? std::to_string(*e.last_seq) : std::string("none"),
                             e.events_stored, e.events_lost);
        } else if constexpr (std::is_same_v<T, schema::OwnedProcessCrashEvent>) {
          std::string out =
              fmt::format("{} (signal {}, code {}) in thread {}",
                          e.signal_name.empty() ? std::string("signal") : Printable(e.signal_name),
                          e.signal, e.code, e.tid);
          if (e.addr != 0) out += fmt::format(" at {:#x}", e.addr);
          if (e.app_handler) out += "; the application's handler ran first";
          return out + fmt::format(" launches {} emitted {} dropped {}", e.launches, e.emitted,
                                   e.dropped);
        } else {
          return fmt::format("seq {}", e.header.seq);
        }
      },
      event);
}

}  // namespace

std::string EventText(const schema::OwnedEvent& event, std::optional<uint64_t> launch_stream) {
  const schema::Header& h = schema::HeaderOf(event);
  return fmt::format("{} pid {} {} {}", Clock(h.ts_ns), h.pid,
                     schema::EventTypeName(schema::TypeOf(event)), Fields(event, launch_stream));
}

void LaunchStreams::Remember(uint32_t process, const schema::OwnedKernelEvent& kernel) {
  if (!schema::ExpectsKernelTime(kernel)) return;  // no kernel_time will ask for its stream
  const Key key{process, schema::JoinKeyOf(kernel)};
  if (streams_.insert_or_assign(key, kernel.stream).second) {
    order_.push_back(key);
    if (order_.size() > kCapacity) {
      streams_.erase(order_.front());
      order_.pop_front();
    }
  }
}

std::optional<uint64_t> LaunchStreams::Of(uint32_t process,
                                          const schema::OwnedKernelTimeEvent& time) const {
  const auto it = streams_.find({process, schema::JoinKeyOf(time)});
  if (it == streams_.end()) return std::nullopt;
  return it->second;
}

}  // namespace cuflight::cli
