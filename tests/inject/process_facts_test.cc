// The process's identity facts (instance id, pid namespace) and the bound on its process_start
// line: a long argv or exe is cut with a marker and named in `truncated`, never the whole event.
#include "process_facts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <set>
#include <string>
#include <variant>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"

namespace cuflight::inject {
namespace {

constexpr std::string_view kMarker = "...[truncated]";

// The process_start line of `facts` with a realistic header, encoded into exactly
// kMaxProcessStartBytes: empty when it does not fit.
std::string LineOf(const ProcessFacts& facts) {
  const ProcessStartView view(facts);
  schema::Header header;
  header.ts_ns = 1'760'000'000'000'000'000;
  header.pid = facts.pid;
  std::string buf(schema::kMaxProcessStartBytes, '\0');
  buf.resize(schema::Encode(view.Event(header), buf.data(), buf.size()));
  return buf;
}

schema::OwnedProcessStartEvent Decoded(const std::string& line) {
  schema::DecodeResult d = schema::Decode(line);
  EXPECT_TRUE(d.ok()) << d.message;
  return d.ok() ? std::get<schema::OwnedProcessStartEvent>(d.event)
                : schema::OwnedProcessStartEvent{};
}

ProcessFacts SmallFacts() {
  ProcessFacts f;
  f.pid = 7;
  f.exe = "/usr/bin/python3.11";
  f.argv = {"python3", "train.py", "--epochs=3"};
  f.hostname = "gpu-node-17";
  f.start_ns = 1'760'000'000'000'000'000;
  f.config = {{"collector", "/run/cuflight/collector.sock"}};
  f.instance_id = 12345;
  f.pid_ns = 4026531836;
  return f;
}

TEST(ProcessFactsTest, IdentityOfThisProcess) {
  const ProcessFacts a = ReadProcessFacts();
  const ProcessFacts b = ReadProcessFacts();
  EXPECT_EQ(a.pid, getpid());
  EXPECT_NE(a.instance_id, 0u);
  EXPECT_NE(b.instance_id, 0u);
  EXPECT_NE(a.instance_id, b.instance_id) << "64 random bits twice alike";
  // The namespace as the kernel names the link: "pid:[<inode>]" (namespaces(7)).
  char link[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/pid", link, sizeof(link) - 1), 0);
  const std::string text(link);
  ASSERT_EQ(text.rfind("pid:[", 0), 0u) << text;
  EXPECT_EQ(a.pid_ns, std::strtoull(text.c_str() + 5, nullptr, 10));
}

TEST(ProcessFactsTest, InstanceIdsDoNotRepeat) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t id = NewInstanceId();
    EXPECT_NE(id, 0u);
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(ProcessFactsTest, TheEventCarriesTheIdentity) {
  const schema::OwnedProcessStartEvent e = Decoded(LineOf(SmallFacts()));
  EXPECT_EQ(e.instance_id, 12345u);
  EXPECT_EQ(e.pid_ns, 4026531836u);
  EXPECT_EQ(e.header.pid, 7);
  EXPECT_TRUE(e.truncated.empty());
}

TEST(ProcessFactsTest, FactsThatFitAreLeftAlone) {
  ProcessFacts f = SmallFacts();
  BoundProcessFacts(&f);
  EXPECT_EQ(f.argv, SmallFacts().argv);
  EXPECT_EQ(f.exe, SmallFacts().exe);
  EXPECT_TRUE(f.truncated.empty());
}

// The case: an argv of about 63 KiB (a secret among many arguments) made a process_start
// over 64 KiB, which the collector refused, and the process was never recorded.
TEST(ProcessFactsTest, ALongArgvIsCutWithAMarkerAndNamed) {
  ProcessFacts f = SmallFacts();
  f.argv = {"python3", "serve.py", "--api-key=sk-0123456789"};
  for (int i = 0; i < 1000; ++i)
    f.argv.push_back("--shard=/data/part-" + std::to_string(i) + std::string(40, 'x'));
  size_t raw = 0;
  for (const auto& a : f.argv) raw += a.size();
  ASSERT_GT(raw, 60u * 1024);
  BoundProcessFacts(&f);
  EXPECT_EQ(f.truncated, std::vector<std::string>{"argv"});
  const std::string line = LineOf(f);
  ASSERT_FALSE(line.empty()) << "does not fit in kMaxProcessStartBytes";
  EXPECT_LE(line.size(), schema::kMaxProcessStartBytes);
  // Most of the room is used: the cut is not needlessly short.
  EXPECT_GT(line.size(), schema::kMaxProcessStartBytes - 256);
  const schema::OwnedProcessStartEvent e = Decoded(line);
  EXPECT_EQ(e.truncated, std::vector<std::string>{"argv"});
  ASSERT_GE(e.argv.size(), 4u);
  EXPECT_EQ(e.argv[0], "python3");
  EXPECT_EQ(e.argv[2], "--api-key=sk-0123456789");
  EXPECT_EQ(e.argv[3], "--shard=/data/part-0" + std::string(40, 'x'));
  EXPECT_TRUE(e.argv.back().ends_with(kMarker)) << e.argv.back();
  EXPECT_LT(e.argv.size(), 1003u);
  EXPECT_EQ(e.exe, "/usr/bin/python3.11");
}

// Control characters take 6 bytes each in JSON (\u0001): the bound holds for the encoded line.
TEST(ProcessFactsTest, TheBoundHoldsForEscapedBytes) {
  ProcessFacts f = SmallFacts();
  f.argv = {"app", std::string(40 * 1024, '\x01'), "tail"};
  BoundProcessFacts(&f);
  const std::string line = LineOf(f);
  ASSERT_FALSE(line.empty());
  const schema::OwnedProcessStartEvent e = Decoded(line);
  ASSERT_EQ(e.argv.size(), 2u);
  EXPECT_EQ(e.argv[0], "app");
  EXPECT_EQ(e.argv[1].substr(0, 10), std::string(10, '\x01'));
  EXPECT_TRUE(e.argv[1].ends_with(kMarker));
  EXPECT_EQ(e.truncated, std::vector<std::string>{"argv"});
}

// A multi-byte character is never split: the cut string stays valid UTF-8 (no U+FFFD appears).
TEST(ProcessFactsTest, CutsFallBetweenCharacters) {
  ProcessFacts f = SmallFacts();
  std::string euro_signs;
  for (int i = 0; i < 8000; ++i) euro_signs += "\xE2\x82\xAC";  // U+20AC, 3 bytes
  f.argv = {"app", euro_signs};
  BoundProcessFacts(&f);
  const schema::OwnedProcessStartEvent e = Decoded(LineOf(f));
  ASSERT_EQ(e.argv.size(), 2u);
  const std::string kept = e.argv[1].substr(0, e.argv[1].size() - kMarker.size());
  EXPECT_EQ(kept.size() % 3, 0u);
  EXPECT_EQ(kept.find("\xEF\xBF\xBD"), std::string::npos);
}

// With argv gone the exe is cut next, keeping its end (the file name names the log).
TEST(ProcessFactsTest, AnExeTooLongKeepsItsEnd) {
  ProcessFacts f = SmallFacts();
  f.argv = {};
  f.exe = "/" + std::string(20 * 1024, '\x02') + "/bin/trainer";  // 6 bytes each in JSON
  BoundProcessFacts(&f);
  const std::string line = LineOf(f);
  ASSERT_FALSE(line.empty());
  const schema::OwnedProcessStartEvent e = Decoded(line);
  EXPECT_EQ(e.truncated, (std::vector<std::string>{"exe"}));
  EXPECT_TRUE(e.exe.starts_with(kMarker)) << e.exe.substr(0, 40);
  EXPECT_TRUE(e.exe.ends_with("/bin/trainer"));
}

}  // namespace
}  // namespace cuflight::inject
