// The exporter started from a cursor that names a position its stream never had (exporter.h,
// design note 2): past the stream's end, past a closed segment's end, before the segments
// retention kept, inside a line, or a stream that is not there. A damaged or foreign cursor
// costs duplicates (the sink drops them by cuflight.stream and cuflight.seq) or a counted
// skip, never a silent loss of what the log holds; each is one warning line.
//
// The stream: segment 1 holds process_start (seq 0), its device (1) and api_errors 2 and 3;
// segment 2 api_errors 4 and 5; the active file (segment 3) api_errors 6 and 7. The api_errors
// are what the tests count (each is a record of its own by default, fleet.md "Volume").
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "cuflight/exporter/exporter.h"
#include "cuflight/schema/log_layout.h"
#include "otlp_receiver.h"
#include "report_test_events.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace cuflight::exporter::testing {
namespace {

namespace fs = std::filesystem;
using report::testing::Line;
using test_support::TempDir;

constexpr int32_t kPid = 4301;
constexpr int64_t kStartNs = 1'795'900'000'000'000'000;  // 2026-11-29

class ExporterCursorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path date = logs() / schema::StartDate(kStartNs);
    fs::create_directories(date);
    base_ = schema::StreamBaseName("node1", "/opt/app/bin/serve", kPid, kStartNs);
    key_ = schema::StartDate(kStartNs) + "/" + base_;
    std::string one = Line(report::testing::Start(kPid, 0, kStartNs, "/opt/app/bin/serve"));
    one += Line(report::testing::Device(kPid, 1, 0, "NVIDIA H100"));
    one += Error(2) + Error(3);
    seg2_line4_ = Error(4);
    Write(date / schema::SegmentFileName(base_, 1, false), one);
    Write(date / schema::SegmentFileName(base_, 2, false), seg2_line4_ + Error(5));
    Write(date / schema::ActiveFileName(base_), Error(6) + Error(7));
  }

  static std::string Error(uint64_t seq) {
    return Line(report::testing::ApiError(kPid, seq, "cuLaunchKernel", "CUDA_ERROR_INVALID_VALUE",
                                          1, {seq}));
  }
  static void Write(const fs::path& file, const std::string& text) {
    std::ofstream(file, std::ios::binary) << text;
  }
  fs::path logs() const { return dir_.path() / "logs"; }
  fs::path cursor() const { return dir_.path() / "cursor.json"; }
  void WriteCursor(uint64_t segment, uint64_t offset, const std::string& extra = "") const {
    std::ofstream(cursor()) << "{\"version\":1,\"streams\":{\"" << key_
                            << "\":{\"segment\":" << segment << ",\"offset\":" << offset << "}"
                            << extra << "}}";
    // The collector's own file, whatever the umask (a file every user may write is refused).
    fs::permissions(cursor(), fs::perms::owner_read | fs::perms::owner_write);
  }

  // Exports until api_error 7 arrives; the api_errors' seqs received, the warnings logged, the
  // lines skipped.
  struct Exported {
    std::multiset<uint64_t> errors;
    std::string log;
    uint64_t skipped = 0;
    uint64_t missed = 0;
  };
  Exported Export() const {
    OtlpReceiver receiver;
    ExportOptions options;
    options.endpoint = receiver.endpoint() + "/v1/logs";
    options.scan_interval = std::chrono::milliseconds(20);
    options.resource_wait = std::chrono::milliseconds(0);
    options.cursor_file = cursor();
    std::ostringstream text;
    auto logger = std::make_shared<spdlog::logger>(
        "otlp", std::make_shared<spdlog::sinks::ostream_sink_mt>(text));
    ExportMetrics metrics;
    std::string error;
    auto exp = Exporter::Start(options, logs(), std::nullopt, &metrics, logger, &error);
    EXPECT_NE(exp, nullptr) << error;
    Exported out;
    if (!exp) return out;
    const auto errors = [&] {
      std::multiset<uint64_t> seqs;
      for (const ReceivedRecord& r : receiver.Accepted()) {
        if (r.event_name == "cuflight.api_error") seqs.insert(r.seq());
      }
      return seqs;
    };
    EXPECT_TRUE(
        test_support::WaitUntil([&] { return errors().count(7) > 0; }, std::chrono::seconds(30)));
    exp->Stop();
    logger->flush();
    out.errors = errors();
    out.log = text.str();
    out.skipped = metrics.Get().lines_skipped;
    out.missed = metrics.Get().segments_missed;
    return out;
  }

  TempDir dir_;
  std::string base_;
  std::string key_;
  std::string seg2_line4_;
};

// The cursor's own position (the end of segment 2): only what follows is sent.
TEST_F(ExporterCursorTest, ItsOwnPositionSendsWhatFollows) {
  WriteCursor(2, 2 * seg2_line4_.size());
  const Exported e = Export();
  EXPECT_EQ(e.errors, (std::multiset<uint64_t>{6, 7}));
  EXPECT_EQ(e.log.find("[warning]"), std::string::npos) << e.log;
}

// Segment 1000 of a stream whose active file is segment 3: taken as is, the active file was read
// as segment 1000 and segments 1 and 2 never. The stream is read again from its first segment.
TEST_F(ExporterCursorTest, ASegmentPastTheStreamsEndReadsItAgain) {
  WriteCursor(1000, 0);
  const Exported e = Export();
  EXPECT_EQ(e.errors, (std::multiset<uint64_t>{2, 3, 4, 5, 6, 7}));
  EXPECT_NE(e.log.find(key_ + ": the cursor's segment 1000 is past the stream's last (3); "
                              "reading it again from segment 1"),
            std::string::npos)
      << e.log;
}

// An offset beyond a closed segment's size (2^40 in segment 1): read again from its start, as an
// active file shorter than the position is.
TEST_F(ExporterCursorTest, AnOffsetPastAClosedSegmentsEndReadsItAgain) {
  WriteCursor(1, uint64_t{1} << 40);
  const Exported e = Export();
  EXPECT_EQ(e.errors, (std::multiset<uint64_t>{2, 3, 4, 5, 6, 7}));
  EXPECT_NE(e.log.find(key_ + " segment 1 is shorter than the position exported; reading it "
                              "again"),
            std::string::npos)
      << e.log;
}

// Before the start: segment 1 was removed by retention before it was exported. Counted, named,
// and the export goes on with segment 2.
TEST_F(ExporterCursorTest, ASegmentRetentionRemovedIsCountedMissed) {
  fs::remove(logs() / schema::StartDate(kStartNs) / schema::SegmentFileName(base_, 1, false));
  WriteCursor(1, 0);
  const Exported e = Export();
  EXPECT_EQ(e.errors, (std::multiset<uint64_t>{4, 5, 6, 7}));
  EXPECT_EQ(e.missed, 1u);
  EXPECT_NE(e.log.find(key_ + " segment 1 was removed before it was exported"), std::string::npos)
      << e.log;
}

// Inside a line (3 bytes before the end of api_error 4's line): the rest of that line is no event;
// it is counted skipped, and what follows is sent.
TEST_F(ExporterCursorTest, AnOffsetInsideALineSkipsItsRestCounted) {
  WriteCursor(2, seg2_line4_.size() - 3);
  const Exported e = Export();
  EXPECT_EQ(e.errors, (std::multiset<uint64_t>{5, 6, 7}));
  EXPECT_EQ(e.skipped, 1u);
}

// A stream the log directory does not hold ("../../etc" or any other name) is forgotten: nothing
// is read for it, and the next cursor saved leaves it out.
TEST_F(ExporterCursorTest, AStreamThatIsNotThereIsForgotten) {
  WriteCursor(2, 2 * seg2_line4_.size(),
              ",\"../../etc/passwd\":{\"segment\":1,\"offset\":0},"
              "\"2026-11-29/ghost\":{\"segment\":7,\"offset\":99}");
  const Exported e = Export();
  EXPECT_EQ(e.errors, (std::multiset<uint64_t>{6, 7}));
  std::ifstream in(cursor());
  std::string saved;
  std::getline(in, saved);
  EXPECT_NE(saved.find(key_), std::string::npos) << saved;
  EXPECT_EQ(saved.find("ghost"), std::string::npos) << saved;
  EXPECT_EQ(saved.find("passwd"), std::string::npos) << saved;
}

}  // namespace
}  // namespace cuflight::exporter::testing
