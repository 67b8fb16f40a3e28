// The injected library in an older userland: a Debian 11 root (glibc 2.31, from before glibc 2.34
// moved libpthread and libdl into libc), made by scripts/old-userland (scripts/setup --tests runs it).
// The real libcuflight_inject.so, loaded by the stand-in application with the stand-in driver and
// CUPTI (all three built to the same glibc floor, libinject/src/glibc_baseline.cc) inside that
// root (chroot, with the host's /proc bound in a mount namespace of the test's own), records
// every launch to the real collector outside it. The control: the same library linked without
// the floor does not load there, so the root does tell the two apart.
//
// Skips, saying why, where the root was not made or chroot and mount namespaces are not
// permitted (not root, a container without CAP_SYS_ADMIN).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "collector_test_util.h"
#include "cuflight/schema/decoder.h"
#include "subprocess.h"

namespace cuflight::inject::testing {
namespace {

namespace fs = std::filesystem;
using collector::testing::LogFiles;
using collector::testing::RunningCollector;
using collector::testing::TestOptions;
using collector::testing::WaitUntil;
using cuflight::testing::FindProgram;
using cuflight::testing::ProcessResult;
using cuflight::testing::RunProcess;
using test_support::DecodeLog;

// Where scripts/old-userland makes the root; CUFLIGHT_OLD_USERLAND names another.
fs::path RootDir() {
  const char* env = std::getenv("CUFLIGHT_OLD_USERLAND");
  return env != nullptr && *env != '\0' ? fs::path(env)
                                        : fs::path("/var/cache/cuflight/userland/bullseye");
}

size_t Count(const std::vector<schema::OwnedEvent>& events, schema::EventType type) {
  return static_cast<size_t>(std::count_if(
      events.begin(), events.end(), [type](const auto& e) { return schema::TypeOf(e) == type; }));
}

class OldUserland : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = RootDir();
    if (!fs::exists(root_ / ".cuflight-complete")) {
      GTEST_SKIP() << "no older userland at " << root_
                   << ": scripts/old-userland makes it (scripts/setup --tests runs it; it needs root, "
                      "debootstrap and Debian's archive)";
    }
    if (geteuid() != 0) GTEST_SKIP() << "chroot needs root";
    unshare_ = FindProgram("unshare");
    if (unshare_.empty()) GTEST_SKIP() << "no unshare (util-linux)";
    const ProcessResult probe = RunProcess(unshare_, {"--mount", "true"});
    if (probe.exit_code != 0) GTEST_SKIP() << "no mount namespace here: " << probe.err;

    // A directory inside the root for the binaries and the collector's socket and logs.
    std::string pattern = (root_ / "tmp" / "cuflight-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    work_ = pattern;
    inside_ = "/" + fs::relative(work_, root_).string();
    fs::create_directories(work_ / "lib");
    for (const char* file : {CUFLIGHT_INJECT_SO, CUFLIGHT_INJECT_UNPINNED_SO,
                             CUFLIGHT_FLOOR_LIBCUDA, CUFLIGHT_FLOOR_LIBCUPTI, CUFLIGHT_FLOOR_APP}) {
      fs::copy_file(file, work_ / "lib" / fs::path(file).filename(),
                    fs::copy_options::overwrite_existing);
    }
    setenv("LD_LIBRARY_PATH", (inside_ / "lib").c_str(), 1);
    setenv("CUFLIGHT_CUPTI_PATH",
           (inside_ / "lib" / fs::path(CUFLIGHT_FLOOR_LIBCUPTI).filename()).c_str(), 1);
    setenv("CUFLIGHT_FLUSH_MS", "10", 1);
    unsetenv("FAKE_CUPTI_MODE");
    unsetenv("CUFLIGHT_COLLECTOR_UID");
  }

  void TearDown() override {
    unsetenv("LD_LIBRARY_PATH");
    unsetenv("CUFLIGHT_CUPTI_PATH");
    unsetenv("CUFLIGHT_FLUSH_MS");
    unsetenv("CUFLIGHT_COLLECTOR");
    if (!work_.empty()) {
      std::error_code ignored;
      fs::remove_all(work_, ignored);
    }
  }

  // Runs `program args...` (paths as seen inside the root) chrooted into the root, with the
  // host's /proc bound over the root's in a private mount namespace.
  ProcessResult RunInRoot(const std::string& program, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {
        "--mount", "--propagation", "private", "/bin/sh", "-c",
        "mount --bind /proc \"$0/proc\" && exec chroot \"$0\" \"$@\"", root_.string(), program};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(unshare_, argv);
  }

  std::string Inside(const char* built) const {
    return (inside_ / "lib" / fs::path(built).filename()).string();
  }

  fs::path root_;
  fs::path work_;    // on the host
  fs::path inside_;  // the same directory as the chrooted process sees it
  std::string unshare_;
};

// The root is what it claims: its glibc, run as a program, says its release.
TEST_F(OldUserland, TheRootsGlibcIsOlderThan234) {
  const ProcessResult r = RunInRoot("/lib/x86_64-linux-gnu/libc.so.6", {});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  unsigned major = 0, minor = 0;
  const size_t at = r.out.find("release version ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "release version %u.%u", &major, &minor), 2) << r.out;
  EXPECT_EQ(major, 2u);
  EXPECT_LT(minor, 34u) << r.out;
}

// The control: linked against the build machine's glibc without the floor, the library asks for
// versions the root's glibc does not have, and the loader refuses it.
TEST_F(OldUserland, TheLibraryWithoutTheFloorDoesNotLoad) {
  const ProcessResult r =
      RunInRoot(Inside(CUFLIGHT_FLOOR_APP), {Inside(CUFLIGHT_INJECT_UNPINNED_SO), "3"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;  // fake_app: dlopen failed
  EXPECT_NE(r.out.find("dlopen failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GLIBC_2.3"), std::string::npos) << r.out;  // "version `GLIBC_2.3x' not found"
}

// The product: loads, subscribes, records every launch and ends the stream, one process in the
// old root, the real collector outside it.
TEST_F(OldUserland, TheLibraryRecordsEveryLaunch) {
  constexpr int kLaunches = 40;
  const collector::CollectorOptions options = TestOptions(work_);
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  setenv("CUFLIGHT_COLLECTOR", (inside_ / fs::relative(options.socket, work_)).c_str(), 1);

  const ProcessResult r = RunInRoot(Inside(CUFLIGHT_FLOOR_APP),
                                    {Inside(CUFLIGHT_INJECT_SO), std::to_string(kLaunches)});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("init=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fired=" + std::to_string(kLaunches)), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("cuflight: error"), std::string::npos) << r.err;

  std::vector<schema::OwnedEvent> events;
  ASSERT_TRUE(WaitUntil([&] {
    const std::vector<fs::path> files = LogFiles(options.log_dir);
    if (files.size() != 1) return false;
    events = DecodeLog(files[0]);
    return Count(events, schema::EventType::kProcessEnd) == 1;
  })) << r.err;
  running.Stop();
  EXPECT_EQ(Count(events, schema::EventType::kProcessStart), 1u);
  EXPECT_EQ(Count(events, schema::EventType::kKernel), static_cast<size_t>(kLaunches));
  EXPECT_EQ(running.stats().events_lost, 0u);
}

// An exception thrown and caught inside the library (a bad CUFLIGHT_INCLUDE: std::regex_error)
// unwinds there too. The unwinder linked into the library finds unwind tables through
// _dl_find_object, which glibc 2.31 lacks (glibc_baseline.cc answers it): unanswered, the throw
// would end the application in std::terminate.
TEST_F(OldUserland, AnExceptionInsideTheLibraryIsCaughtThere) {
  setenv("CUFLIGHT_INCLUDE", "(", 1);
  setenv("CUFLIGHT_COLLECTOR", (inside_ / "none.sock").c_str(), 1);
  const ProcessResult r =
      RunInRoot(Inside(CUFLIGHT_FLOOR_APP), {Inside(CUFLIGHT_INJECT_SO), "5"});
  unsetenv("CUFLIGHT_INCLUDE");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fired=5"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("CUFLIGHT_INCLUDE='(' is not a valid ECMAScript regular expression"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace cuflight::inject::testing
