// Newline framing: lines across chunk boundaries, over-long lines reported once and skipped, and
// the bound on what a connection holds.
#include "line_framer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cuflight::collector {
namespace {

struct Framed {
  std::vector<std::string> lines;
  int too_long = 0;
};

void FeedAll(LineFramer& framer, const std::vector<std::string>& chunks, Framed* out) {
  for (const std::string& chunk : chunks) {
    framer.Feed(
        chunk, [out](std::string_view line) { out->lines.emplace_back(line); },
        [out]() { ++out->too_long; });
  }
}

TEST(LineFramerTest, SplitsCompleteLinesAndKeepsTheTail) {
  LineFramer framer(16);
  Framed f;
  FeedAll(framer, {"ab\ncd\nef"}, &f);
  EXPECT_EQ(f.lines, (std::vector<std::string>{"ab\n", "cd\n"}));
  EXPECT_EQ(framer.buffered(), 2u);
  EXPECT_TRUE(framer.mid_line());
  FeedAll(framer, {"gh\n"}, &f);
  EXPECT_EQ(f.lines.back(), "efgh\n");
  EXPECT_EQ(framer.buffered(), 0u);
  EXPECT_FALSE(framer.mid_line());
}

TEST(LineFramerTest, ByteByByteGivesTheSameLines) {
  const std::string stream = "first line\n\nsecond\nthird one here\n";
  LineFramer framer(64);
  Framed f;
  for (char c : stream) FeedAll(framer, {std::string(1, c)}, &f);
  EXPECT_EQ(f.lines,
            (std::vector<std::string>{"first line\n", "\n", "second\n", "third one here\n"}));
  EXPECT_EQ(f.too_long, 0);
}

TEST(LineFramerTest, LineOfExactlyTheMaximumIsKept) {
  LineFramer framer(8);
  Framed f;
  FeedAll(framer, {"12345678\n", "1234", "5678\n"}, &f);
  EXPECT_EQ(f.lines, (std::vector<std::string>{"12345678\n", "12345678\n"}));
  EXPECT_EQ(f.too_long, 0);
}

TEST(LineFramerTest, OverLongLineInOneChunkIsReportedOnceAndSkipped) {
  LineFramer framer(8);
  Framed f;
  FeedAll(framer, {"ok\n123456789\nok2\n"}, &f);
  EXPECT_EQ(f.lines, (std::vector<std::string>{"ok\n", "ok2\n"}));
  EXPECT_EQ(f.too_long, 1);
}

TEST(LineFramerTest, OverLongLineAcrossChunksHoldsNoMoreThanTheMaximum) {
  LineFramer framer(8);
  Framed f;
  FeedAll(framer, {"ok\n12345"}, &f);
  EXPECT_EQ(framer.buffered(), 5u);
  FeedAll(framer, {"6789"}, &f);  // 9 bytes: known too long, nothing more is held
  EXPECT_EQ(f.too_long, 1);
  EXPECT_EQ(framer.buffered(), 0u);
  EXPECT_TRUE(framer.discarding());
  for (int i = 0; i < 1000; ++i) FeedAll(framer, {std::string(100, 'x')}, &f);
  EXPECT_EQ(framer.buffered(), 0u);
  EXPECT_EQ(f.too_long, 1);
  FeedAll(framer, {"yyy\nafter\n"}, &f);
  EXPECT_FALSE(framer.discarding());
  EXPECT_EQ(f.lines, (std::vector<std::string>{"ok\n", "after\n"}));
  EXPECT_EQ(f.too_long, 1);
}

TEST(LineFramerTest, OverLongTailOfAChunkStartsDiscarding) {
  LineFramer framer(4);
  Framed f;
  FeedAll(framer, {"a\nbcdefgh"}, &f);
  EXPECT_EQ(f.too_long, 1);
  EXPECT_EQ(framer.buffered(), 0u);
  FeedAll(framer, {"ij\nk\n"}, &f);
  EXPECT_EQ(f.lines, (std::vector<std::string>{"a\n", "k\n"}));
  EXPECT_EQ(f.too_long, 1);
}

TEST(LineFramerTest, TrickledOverLongLineIsCaughtAtTheBound) {
  LineFramer framer(10);
  Framed f;
  for (int i = 0; i < 10; ++i) FeedAll(framer, {"z"}, &f);
  EXPECT_EQ(framer.buffered(), 10u);
  EXPECT_EQ(f.too_long, 0);
  FeedAll(framer, {"z"}, &f);
  EXPECT_EQ(f.too_long, 1);
  EXPECT_EQ(framer.buffered(), 0u);
}

}  // namespace
}  // namespace cuflight::collector
