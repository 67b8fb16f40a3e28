#include "tail_command.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <map>
#include <new>
#include <string>
#include <system_error>

#include "arg_parse.h"
#include "cuflight/report/build_report.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "event_filter.h"
#include "event_text.h"
#include "log_dir_locator.h"
#include "log_follower.h"
#include "stalled_now.h"
#include "usage_error.h"

namespace cuflight::cli {
namespace {

// Notes about lines that did not decode, at most this many (then one saying more were skipped).
constexpr int kMaxNotes = 20;

// Blocks SIGINT and SIGTERM in the calling thread for the object's life; Wait() sleeps until one
// arrives or the timeout passes.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~StopSignals() {
    const timespec zero{};
    while (sigtimedwait(&set_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // True when a stop signal arrived within `ms`.
  bool Wait(int64_t ms) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(ms / 1000);
    ts.tv_nsec = static_cast<long>((ms % 1000) * 1'000'000);
    for (;;) {
      const int signo = sigtimedwait(&set_, nullptr, &ts);
      if (signo > 0) return true;
      if (errno != EINTR) return false;
    }
  }

 private:
  sigset_t set_{};
  sigset_t old_{};
};

}  // namespace

TailCommand::TailCommand(CLI::App* parent) {
  app_ = parent->add_subcommand(
      "tail", "Follow a collector's logs live: one line per new event, until Ctrl-C");
  app_->footer(
      "Examples:\n"
      "  cuflight tail\n"
      "  cuflight tail --log-dir /var/log/cuflight\n"
      "  cuflight tail --kernel 'gemm' --limiter registers\n"
      "  cuflight tail --pid 4242 --json | jq .\n"
      "Exit status: 0 after Ctrl-C (SIGINT) or SIGTERM; 2 on bad input.");
  app_->add_option("--log-dir", log_dir_,
                   "The log directory to follow: a collector's --log-dir or a cuflight run --out "
                   "(default: the one a collector is writing now among the latest cuflight run's "
                   "output, the local collector's default and /var/log/cuflight, else the first "
                   "of them that exists)")
      ->type_name("DIR");
  app_->add_option("--kernel", kernel_,
                   "Only kernels whose name contains a match of this ECMAScript regex (and their "
                   "kernel_time events)")
      ->type_name("REGEX");
  app_->add_option("--pid", pids_, "Only events of this process (repeatable)")->type_name("PID");
  app_->add_option("--limiter", limiter_,
                   "Only kernels whose occupancy is limited by this resource: registers (regs), "
                   "shared_mem (smem), warps, blocks, barriers, cluster, as cuflight report takes")
      ->type_name("NAME");
  app_->add_flag("--json", json_,
                 "Print each event as the stored JSON line (a launch as the whole kernel event "
                 "it stands for; kernel_config lines are not printed)");
  app_->add_flag("--from-start", from_start_,
                 "Also print the events already in the files present at the start");
  app_->add_option("--interval", interval_,
                   "How often the files are looked at, milliseconds (default 200)")
      ->type_name("MS");
}

bool TailCommand::Selected() const { return app_->parsed(); }

int TailCommand::Run(std::ostream& out, std::ostream& err) const {
  const int64_t interval = cli::ParseInteger("--interval", interval_, {10, 60'000, "milliseconds"});
  EventFilter filter(kernel_, pids_, limiter_);
  std::filesystem::path dir(log_dir_);
  std::string why;
  if (log_dir_.empty()) {
    LocatedLogDir located = LocateLogDir();
    if (located.dir.empty()) throw cli::UsageError(located.why);
    dir = std::move(located.dir);
    why = " (" + located.why + "; --log-dir DIR for another)";
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw cli::UsageError("--log-dir " + dir.string() + " is not a directory");
  }

  StopSignals stop;
  // Stalled processes first: what the ends of the active files say now.
  std::vector<StalledProcess> stalled = FindStalledNow(dir);
  stalled.erase(std::remove_if(stalled.begin(), stalled.end(),
                               [&filter](const StalledProcess& s) {
                                 // A stall's process matters to no filter (--pid takes its pid).
                                 return !filter.Accept(schema::OwnedEvent(s.event), 0);
                               }),
                stalled.end());
  if (!stalled.empty()) {
    err << "cuflight tail: " << stalled.size() << " process" << (stalled.size() == 1 ? "" : "es")
        << " stalled now (the latest stall event of each):" << std::endl;
    for (const StalledProcess& s : stalled) {
      out << (json_ ? s.line : EventText(schema::OwnedEvent(s.event))) << '\n';
    }
    out.flush();
  }
  LogFollower follower(dir, from_start_);
  int notes = 0;
  uint64_t skipped = 0;
  LaunchStreams streams;
  // Which process sent each event, told apart as the report's model does (report::ProcessKeys:
  // the key the file's name states, else the latest process_start of the pid), numbered for the
  // filter and the streams: processes sharing a pid (the pid 1 of two containers, a reused pid)
  // never take each other's kernel_times or streams.
  report::ProcessKeys process_keys;
  std::filesystem::path keys_file;  // the file process_keys was last set to
  std::map<report::ProcessKey, uint32_t> process_numbers;
  // Interned configurations (docs/protocol.md): each file is a sequence, its kernel_config
  // descriptions kept here (not printed) and each launch printed as the kernel event it stands
  // for. A file followed from its end has its descriptions before that point read when a launch
  // first names one it has not seen. Keyed by the path a file was found under: the file a
  // rotation renamed and the new active file share it, which is harmless, their configuration ids
  // being one process's, never reused.
  std::map<std::filesystem::path, schema::ConfigExpander> configs;
  std::string expanded(64 << 10, '\0');
  auto feed = [](schema::ConfigExpander* table, schema::OwnedEvent* event) {
    try {
      return table->Feed(event);
    } catch (const std::bad_alloc&) {
      return schema::ExpandVerdict::kConfigFlood;
    }
  };
  auto on_line = [&](std::string_view line, const std::filesystem::path& file) {
    schema::DecodeResult d = schema::Decode(line);
    if (!d.ok()) {
      if (d.reason == schema::Reason::kUnknownType) return;  // a newer producer's type
      ++skipped;
      if (++notes <= kMaxNotes) {
        err << "cuflight tail: note: skipped a line of " << file.string() << ": " << d.message
            << '\n';
      }
      return;
    }
    schema::ConfigExpander& table = configs[file];
    schema::ExpandVerdict verdict = feed(&table, &d.event);
    if (verdict == schema::ExpandVerdict::kUnknownConfig &&
        follower.ReadSkipped(file, [&](std::string_view before) {
          if (before.find("\"kernel_config\"") == std::string_view::npos) return;
          schema::DecodeResult c = schema::Decode(before);
          if (c.ok() && std::holds_alternative<schema::OwnedKernelConfigEvent>(c.event)) {
            feed(&table, &c.event);
          }
        }) > 0) {
      verdict = feed(&table, &d.event);
    }
    if (verdict == schema::ExpandVerdict::kDescribed) return;
    if (schema::Refused(verdict)) {
      ++skipped;
      if (++notes <= kMaxNotes) {
        err << "cuflight tail: note: skipped a line of " << file.string() << ": "
            << schema::ExpandVerdictName(verdict) << '\n';
      }
      return;
    }
    if (file != keys_file) {
      keys_file = file;
      process_keys.SetFile(&keys_file);
    }
    if (const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&d.event)) {
      process_keys.Note(*start);
    }
    const report::ProcessKey& key = process_keys.KeyOf(schema::HeaderOf(d.event).pid);
    const uint32_t process =
        process_numbers.try_emplace(key, static_cast<uint32_t>(process_numbers.size()))
            .first->second;
    if (!filter.Accept(d.event, process)) return;
    if (json_) {
      if (verdict == schema::ExpandVerdict::kExpanded) {
        const size_t n = schema::Encode(d.event, expanded.data(), expanded.size());
        if (n > 0) out << std::string_view(expanded.data(), n);  // ends in '\n'
        return;
      }
      out << line << '\n';
      return;
    }
    std::optional<uint64_t> launch_stream;
    if (const auto* k = std::get_if<schema::OwnedKernelEvent>(&d.event)) {
      streams.Remember(process, *k);
    } else if (const auto* t = std::get_if<schema::OwnedKernelTimeEvent>(&d.event)) {
      launch_stream = streams.Of(process, *t);
    }
    out << EventText(d.event, launch_stream) << '\n';
  };
  if (follower.Poll(on_line) > 0) out.flush();
  err << "cuflight tail: following " << dir.string() << why << ", " << follower.files()
      << (follower.files() == 1 ? " file" : " files") << "; Ctrl-C stops" << std::endl;
  while (!stop.Wait(interval)) {
    if (follower.Poll(on_line) > 0) out.flush();
  }
  if (notes > kMaxNotes) {
    err << "cuflight tail: note: " << skipped - kMaxNotes << " more lines skipped\n";
  }
  out.flush();
  return cli::kExitOk;
}

}  // namespace cuflight::cli
