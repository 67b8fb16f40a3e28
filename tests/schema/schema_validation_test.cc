// Checks the encoder against the JSON Schema files with a real Draft 2020-12 validator
// (python3-jsonschema, through validate.py), and the decoder against the same validator.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "sample_events.h"

namespace cuflight::schema {
namespace {

using nlohmann::json;
using testing::EncodeLine;
using testing::LossyEvents;
using testing::RealisticKernel;
using testing::RoundTripEvents;

// Writes `lines` (each ending in '\n') to a file in the test temp dir and runs validate.py on it
// with --expect `expect`. Returns the validator's exit status, or -1 if it did not exit. The
// validator prints each unexpected line with its number and what is wrong with it.
int RunValidator(const std::vector<std::string>& lines, const std::string& file_name,
                 const std::string& expect) {
  const std::string path =
      ::testing::TempDir() + "cuflight_" + std::to_string(getpid()) + "_" + file_name;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (const std::string& line : lines) out << line;
  }
  const std::string command = std::string("'") + CUFLIGHT_SCHEMA_PYTHON + "' '" +
                              CUFLIGHT_SCHEMA_VALIDATOR + "' '" + CUFLIGHT_SCHEMA_DIR + "' '" +
                              path + "' --expect " + expect;
  const int status = std::system(command.c_str());
  std::remove(path.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(SchemaValidationTest, EncoderOutputOfEveryTypeValidates) {
  std::vector<std::string> lines;
  for (const OwnedEvent& event : RoundTripEvents()) lines.push_back(EncodeLine(event));
  for (const OwnedEvent& event : LossyEvents()) lines.push_back(EncodeLine(event));
  lines.push_back(EncodeLine(RealisticKernel()));
  EXPECT_EQ(RunValidator(lines, "schema_encoder_output.jsonl", "valid"), 0);
}

TEST(SchemaValidationTest, ValidatorRejectsBadLines) {
  const json kernel = json::parse(EncodeLine(RealisticKernel()));
  std::vector<json> bad;
  auto with = [&](const char* key, const json& value) {
    json doc = kernel;
    doc[key] = value;
    bad.push_back(doc);
  };
  with("occupancy", 1.5);
  with("seq", -1);
  with("version", 2);
  with("tid", "7");
  with("grid", {1, 2});
  with("type", "no_such_type");
  json missing = kernel;
  missing.erase("grid");
  bad.push_back(missing);
  std::vector<std::string> lines;
  for (const json& doc : bad) lines.push_back(doc.dump() + "\n");
  lines.push_back("{\"type\":\"stats\", NaN}\n");
  lines.push_back("[1,2,3]\n");
  EXPECT_EQ(RunValidator(lines, "schema_bad.jsonl", "invalid"), 0);
  // The same lines expected valid must fail: the validator's exit status reaches the test.
  EXPECT_EQ(RunValidator(lines, "schema_bad_expected_valid.jsonl", "valid"), 1);
}

// Breaks each field of a sample of every type in many ways and sorts the results by what Decode
// says; the JSON Schema must agree with Decode on every one.
TEST(SchemaValidationTest, DecoderAndSchemaAgreeOnMutatedLines) {
  const std::vector<json> values = {nullptr,
                                    true,
                                    "x",
                                    "",
                                    "registers",
                                    json::array(),
                                    json::object(),
                                    json::array({"registers"}),
                                    json::array({"registers", "registers"}),
                                    json::array({"bogus"}),
                                    json::array({"a", "b"}),
                                    json::array({1, 2, 3}),
                                    json::array({0, 0, 0}),
                                    json::array({1, 2, -1}),
                                    json::array({4294967295u, 1, 1}),
                                    json::array({4294967296u, 1, 1}),
                                    json::array({1.5, 1, 1}),
                                    json::array({1, 2}),
                                    json::array({1, "x"}),
                                    json::array({18446744073709551615u}),
                                    -1,
                                    0,
                                    1,
                                    2,
                                    100,
                                    101,
                                    -2,
                                    0.5,
                                    1.5,
                                    2.0,
                                    -0.5,
                                    1.0,
                                    2147483647,
                                    2147483648LL,
                                    -2147483648LL,
                                    -2147483649LL,
                                    4294967295LL,
                                    4294967296LL,
                                    9223372036854775807LL,
                                    9223372036854775808ULL,
                                    18446744073709551615ULL,
                                    1.8446744073709552e19,
                                    1e300,
                                    -1e300};
  std::vector<json> samples;
  for (const OwnedEvent& event : RoundTripEvents()) {
    const json doc = json::parse(EncodeLine(event));
    // One sample per type, plus the kernel with a cluster.
    bool seen = false;
    for (const json& s : samples)
      seen |= s["type"] == doc["type"] && s.contains("cluster") == doc.contains("cluster");
    if (!seen) samples.push_back(doc);
  }
  std::vector<std::string> accepted;
  std::vector<std::string> rejected;
  auto sort = [&](const json& doc) {
    const std::string line = doc.dump() + "\n";
    const DecodeResult result = Decode(line);
    (result.ok() ? accepted : rejected).push_back(line);
    EXPECT_NE(result.reason, Reason::kMalformedJson) << line;
    EXPECT_NE(result.reason, Reason::kInternalError) << line;
  };
  for (const json& sample : samples) {
    sort(sample);
    for (const auto& [key, unused] : sample.items()) {
      json removed = sample;
      removed.erase(key);
      sort(removed);
      for (const json& value : values) {
        json changed = sample;
        changed[key] = value;
        sort(changed);
      }
    }
  }
  ASSERT_GT(accepted.size(), 100u);
  ASSERT_GT(rejected.size(), 1000u);
  EXPECT_EQ(RunValidator(accepted, "schema_agree_accepted.jsonl", "valid"), 0);
  EXPECT_EQ(RunValidator(rejected, "schema_agree_rejected.jsonl", "invalid"), 0);
}

}  // namespace
}  // namespace cuflight::schema
