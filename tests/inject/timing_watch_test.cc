// TimingWatch: when kernel timing is said to have stopped, on hand-made timelines.
#include "timing_watch.h"

#include <gtest/gtest.h>

namespace cuflight::inject {
namespace {

constexpr int64_t kMs = 1'000'000;

TimingWatch::Options Small() {
  TimingWatch::Options o;
  o.silence_ns = 100 * kMs;
  o.min_launches = 4;
  return o;
}

TEST(TimingWatch, RecordsThatKeepComingNeverStopIt) {
  TimingWatch w(Small());
  // A launch every 10 ms for 10 s, each timed within the next step.
  for (int64_t t = 0; t < 10'000 * kMs; t += 10 * kMs) {
    w.OnLaunch(t);
    EXPECT_FALSE(w.Check(t + 5 * kMs));
    EXPECT_FALSE(w.OnRecord());
  }
  EXPECT_EQ(w.stop(), TimingStop::kNone);
  EXPECT_EQ(w.stopped_launches(), 0u);
}

TEST(TimingWatch, StopsOnlyWithEnoughLaunchesAndEnoughSilence) {
  TimingWatch w(Small());
  w.OnLaunch(0);
  w.OnRecord();
  // Three launches without a record, 1 s of silence: too few launches (a long kernel and a few
  // queued behind it look like this).
  w.OnLaunch(10 * kMs);
  w.OnLaunch(20 * kMs);
  w.OnLaunch(30 * kMs);
  EXPECT_FALSE(w.Check(1000 * kMs));
  // The fourth: enough launches; silence counts from the first of them (10 ms), so at 109 ms
  // not yet, at 110 ms yes.
  w.OnLaunch(40 * kMs);
  EXPECT_FALSE(w.Check(109 * kMs));
  EXPECT_TRUE(w.Check(110 * kMs));
  EXPECT_EQ(w.stop(), TimingStop::kRecordsStopped);
  EXPECT_EQ(w.silence_at_stop_ns(), 100 * kMs);
  // The four launches that waited in vain count, and every later one.
  EXPECT_EQ(w.stopped_launches(), 4u);
  w.OnLaunch(200 * kMs);
  w.OnLaunch(300 * kMs);
  EXPECT_EQ(w.stopped_launches(), 6u);
  EXPECT_FALSE(w.Check(400 * kMs));  // said once
}

TEST(TimingWatch, ARecordEndsTheStopAndItsCount) {
  TimingWatch w(Small());
  for (int i = 0; i < 5; ++i) w.OnLaunch(i * kMs);
  ASSERT_TRUE(w.Check(200 * kMs));
  EXPECT_EQ(w.stopped_launches(), 5u);
  // Records again: the launches since were slow, not untimed.
  EXPECT_TRUE(w.OnRecord());
  EXPECT_EQ(w.stop(), TimingStop::kNone);
  EXPECT_EQ(w.stopped_launches(), 0u);
  EXPECT_FALSE(w.OnRecord());  // said once
  // And it can stop again.
  for (int i = 0; i < 4; ++i) w.OnLaunch((300 + i) * kMs);
  EXPECT_TRUE(w.Check(500 * kMs));
  EXPECT_EQ(w.stopped_launches(), 4u);
}

TEST(TimingWatch, UnavailableCountsEveryLaunchFromTheStart) {
  TimingWatch w(Small());
  w.SetUnavailable();
  EXPECT_EQ(w.stop(), TimingStop::kUnavailable);
  for (int i = 0; i < 3; ++i) w.OnLaunch(i * kMs);
  EXPECT_EQ(w.stopped_launches(), 3u);
  EXPECT_FALSE(w.Check(10'000 * kMs));  // nothing new to say
  EXPECT_FALSE(w.OnRecord());
  EXPECT_EQ(w.stop(), TimingStop::kUnavailable);
}

}  // namespace
}  // namespace cuflight::inject
