// bench/log_gen's interned form (log_gen.h, 6.): the same launches as the whole form, read back
// by the log reader, every file alone.
//
// The whole form is the reference: the generator wrote its kernel events before this option
// existed, and the report benchmarks compare the two. The interned log's seqs are its own (a
// description takes a seq of its producer's, as a producer's preamble line does), so events are
// compared with their seqs aside, and the seqs checked to rise.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/schema/events.h"
#include "log_gen.h"
#include "temp_dir.h"

namespace cuflight::bench {
namespace {

namespace fs = std::filesystem;

struct Log {
  LogTotals totals;
  std::vector<schema::OwnedEvent> events;
  logread::ReadSummary summary;
};

Log Make(const fs::path& dir, bool intern) {
  LogSpec spec;
  spec.launches = 20'000;
  spec.kernels = 5;
  spec.streams = 4;
  spec.api_error_every = 7'000;
  spec.stall_every = 9'000;
  spec.rotate_bytes = intern ? 1 << 20 : 4 << 20;  // several files either way
  spec.intern = intern;
  Log log;
  std::string error;
  EXPECT_TRUE(WriteLogs(dir, spec, &log.totals, &error)) << error;
  logread::ReadOptions sequential;
  sequential.sequential = true;
  EXPECT_TRUE(logread::ReadLogFiles(
      log.totals.files,
      [&](const schema::OwnedEvent& e, const logread::Origin&) { log.events.push_back(e); },
      sequential, &log.summary, &error))
      << error;
  return log;
}

TEST(LogGenInternedTest, InternedLogReadsBackAsTheWholeOneEveryFileAlone) {
  test_support::TempDir dir;
  const Log whole = Make(dir.path() / "whole", false);
  const Log interned = Make(dir.path() / "interned", true);
  ASSERT_GT(interned.totals.files.size(), 3u);
  EXPECT_EQ(whole.totals.launches, 20'000u);
  EXPECT_EQ(interned.totals.launches, 20'000u);
  EXPECT_EQ(whole.totals.descriptions, 0u);
  // 5 kernels x 4 streams = 20 configurations, each described in the first file that launches
  // it, and again in every later file that does.
  EXPECT_GE(interned.totals.descriptions, 20u);
  EXPECT_EQ(interned.totals.events, whole.totals.events + interned.totals.descriptions);
  EXPECT_EQ(interned.summary.rejected_lines, 0u);
  EXPECT_EQ(interned.summary.events, whole.summary.events);

  ASSERT_EQ(interned.events.size(), whole.events.size());
  uint64_t last_seq = 0;
  size_t kernels = 0;
  for (size_t i = 0; i < whole.events.size(); ++i) {
    schema::OwnedEvent a = whole.events[i];
    schema::OwnedEvent b = interned.events[i];
    const uint64_t seq = schema::HeaderOf(b).seq;
    if (i > 0) {
      EXPECT_GT(seq, last_seq) << "event " << i;
    }
    last_seq = seq;
    std::visit([](auto& e) { e.header.seq = 0; }, a);
    std::visit([](auto& e) { e.header.seq = 0; }, b);
    // Events that name a seq (process_end's `emitted`, the stats' count) count the descriptions.
    if (auto* e = std::get_if<schema::OwnedProcessEndEvent>(&b)) e->emitted = 0;
    if (auto* e = std::get_if<schema::OwnedProcessEndEvent>(&a)) e->emitted = 0;
    if (auto* e = std::get_if<schema::OwnedStatsEvent>(&b)) e->emitted = 0;
    if (auto* e = std::get_if<schema::OwnedStatsEvent>(&a)) e->emitted = 0;
    ASSERT_EQ(a, b) << "event " << i;
    kernels += std::holds_alternative<schema::OwnedKernelEvent>(a) ? 1 : 0;
  }
  EXPECT_EQ(kernels, 20'000u);

  // Every interned file alone: no launch it cannot expand.
  for (const fs::path& file : interned.totals.files) {
    logread::ReadSummary summary;
    std::string error;
    ASSERT_TRUE(logread::ReadLogFile(
        file, [](const schema::OwnedEvent&, const logread::Origin&) {}, &summary, &error))
        << error;
    EXPECT_EQ(summary.rejected_lines, 0u) << file;
    EXPECT_GT(summary.events, 0u) << file;
  }
}

}  // namespace
}  // namespace cuflight::bench
