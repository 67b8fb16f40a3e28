// bench/log_gen's interned form (log_gen.h, 6.): the same launches as the whole form, read back
// by the log reader, every file alone.
//
// The whole form is the reference: the generator wrote its kernel events before this option
// existed, and the report benchmarks compare the two. The interned log's seqs are its own (a
// description takes a seq of its producer's, as a producer's preamble line does), so events are
// compared with their seqs aside, and the seqs checked to rise. The same holds under the sampled
// timing policy (log_gen.h, 3a), whose launches say `timing_window` and only some of them are
// timed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/schema/events.h"
#include "log_gen.h"
#include "log_gen_logs.h"
#include "temp_dir.h"

namespace cuflight::bench {
namespace {

namespace fs = std::filesystem;

LogSpec Spec(bool intern) {
  LogSpec spec;
  spec.launches = 20'000;
  spec.kernels = 5;
  spec.streams = 4;
  spec.api_error_every = 7'000;
  spec.stall_every = 9'000;
  spec.rotate_bytes = intern ? 1 << 20 : 4 << 20;  // several files either way
  spec.intern = intern;
  return spec;
}

Log Make(const fs::path& dir, bool intern) { return MakeLog(dir, Spec(intern)); }

// `interned`, expanded by the reader, is `whole` event for event (seqs, and the counts of seqs,
// aside), and each of its files reads alone.
void ExpectInternedIsWhole(const Log& whole, const Log& interned) {
  ASSERT_GT(interned.totals.files.size(), 3u);
  EXPECT_EQ(whole.totals.launches, 20'000u);
  EXPECT_EQ(interned.totals.launches, 20'000u);
  EXPECT_EQ(whole.totals.descriptions, 0u);
  // At least Spec's 5 kernels x 4 streams = 20 configurations, each described in the first file
  // that launches it, and again in every later file that does.
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
    // process_start's config, where written (log_gen.h, 3a), says the form: intern_configs.
    for (schema::OwnedEvent* x : {&a, &b}) {
      if (auto* e = std::get_if<schema::OwnedProcessStartEvent>(x)) {
        std::erase_if(e->config, [](const auto& kv) { return kv.first == "intern_configs"; });
      }
    }
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

TEST(LogGenInternedTest, InternedLogReadsBackAsTheWholeOneEveryFileAlone) {
  test_support::TempDir dir;
  const Log whole = Make(dir.path() / "whole", false);
  const Log interned = Make(dir.path() / "interned", true);
  ExpectInternedIsWhole(whole, interned);
}

// Under the sampled timing policy with windows short enough for the 0.4 s of 20,000 launches to
// hold several of each kind: 2 ms every 100 ms (the shortest period CUFLIGHT_TIMING_PERIOD_MS
// allows), and 200 kernels (600 configurations) so that many are first launched after the
// start's window and open one of their own.
TEST(LogGenInternedTest, SampledInternedLogReadsBackAsTheSampledWholeOne) {
  test_support::TempDir dir;
  LogSpec whole_spec = Spec(false);
  LogSpec interned_spec = Spec(true);
  for (LogSpec* spec : {&whole_spec, &interned_spec}) {
    spec->timing = schema::TimingPolicy::kSampled;
    spec->timing_window_ms = 2;
    spec->timing_period_ms = 100;
    spec->kernels = 200;
  }
  const Log whole = MakeLog(dir.path() / "whole", whole_spec);
  const Log interned = MakeLog(dir.path() / "interned", interned_spec);
  ExpectInternedIsWhole(whole, interned);
  // Some launches in windows, most not; exactly those timed, in both forms.
  EXPECT_GT(whole.totals.in_window, 1'000u);
  EXPECT_LT(whole.totals.in_window, 10'000u);
  EXPECT_EQ(whole.totals.timed, whole.totals.in_window);
  EXPECT_EQ(interned.totals.timed, whole.totals.timed);
  EXPECT_EQ(interned.totals.timing_windows, whole.totals.timing_windows);
  size_t in_window = 0;
  for (const auto& k : EventsOf<schema::OwnedKernelEvent>(interned)) {
    ASSERT_TRUE(k.timing_window.has_value()) << k.correlation_id;
    in_window += *k.timing_window ? 1 : 0;
  }
  EXPECT_EQ(in_window, whole.totals.in_window);
  // The one member the forms differ in: process_start's config says which it is.
  const auto intern_configs = [](const Log& log) {
    const auto starts = EventsOf<schema::OwnedProcessStartEvent>(log);
    for (const auto& [key, value] : starts.at(0).config) {
      if (key == "intern_configs") return value;
    }
    return std::string("absent");
  };
  EXPECT_EQ(intern_configs(whole), "false");
  EXPECT_EQ(intern_configs(interned), "true");
}

}  // namespace
}  // namespace cuflight::bench
