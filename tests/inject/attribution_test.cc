// process_start's attribution: the cgroup parser over each runtime's documented path form
// (fixtures/cgroup/README.md), the derived fields' order, the allow-list, and the bounds under a
// hostile environment.
#include "attribution.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <variant>

#include "cuflight/env/attribution.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "process_facts.h"

namespace cuflight::inject {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kPod = "5f1c7d1a-9c3e-4b8f-a2d1-0e9a8b7c6d5e";
constexpr const char* kContainer =
    "3b7a9d0c1e2f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b";

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(CUFLIGHT_CGROUP_FIXTURES) + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Case {
  const char* file;
  const char* pod_uid;
  const char* container_id;
};

TEST(AttributionTest, CgroupPathsOfEachRuntime) {
  const Case cases[] = {
      {"k8s-cgroupfs-v1.txt", kPod, kContainer},
      {"k8s-cgroupfs-v2-guaranteed.txt", kPod, kContainer},
      {"k8s-systemd-v2-containerd.txt", kPod, kContainer},
      {"k8s-systemd-v2-crio.txt", kPod, kContainer},
      {"k8s-systemd-v1-guaranteed-containerd.txt", kPod, kContainer},
      {"docker-cgroupfs-v1.txt", "", kContainer},
      {"docker-systemd-v2.txt", "", kContainer},
      {"podman-v2.txt", "", kContainer},
      {"private-cgroupns-v2.txt", "", ""},
      {"host-session-v2.txt", "", ""},
      {"crio-conmon-v2.txt", kPod, ""},
      {"hostile.txt", "", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const CgroupIds ids = ParseCgroupIds(Fixture(c.file));
    EXPECT_EQ(ids.pod_uid, c.pod_uid);
    EXPECT_EQ(ids.container_id, c.container_id);
  }
}

TEST(AttributionTest, CgroupIdsAreNormalisedAndTheFirstLineWins) {
  // Upper-case hex in, lower case out; systemd's '_' become '-'.
  const CgroupIds upper = ParseCgroupIds(
      "0::/kubepods.slice/kubepods-pod5F1C7D1A_9C3E_4B8F_A2D1_0E9A8B7C6D5E.slice/"
      "cri-containerd-3B7A9D0C1E2F4A5B6C7D8E9F0A1B2C3D4E5F6A7B8C9D0E1F2A3B4C5D6E7F8A9B.scope\n");
  EXPECT_EQ(upper.pod_uid, kPod);
  EXPECT_EQ(upper.container_id, kContainer);
  // Two lines naming different containers: the first in file order.
  const std::string other(64, 'e');
  const CgroupIds two = ParseCgroupIds("3:memory:/docker/" + std::string(kContainer) +
                                       "\n2:pids:/docker/" + other + "\n");
  EXPECT_EQ(two.container_id, kContainer);
  // No trailing newline, an empty text, a text past the read bound.
  EXPECT_EQ(ParseCgroupIds("0::/docker/" + std::string(kContainer)).container_id, kContainer);
  EXPECT_EQ(ParseCgroupIds("").container_id, "");
  const std::string far = std::string(kMaxCgroupFileBytes, '\n') + "0::/docker/" + kContainer;
  EXPECT_EQ(ParseCgroupIds(far).container_id, "");
}

// A getenv over a map that records every name asked for.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  std::set<std::string> asked;
  std::function<const char*(const char*)> Fn() {
    return [this](const char* name) -> const char* {
      asked.insert(name);
      const auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string Get(const Pairs& pairs, const std::string& key) {
  for (const auto& [k, v] : pairs) {
    if (k == key) return v;
  }
  return "<absent>";
}

TEST(AttributionTest, SlurmTaskUnderTorchrun) {
  FakeEnv env;
  env.vars = {{"SLURM_JOB_ID", "4242"}, {"SLURM_PROCID", "1"},  {"SLURM_LOCALID", "1"},
              {"SLURM_NTASKS", "2"},    {"RANK", "0013"},       {"LOCAL_RANK", "5"},
              {"WORLD_SIZE", "16"},     {"HOME", "/home/a"},    {"SLURM_JOB_NAME", "train"},
              {"AWS_SECRET_ACCESS_KEY", "never"}};
  const Pairs a = MakeAttribution(env.Fn(), {}, {kContainer, kPod});
  // torchrun's RANK comes before SLURM_PROCID (docs/fleet.md), written without leading zeros.
  const Pairs expected = {{"job", "4242"},
                          {"rank", "13"},
                          {"local_rank", "5"},
                          {"world_size", "16"},
                          {"pod_uid", kPod},
                          {"container_id", kContainer},
                          {"SLURM_JOB_ID", "4242"},
                          {"SLURM_JOB_NAME", "train"},
                          {"SLURM_PROCID", "1"},
                          {"SLURM_LOCALID", "1"},
                          {"SLURM_NTASKS", "2"},
                          {"RANK", "0013"},
                          {"LOCAL_RANK", "5"},
                          {"WORLD_SIZE", "16"}};
  EXPECT_EQ(a, expected);
  // Never a variable outside the list.
  std::set<std::string> allowed(env::kAttributionVariables.begin(),
                                env::kAttributionVariables.end());
  EXPECT_EQ(env.asked, allowed);
}

TEST(AttributionTest, EachDerivedFieldFallsToItsNextSource) {
  FakeEnv env;
  // RANK not a number: the next source, OMPI_COMM_WORLD_RANK; a rank past 2^31-1 is no rank.
  env.vars = {{"RANK", "r3"},          {"OMPI_COMM_WORLD_RANK", "7"},
              {"PMI_RANK", "9"},       {"SLURM_LOCALID", "2"},
              {"WORLD_SIZE", "2147483648"}, {"PMI_SIZE", "2147483647"},
              {"TORCHELASTIC_RUN_ID", "run-1"}, {"POD_UID", "5F1C7D1A-9C3E-4B8F-A2D1-0E9A8B7C6D5E"},
              {"POD_NAME", "trainer-0"}, {"POD_NAMESPACE", "ml"}};
  const Pairs a = MakeAttribution(env.Fn(), {}, {});
  EXPECT_EQ(Get(a, "rank"), "7");
  EXPECT_EQ(Get(a, "local_rank"), "2");
  EXPECT_EQ(Get(a, "world_size"), "2147483647");
  EXPECT_EQ(Get(a, "job"), "run-1");
  EXPECT_EQ(Get(a, "pod_uid"), kPod);
  EXPECT_EQ(Get(a, "pod_name"), "trainer-0");
  EXPECT_EQ(Get(a, "pod_namespace"), "ml");
  EXPECT_EQ(Get(a, "container_id"), "<absent>");
  // The cgroup's pod UID wins over the environment's.
  const std::string other = "00000000-0000-4000-8000-000000000000";
  EXPECT_EQ(Get(MakeAttribution(env.Fn(), {}, {"", other}), "pod_uid"), other);
  // A pod UID that is no UUID is not one.
  env.vars["POD_UID"] = "not-a-uuid";
  EXPECT_EQ(Get(MakeAttribution(env.Fn(), {}, {}), "pod_uid"), "<absent>");
  // Nothing set: nothing at all.
  FakeEnv empty;
  EXPECT_TRUE(MakeAttribution(empty.Fn(), {}, {}).empty());
}

TEST(AttributionTest, AddedNamesComeAfterTheDefaults) {
  FakeEnv env;
  env.vars = {{"MY_TEAM", "vision"}, {"RANK", "1"}, {"EMPTY", ""}, {"lower", "x"}};
  const Pairs a =
      MakeAttribution(env.Fn(), {"MY_TEAM", "RANK", "EMPTY", "lower", "UNSET"}, {});
  const Pairs expected = {{"rank", "1"}, {"RANK", "1"}, {"MY_TEAM", "vision"}, {"EMPTY", ""}};
  EXPECT_EQ(a, expected);
  EXPECT_EQ(env.asked.count("lower"), 0u) << "a name ParseConfig would refuse is never read";
}

TEST(AttributionTest, ValuesAreCutAndMadeSafe) {
  // 300 bytes: cut to 256.
  EXPECT_EQ(SafeAttributionValue(std::string(300, 'a')), std::string(256, 'a'));
  // A cut never splits a character: 255 'a' then "é" (2 bytes) keeps 255 bytes.
  EXPECT_EQ(SafeAttributionValue(std::string(255, 'a') + "\xC3\xA9"), std::string(255, 'a'));
  // Ill-formed UTF-8 (a lone continuation byte, an overlong '/', a surrogate, past U+10FFFF)
  // and control characters become '?', a byte at a time; well-formed text stays.
  EXPECT_EQ(SafeAttributionValue("a\x80" "b\xC0\xAF" "c\xED\xA0\x80" "d\xF4\x90\x80\x80"),
            "a?b??c???d????");
  EXPECT_EQ(SafeAttributionValue("x\ty\n\x7f\xE2\x80\xA8z"), "x?y???z");
  EXPECT_EQ(SafeAttributionValue("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x9A\x80"),
            "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x9A\x80");
  EXPECT_EQ(SafeAttributionValue("\"quoted\\\""), "\"quoted\\\"");
}

// The hostile environment through the real getenv: every allowed variable (the defaults and 16
// added ones) set to 256 bytes that each take an escape, some of them not UTF-8. The attribution
// stays within its budget, the line within 16 KiB, valid, and says it was cut.
TEST(AttributionTest, AHostileEnvironmentStaysBoundedAndValid) {
  std::vector<std::string> names(env::kAttributionVariables.begin(),
                                 env::kAttributionVariables.end());
  std::vector<std::string> extra;
  for (int i = 0; i < 16; ++i) extra.push_back("CUFLIGHT_TEST_EXTRA_" + std::to_string(i));
  names.insert(names.end(), extra.begin(), extra.end());
  const std::string quotes(300, '"');
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_EQ(setenv(names[i].c_str(), i % 2 ? quotes.c_str() : "\xFF\xFE\"\\", 1), 0);
  }
  ProcessFacts facts = ReadProcessFacts();
  facts.config = {{"collector", std::string(4000, 'c')}};
  ReadAttribution(&facts, extra);
  for (const std::string& n : names) unsetenv(n.c_str());

  EXPECT_TRUE(facts.attribution_cut);
  size_t json = 2;
  for (const auto& [k, v] : facts.attribution) {
    json += k.size() + v.size() + 6;
    for (char c : k + v) json += c == '"' || c == '\\' ? 1 : 0;
  }
  EXPECT_LE(json, kMaxAttributionJsonBytes);
  EXPECT_GT(json, kMaxAttributionJsonBytes - 600) << "fills its budget, no less than one entry";
  BoundProcessFacts(&facts);
  const ProcessStartView view(facts);
  schema::Header header;
  header.ts_ns = 1;
  header.pid = facts.pid;
  std::string buf(schema::kMaxProcessStartBytes, '\0');
  buf.resize(schema::Encode(view.Event(header), buf.data(), buf.size()));
  ASSERT_FALSE(buf.empty()) << "the line fits in kMaxProcessStartBytes";
  const schema::DecodeResult d = schema::Decode(buf);
  ASSERT_TRUE(d.ok()) << d.message;
  const auto& start = std::get<schema::OwnedProcessStartEvent>(d.event);
  EXPECT_FALSE(start.truncated.empty());
  EXPECT_EQ(start.truncated.back(), "attribution");
  EXPECT_FALSE(start.attribution.empty());
  for (const auto& [k, v] : start.attribution) {
    EXPECT_LE(v.size(), env::kMaxAttributionValueBytes) << k;
    EXPECT_EQ(v.find("\xEF\xBF\xBD"), std::string::npos) << "no byte left for U+FFFD: " << k;
  }
}

}  // namespace
}  // namespace cuflight::inject
