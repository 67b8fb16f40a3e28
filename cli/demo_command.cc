#include "demo_command.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "app.h"
#include "log_gen.h"
#include "usage_error.h"

namespace cuflight::cli {
namespace {

namespace fs = std::filesystem;

// A job small enough to write and report in a few seconds (docs/performance.md), large enough
// that every part of the review has something to show: 4 ranks x 10,000 launches of 12 kernels
// on 4 streams, a failed cuLaunchKernel every 3,000 launches, a stall report every 9,000, and
// rank 0 crashed (SIGSEGV) where the others ended. Segments of 4 MiB compressed with zstd, as the
// collector writes them, keep the logs at a few MB.
bench::LogSpec DemoSpec() {
  bench::LogSpec spec;
  spec.launches = 10'000;
  spec.processes = 4;
  spec.streams = 4;
  spec.kernels = 12;
  spec.api_error_every = 3'000;
  spec.stall_every = 9'000;
  spec.crash_count = 1;
  spec.rotate_bytes = 4 << 20;
  return spec;
}

// A new private directory under $TMPDIR (else /tmp); "" with *error on failure.
std::string MakeTempDir(std::string* error) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = fmt::format("{}/cuflight-demo-XXXXXX", tmp != nullptr && *tmp ? tmp : "/tmp");
  if (mkdtemp(templ.data()) == nullptr) {
    *error = fmt::format("cannot make a directory like {}: {}", templ, std::strerror(errno));
    return "";
  }
  return templ;
}

int Cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        DeviceQuery& device_query) {
  std::vector<const char*> argv = {"cuflight"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return RunCli(static_cast<int>(argv.size()), argv.data(), out, err, device_query);
}

}  // namespace

DemoCommand::DemoCommand(CLI::App* parent) {
  app_ = parent->add_subcommand(
      "demo",
      "See the review without a GPU: write a realistic recording (a generated 4-rank training "
      "job on H100s, one rank crashed) and print its report");
  app_->add_option("--dir", dir_,
                   "Write the logs and report.html here (a new or empty directory; default: a "
                   "new directory under $TMPDIR or /tmp)")
      ->type_name("DIR");
  app_->add_flag("--html-only", html_only_,
                 "Write report.html but do not print the terminal report");
  app_->footer(
      "The recording is generated, not measured: kernel names, launch shapes and timings are "
      "made up; occupancy and what-ifs are the occupancy engine's for an H100 SXM.");
}

bool DemoCommand::Selected() const { return app_->parsed(); }

int DemoCommand::Run(std::ostream& out, std::ostream& err, DeviceQuery& device_query) const {
  std::string dir = dir_;
  std::string error;
  if (dir.empty()) {
    dir = MakeTempDir(&error);
    if (dir.empty()) {
      err << "cuflight demo: " << error << '\n';
      return kExitFailure;
    }
  } else {
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
      throw UsageError(fmt::format(
          "--dir {} exists and is not empty: give a new or empty directory (the demo's logs must "
          "not mix with others)",
          dir));
    }
  }
  const fs::path logs = fs::path(dir) / "logs";
  bench::LogTotals totals;
  if (!bench::WriteLogs(logs, DemoSpec(), &totals, &error)) {
    err << "cuflight demo: " << error << '\n';
    return kExitFailure;
  }
  const std::string html = (fs::path(dir) / "report.html").string();
  const int html_status = Cli({"report", logs.string(), "--html", html}, out, err, device_query);
  if (html_status != kExitOk) return html_status;
  out << fmt::format(
      "cuflight demo: a generated recording of a 4-rank training job on H100s ({} launches, {} "
      "failed launches, {} stall reports, rank 0 crashed): no GPU was used.\n"
      "  logs:   {}\n  review: {} (open it in a browser)\n\n",
      totals.launches, totals.api_errors, totals.stalls, logs.string(), html);
  if (!html_only_) {
    const int status = Cli({"report", logs.string()}, out, err, device_query);
    if (status != kExitOk) return status;
  }
  out << fmt::format(
      "\nnext:\n"
      "  cuflight report {0} --pid 4000      the crashed rank alone\n"
      "  cuflight export --perfetto demo.pftrace {0}      a timeline for ui.perfetto.dev\n"
      "  cuflight occupancy --device h100 --regs 168 --static-smem 45056      every block size\n"
      "  cuflight run -- python train.py      record your own program (needs a GPU)\n",
      logs.string());
  return kExitOk;
}

}  // namespace cuflight::cli
