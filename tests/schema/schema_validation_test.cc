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
using testing::RealisticKernel;

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
  EXPECT_EQ(RunValidator(testing::SampleLines(), "schema_encoder_output.jsonl", "valid"), 0);
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
  // timing_stopped_reason outside its enum, and either of the pair without the other.
  const std::string end_line =
      R"({"type":"process_end","version":1,"ts_ns":1,"pid":2,"seq":3,"exit_code":0,"emitted":0,)"
      R"("dropped":0)";
  lines.push_back(end_line + R"(,"timing_stopped":1,"timing_stopped_reason":"stolen"})" + "\n");
  lines.push_back(end_line + R"(,"timing_stopped":1})" + "\n");
  lines.push_back(end_line + R"(,"timing_stopped_reason":"unavailable"})" + "\n");
  lines.push_back("{\"type\":\"stats\", NaN}\n");
  lines.push_back("[1,2,3]\n");
  EXPECT_EQ(RunValidator(lines, "schema_bad.jsonl", "invalid"), 0);
  // The same lines expected valid must fail: the validator's exit status reaches the test.
  EXPECT_EQ(RunValidator(lines, "schema_bad_expected_valid.jsonl", "valid"), 1);
}

// Breaks each field of a sample of every type in many ways and sorts the results by what Decode
// says; the JSON Schema must agree with Decode on every one.
TEST(SchemaValidationTest, DecoderAndSchemaAgreeOnMutatedLines) {
  std::vector<std::string> accepted;
  std::vector<std::string> rejected;
  for (const std::string& line : testing::MutatedLines()) {
    const DecodeResult result = Decode(line);
    (result.ok() ? accepted : rejected).push_back(line);
    EXPECT_NE(result.reason, Reason::kMalformedJson) << line;
    EXPECT_NE(result.reason, Reason::kInternalError) << line;
  }
  ASSERT_GT(accepted.size(), 100u);
  ASSERT_GT(rejected.size(), 1000u);
  EXPECT_EQ(RunValidator(accepted, "schema_agree_accepted.jsonl", "valid"), 0);
  EXPECT_EQ(RunValidator(rejected, "schema_agree_rejected.jsonl", "invalid"), 0);
}

}  // namespace
}  // namespace cuflight::schema
