// Validate and Decode against the reference decoder (tests/support/reference_decoder.h): the same
// verdict and Reason on every line, the same header, the same event for an accepted line, and
// facts that hold what nlohmann parses.
#include "cuflight/schema/validator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "alloc_counter.h"
#include "cuflight/schema/decoder.h"
#include "reference_decoder.h"
#include "sample_events.h"

namespace cuflight::schema {
namespace {

using nlohmann::json;
using testing::EncodeLine;
using ::testing::HasSubstr;
using testing::RealisticKernel;

std::string Printable(std::string_view line) {
  std::string out;
  for (const char c : line.substr(0, 400)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// Validate, Decode and the reference agree on `line`: the Reason and header; for an accepted
// line the type, and Decode's event (and Validate's, decoding) is the reference's; for a rejected
// one Decode's message is Validate's. With `facts`, for a line that is one object, LineInfo's
// type_text and (accepted) facts hold what nlohmann parses. Returns the Reason.
Reason ExpectAgreement(std::string_view line, bool facts = true) {
  const DecodeResult reference = test_support::ReferenceDecode(line);
  LineInfo info;
  ValidateError error;
  const Reason reason = Validate(line, &info, &error);
  EXPECT_EQ(ReasonName(reason), ReasonName(reference.reason))
      << "line: " << Printable(line) << "\nreference: " << reference.message
      << "\nValidate: " << error.message();
  EXPECT_EQ(info.header_valid, reference.header.has_value()) << Printable(line);
  if (info.header_valid && reference.header) {
    EXPECT_EQ(info.header, *reference.header) << Printable(line);
  }
  const DecodeResult decoded = Decode(line);
  EXPECT_EQ(ReasonName(decoded.reason), ReasonName(reference.reason)) << Printable(line);
  EXPECT_EQ(decoded.header, reference.header) << Printable(line);
  if (reference.ok()) {
    EXPECT_TRUE(info.type_known);
    EXPECT_EQ(info.type, TypeOf(reference.event)) << Printable(line);
    EXPECT_TRUE(decoded.event == reference.event) << "Decode's event differs: " << Printable(line);
    LineInfo again;
    OwnedEvent event;
    EXPECT_EQ(Validate(line, &again, nullptr, ~uint32_t{0}, &event), Reason::kOk);
    EXPECT_TRUE(event == reference.event) << "Validate's event differs: " << Printable(line);
  } else {
    EXPECT_EQ(decoded.message, error.message()) << Printable(line);
  }
  if (reason != Reason::kOk) {
    EXPECT_FALSE(error.message().empty()) << Printable(line);
    EXPECT_LT(error.size, ValidateError::kCapacity);
  }
  if (reason == Reason::kMalformedJson || reason == Reason::kNotAnObject || !facts) return reason;
  // One object: the `type` text, and for an accepted line every fact, hold what nlohmann parses
  // (the last of a repeated name, as nlohmann keeps it).
  const json doc = json::parse(line);
  if (!info.type_text.empty()) {
    EXPECT_TRUE(doc.contains("type") && doc["type"].is_string() && doc["type"] == info.type_text)
        << Printable(line);
  }
  if (reason != Reason::kOk) return reason;
  for (int f = 0; f < kFactCount; ++f) {
    const auto fact = static_cast<Fact>(f);
    const std::string key(kFactNames[f]);
    EXPECT_EQ(info.Has(fact), doc.contains(key)) << key << " in " << Printable(line);
    if (!info.Has(fact) || !doc.contains(key)) continue;
    const json& value = doc[key];
    EXPECT_EQ(json::parse(info.Raw(fact)), value) << key << " in " << Printable(line);
    if (fact == Fact::occupancy) continue;  // a number: fact_value is for integers
    if (value.is_number_unsigned()) {
      EXPECT_EQ(info.Uint(fact), value.get<uint64_t>()) << key;
    } else if (value.is_number_integer()) {
      EXPECT_EQ(info.Uint(fact), static_cast<uint64_t>(value.get<int64_t>())) << key;
    } else if (value.is_string()) {
      const std::string& want = value.get_ref<const std::string&>();
      std::string scratch(info.Raw(fact).size(), '\0');
      std::string_view text;
      EXPECT_TRUE(info.Text(fact, scratch.data(), scratch.size(), &text)) << key;
      EXPECT_EQ(text, want) << key;
      EXPECT_EQ((info.fact_escaped >> f) & 1, info.Raw(fact).find('\\') != std::string::npos);
    }
  }
  return reason;
}

std::string WithoutNewline(std::string line) {
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

// A kernel line with `tail` added as the last members: `{..., <tail>}`.
std::string KernelWith(std::string_view tail) {
  std::string line = WithoutNewline(EncodeLine(RealisticKernel()));
  line.pop_back();  // '}'
  return line + "," + std::string(tail) + "}";
}

TEST(ValidatorTest, SampleLinesAgree) {
  for (const std::string& line : testing::SampleLines()) {
    EXPECT_EQ(ExpectAgreement(line), Reason::kOk) << Printable(line);
  }
}

// The schema tests' mutations: every member of a sample of every type removed, or replaced by
// each of about 50 values.
TEST(ValidatorTest, MutatedLinesAgree) {
  int rejected = 0;
  int i = 0;
  for (const std::string& line : testing::MutatedLines()) {
    // Members compared on every 8th line (they come from the same few samples).
    rejected += ExpectAgreement(line, i++ % 8 == 0) != Reason::kOk;
  }
  EXPECT_GT(rejected, 1000);
}

// Byte-level damage to samples of several types: every prefix, and at every position the byte
// deleted, replaced by each of a set of structural and hostile bytes, or one of a few inserted.
// (The fuzzer in tests/fuzz/ goes much further.)
TEST(ValidatorTest, ByteMutationsAgree) {
  std::vector<std::string> lines;
  for (const std::string& line : testing::SampleLines()) {
    const json doc = json::parse(line);
    bool seen = false;
    for (const std::string& l : lines) seen |= json::parse(l)["type"] == doc["type"];
    if (!seen) lines.push_back(line);
  }
  const std::string replacements = std::string("\"\\}],0 \x80", 8) + '\0';
  const std::string insertions = "\",";
  for (const std::string& line : lines) {
    for (size_t i = 0; i <= line.size(); ++i) {
      ExpectAgreement(std::string_view(line).substr(0, i), false);
      if (i == line.size()) break;
      std::string changed = line;
      changed.erase(i, 1);
      ExpectAgreement(changed, false);
      changed = line;
      for (const char b : replacements) {
        changed[i] = b;
        ExpectAgreement(changed, false);
      }
      for (const char b : insertions) {
        changed = line;
        changed.insert(i, 1, b);
        ExpectAgreement(changed, false);
      }
    }
  }
}

struct HostileCase {
  std::string line;
  Reason expected;
};

void ExpectCases(const std::vector<HostileCase>& cases) {
  for (const HostileCase& c : cases) {
    EXPECT_EQ(ReasonName(ExpectAgreement(c.line)), ReasonName(c.expected)) << Printable(c.line);
  }
}

TEST(ValidatorTest, DeepNesting) {
  const auto nested = [](int depth, char open, char close) {
    return std::string(static_cast<size_t>(depth), open) +
           std::string(static_cast<size_t>(depth), close);
  };
  std::string deep_objects;
  for (int i = 0; i < kMaxNestingDepth - 1; ++i) deep_objects += R"({"a":)";
  deep_objects += "1";
  deep_objects += std::string(kMaxNestingDepth - 1, '}');
  ExpectCases({
      {nested(kMaxNestingDepth, '[', ']'), Reason::kNotAnObject},
      {nested(kMaxNestingDepth + 1, '[', ']'), Reason::kMalformedJson},
      {std::string(200'000, '['), Reason::kMalformedJson},
      {nested(200'000, '[', ']'), Reason::kMalformedJson},
      {KernelWith(R"("x":)" + nested(kMaxNestingDepth - 1, '[', ']')), Reason::kOk},
      {KernelWith(R"("x":)" + nested(kMaxNestingDepth, '[', ']')), Reason::kMalformedJson},
      {KernelWith(R"("x":)" + deep_objects), Reason::kOk},
      {KernelWith(R"("x":[)" + deep_objects + "]"), Reason::kMalformedJson},
      {KernelWith(R"("x":")" + std::string(1000, '[') + "\""), Reason::kOk},
      // Too deep and otherwise broken: still malformed.
      {KernelWith(R"("grid":)" + nested(kMaxNestingDepth, '[', ']')), Reason::kMalformedJson},
  });
}

TEST(ValidatorTest, HugeAndOddNumbers) {
  ExpectCases({
      {KernelWith(R"("x":1e400)"), Reason::kMalformedJson},
      {KernelWith(R"("x":-1e400)"), Reason::kMalformedJson},
      {KernelWith(R"("x":1.7976931348623157e308)"), Reason::kOk},
      {KernelWith(R"("x":1.7976931348623158e308)"), Reason::kOk},  // rounds to DBL_MAX
      {KernelWith(R"("x":1.7976931348623159e308)"), Reason::kMalformedJson},
      // DBL_MAX + half an ulp, exactly: rounds (to even) to infinity; a tenth less rounds down.
      {KernelWith(R"("x":179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792)"), Reason::kMalformedJson},
      {KernelWith(R"("x":179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791.9)"), Reason::kOk},
      {KernelWith(R"("x":1e-400)"), Reason::kOk},
      {KernelWith(R"("x":-0.0e-99999999999999999999)"), Reason::kOk},
      {KernelWith(R"("x":0e99999999999999999999)"), Reason::kOk},
      {KernelWith(R"("x":)" + std::string(308, '9')), Reason::kOk},
      {KernelWith(R"("x":)" + std::string(309, '9')), Reason::kMalformedJson},
      {KernelWith(R"("x":-)" + std::string(400, '1')), Reason::kMalformedJson},
      {KernelWith(R"("x":0.)" + std::string(400, '0') + "1e708"), Reason::kOk},  // 1e307
      {KernelWith(R"("x":0.)" + std::string(400, '0') + "1e710"), Reason::kMalformedJson},
      {KernelWith(R"("x":0.)" + std::string(400, '0') + "1e300"), Reason::kOk},
      {KernelWith(R"("tid":18446744073709551616)"), Reason::kOutOfRange},
      {KernelWith(R"("context":18446744073709551615)"), Reason::kOk},
      {KernelWith(R"("context":18446744073709551615.0)"), Reason::kOutOfRange},  // 2^64
      {KernelWith(R"("context":1.8446744073709550e19)"), Reason::kOk},
      {KernelWith(R"("tid":-9223372036854775808)"), Reason::kOutOfRange},
      {KernelWith(R"("tid":-9223372036854775809)"), Reason::kOutOfRange},
      {KernelWith(R"("tid":-0)"), Reason::kOk},
      {KernelWith(R"("tid":-0.0)"), Reason::kOk},
      {KernelWith(R"("tid":1e2)"), Reason::kOk},
      {KernelWith(R"("tid":1.5e1)"), Reason::kOk},  // 15
      {KernelWith(R"("tid":1.5e0)"), Reason::kWrongType},
      {KernelWith(R"("tid":12.0000000000000000001)"), Reason::kOk},  // rounds to 12
      {KernelWith(R"("occupancy":1.0000000000000000001)"), Reason::kOk},
      {KernelWith(R"("occupancy":1.0000000000000002)"), Reason::kOutOfRange},
      {KernelWith(R"("occupancy":-0)"), Reason::kOk},
      {KernelWith(R"("occupancy":-1e-400)"), Reason::kOk},
      {KernelWith(R"("occupancy":-1e-300)"), Reason::kOutOfRange},
      {KernelWith(R"("waves":1e308)"), Reason::kOk},
      {KernelWith(R"("waves":-0.0)"), Reason::kOk},
      {KernelWith(R"("version":1.0)"), Reason::kOk},
      {KernelWith(R"("version":-0)"), Reason::kUnsupportedVersion},
      {KernelWith(R"("version":1e20)"), Reason::kUnsupportedVersion},
      {KernelWith(R"("version":1.5)"), Reason::kWrongType},
      {KernelWith(R"("x":01)"), Reason::kMalformedJson},
      {KernelWith(R"("x":1.)"), Reason::kMalformedJson},
      {KernelWith(R"("x":.5)"), Reason::kMalformedJson},
      {KernelWith(R"("x":+1)"), Reason::kMalformedJson},
      {KernelWith(R"("x":1e)"), Reason::kMalformedJson},
      {KernelWith(R"("x":1e+)"), Reason::kMalformedJson},
      {KernelWith(R"("x":-)"), Reason::kMalformedJson},
      {KernelWith(R"("x":1-2)"), Reason::kMalformedJson},
      {KernelWith(R"("x":NaN)"), Reason::kMalformedJson},
      {KernelWith(R"("x":Infinity)"), Reason::kMalformedJson},
      {KernelWith(R"("x":0x10)"), Reason::kMalformedJson},
  });
}

TEST(ValidatorTest, InvalidUtf8) {
  std::vector<HostileCase> cases;
  for (const testing::InvalidUtf8Case& c : testing::InvalidUtf8Cases()) {
    cases.push_back({KernelWith(R"("x":")" + c.input + "\""), Reason::kMalformedJson});
    cases.push_back({KernelWith("\"" + c.input + R"(":1)"), Reason::kMalformedJson});
    cases.push_back({KernelWith(R"("x":)" + c.input), Reason::kMalformedJson});
  }
  for (const std::string& s : testing::HostileValidStrings()) {
    json doc = json::parse(EncodeLine(RealisticKernel()));
    doc["name"] = s;
    doc[s] = s;
    cases.push_back({doc.dump(), Reason::kOk});
  }
  cases.push_back({KernelWith("\"x\":\"\xEF\xBF\xBF\xF4\x8F\xBF\xBF\""), Reason::kOk});
  cases.push_back({KernelWith("\"x\":\"\x7F\""), Reason::kOk});  // DEL may appear raw
  cases.push_back({KernelWith("\"x\":\"tab\there\""), Reason::kMalformedJson});
  cases.push_back({KernelWith("\"x\":\"\x1F\""), Reason::kMalformedJson});
  ExpectCases(cases);
}

TEST(ValidatorTest, NulBytes) {
  const std::string line = WithoutNewline(EncodeLine(RealisticKernel()));
  const std::string nul(1, '\0');
  ExpectCases({
      {line + nul, Reason::kMalformedJson},
      {line + nul + "garbage", Reason::kMalformedJson},
      {line + " " + nul, Reason::kMalformedJson},
      {nul + line, Reason::kMalformedJson},
      {nul, Reason::kMalformedJson},
      {KernelWith("\"x\":\"a" + nul + "b\""), Reason::kMalformedJson},
      {KernelWith("\"x\":1" + nul), Reason::kMalformedJson},
      {KernelWith(R"("x":"a\u0000b")"), Reason::kOk},  // an escaped NUL is fine
  });
}

TEST(ValidatorTest, SurrogatesAndEscapes) {
  ExpectCases({
      {KernelWith(R"("x":"\ud800")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\udc00")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\ud800\u0041")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\ud800\ud800")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\ud800x")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\ud800\")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\ud800\u")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\udbff\udfff")"), Reason::kOk},
      {KernelWith(R"("x":"\uD83D\uDE00")"), Reason::kOk},
      {KernelWith(R"("x":"\u12")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\u12g4")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\x41")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\'")"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\/\b\f\n\r\t\"\\")"), Reason::kOk},
      {KernelWith(R"("\ud800":1)"), Reason::kMalformedJson},
      {KernelWith(R"("x":"\)"), Reason::kMalformedJson},
  });
}

TEST(ValidatorTest, DuplicateKeysLastOneCounts) {
  ExpectCases({
      {KernelWith(R"("tid":5)"), Reason::kOk},
      {KernelWith(R"("tid":-5)"), Reason::kOutOfRange},
      {KernelWith(R"("t\u0069d":"x")"), Reason::kWrongType},
      {KernelWith(R"("type":"kernel_time")"), Reason::kMissingField},
      {KernelWith(R"("type":"k\u0065rnel")"), Reason::kOk},
      {KernelWith(R"("\u0074ype":"gpu_reset")"), Reason::kUnknownType},
      {KernelWith(R"("version":2,"version":1)"), Reason::kOk},
      {KernelWith(R"("seq":-1,"seq":3)"), Reason::kOk},
      {KernelWith(R"("grid":[1,2,3],"grid":"x")"), Reason::kWrongType},
      {KernelWith(R"("limiting_resources":["warps","w\u0061rps"])"), Reason::kOutOfRange},
      {KernelWith(R"("limiting_resource":"w\u0061rps")"), Reason::kOk},
  });
  // The header takes the last seq.
  LineInfo info;  // refers to the line: keep it alive
  const std::string line = KernelWith(R"("seq":-1,"seq":3)");
  ASSERT_EQ(Validate(line, &info, nullptr), Reason::kOk);
  EXPECT_EQ(info.header.seq, 3u);
  EXPECT_EQ(info.Uint(Fact::device), static_cast<uint64_t>(RealisticKernel().device));
}

TEST(ValidatorTest, ProcessStartIdentityAndTruncationRules) {
  const std::string head =
      R"({"type":"process_start","version":1,"ts_ns":1,"pid":2,"seq":0,"exe":"/bin/x",)"
      R"("argv":[],"hostname":"h","start_ns":0,"cuflight_version":"0.1.0",)"
      R"("cuda_driver_version":0,"cupti_version":0)";
  ExpectCases({
      {head + R"(})", Reason::kOk},
      {head + R"(,"instance_id":18446744073709551615,"pid_ns":0,"truncated":[]})", Reason::kOk},
      {head + R"(,"truncated":["argv","exe"]})", Reason::kOk},
      {head + R"(,"instance_id":-1})", Reason::kOutOfRange},
      {head + R"(,"instance_id":18446744073709551616})", Reason::kOutOfRange},
      {head + R"(,"instance_id":"1"})", Reason::kWrongType},
      {head + R"(,"pid_ns":1.5})", Reason::kWrongType},
      {head + R"(,"truncated":{}})", Reason::kWrongType},
      {head + R"(,"truncated":[null]})", Reason::kWrongType},
  });
}

TEST(ValidatorTest, ConfigObjectRules) {
  const std::string head =
      R"({"type":"process_start","version":1,"ts_ns":1,"pid":2,"seq":0,"exe":"/bin/x",)"
      R"("argv":[],"hostname":"h","start_ns":0,"cuflight_version":"0.1.0",)"
      R"("cuda_driver_version":0,"cupti_version":0,"config":)";
  ExpectCases({
      {head + R"({}})", Reason::kOk},
      {head + R"({"A":"1","B":"2"}})", Reason::kOk},
      {head + R"({"A":1,"A":"2"}})", Reason::kOk},
      {head + R"({"A":"2","A":1}})", Reason::kWrongType},
      {head + R"({"\u0041":1,"A":"2"}})", Reason::kOk},
      {head + R"({"A":1,"\u0041":"2"}})", Reason::kOk},
      {head + R"({"\u0041B":1,"A\u0042":"2"}})", Reason::kOk},
      {head + R"({"\u0041B":1,"A\u0043":"2"}})", Reason::kWrongType},
      {head + R"({"A":[],"B":"x"}})", Reason::kWrongType},
      {head + R"({"A":{"B":"x"}}})", Reason::kWrongType},
      {head + R"(null})", Reason::kWrongType},
      {head + R"("A=1"})", Reason::kWrongType},
  });
}

TEST(ValidatorTest, TrailingGarbageAndWhitespace) {
  const std::string line = WithoutNewline(EncodeLine(RealisticKernel()));
  ExpectCases({
      {line, Reason::kOk},
      {" \t\r\n" + line + " \t\r\n", Reason::kOk},
      {line + "\r\n", Reason::kOk},
      {"\xEF\xBB\xBF" + line, Reason::kOk},
      {" \xEF\xBB\xBF" + line, Reason::kMalformedJson},
      {"\xEF\xBB" + line, Reason::kMalformedJson},
      {line + "x", Reason::kMalformedJson},
      {line + "}", Reason::kMalformedJson},
      {line + ",", Reason::kMalformedJson},
      {line + line, Reason::kMalformedJson},
      {line + "\n" + line, Reason::kMalformedJson},
      {line + " 1", Reason::kMalformedJson},
      {line + "\v", Reason::kMalformedJson},
      {line + "\xC2\xA0", Reason::kMalformedJson},
      {"", Reason::kMalformedJson},
      {"  \n", Reason::kMalformedJson},
      {"{", Reason::kMalformedJson},
      {"{}", Reason::kMissingField},
      {"{,}", Reason::kMalformedJson},
      {R"({"a":1,})", Reason::kMalformedJson},
      {R"({"a" 1})", Reason::kMalformedJson},
      {R"({"a":1 "b":2})", Reason::kMalformedJson},
      {R"({a:1})", Reason::kMalformedJson},
      {R"({"a":tru})", Reason::kMalformedJson},
      {R"({"a":truex})", Reason::kMalformedJson},
      {R"({"a":nul})", Reason::kMalformedJson},
      {R"({"a":[1,]})", Reason::kMalformedJson},
      {R"({"a":[,1]})", Reason::kMalformedJson},
      {R"({"a":{"b"}})", Reason::kMalformedJson},
      {R"({"a":{"b":1,}})", Reason::kMalformedJson},
      {R"({"a":]})", Reason::kMalformedJson},
      {"[]", Reason::kNotAnObject},
      {" 42 ", Reason::kNotAnObject},
      {R"("kernel")", Reason::kNotAnObject},
      {"null", Reason::kNotAnObject},
      {"[1,2", Reason::kMalformedJson},
      {R"({"type":"kernel"})", Reason::kMissingField},
      {R"({"type":1})", Reason::kWrongType},
      {R"({"type":"x","version":"1"})", Reason::kWrongType},
      {R"({"type":"x","version":2})", Reason::kUnsupportedVersion},
      {R"({"type":"x","version":1,"ts_ns":0,"pid":0,"seq":0})", Reason::kUnknownType},
  });
}

// Several faults in one line: the first in Decode's order wins, for both.
TEST(ValidatorTest, MultiFaultLinesGetDecodesReason) {
  ExpectCases({
      {KernelWith(R"("version":3,"grid":"x","tid":-1)"), Reason::kUnsupportedVersion},
      {KernelWith(R"("tid":-1,"grid":"x")"), Reason::kOutOfRange},
      {KernelWith(R"("grid":"x","tid":"y")"), Reason::kWrongType},
      {KernelWith(R"("seq":"x","type":3)"), Reason::kWrongType},
      {KernelWith(R"("type":"zzz","pid":-1)"), Reason::kOutOfRange},
      {KernelWith(R"("type":"zzz","best_block_size":-1)"), Reason::kUnknownType},
      {KernelWith(R"("cluster_occupancy":2,"carveout":500)"), Reason::kOutOfRange},
      {KernelWith(R"("grid":[1,2,-3],"block":[1,"x",3])"), Reason::kOutOfRange},
      {KernelWith(R"("grid":[-1,"x",3])"), Reason::kOutOfRange},
      {KernelWith(R"("grid":["x",-1,3])"), Reason::kWrongType},
      {KernelWith(R"("limiting_resources":["bogus",1])"), Reason::kOutOfRange},
      {KernelWith(R"("limiting_resources":[1,"bogus"])"), Reason::kWrongType},
  });
}

TEST(ValidatorTest, ErrorNamesTheField) {
  ValidateError error;
  LineInfo info;
  EXPECT_EQ(Validate(KernelWith(R"("grid":[1,2])"), &info, &error), Reason::kWrongType);
  EXPECT_EQ(error.message(),
            R"(kernel: field "grid" must be an array of 3 unsigned integers, got [1,2])");
  EXPECT_TRUE(info.header_valid);
  EXPECT_TRUE(info.type_known);
  EXPECT_EQ(info.type, EventType::kKernel);

  json doc = json::parse(EncodeLine(RealisticKernel()));
  doc.erase("best_block_size");
  EXPECT_EQ(Validate(doc.dump(), &info, &error), Reason::kMissingField);
  EXPECT_EQ(error.message(), R"(kernel: field "best_block_size" is missing)");

  EXPECT_EQ(Validate(R"({"a":1,"b":[1,2,}")", &info, &error), Reason::kMalformedJson);
  EXPECT_THAT(std::string(error.message()), HasSubstr("malformed JSON at byte 16"));

  EXPECT_EQ(Validate(KernelWith(R"("name":")" + std::string(1000, '\x01') + "\""), &info, &error),
            Reason::kMalformedJson);
  for (const char c : error.message()) {
    EXPECT_GE(static_cast<unsigned char>(c), 0x20u);
    EXPECT_LT(static_cast<unsigned char>(c), 0x7Fu);
  }

  EXPECT_EQ(Validate(KernelWith(R"("tid":")" + std::string(1000, 'x') + "\""), &info, &error),
            Reason::kWrongType);
  EXPECT_LT(error.size, 120u);
  EXPECT_THAT(std::string(error.message()), HasSubstr("..."));
  EXPECT_EQ(error.message().size(), error.size);
}

// kernel_time's graph ids: optional, unsigned 64-bit, and each required with the other (as Decode
// says; the messages name the field).
TEST(ValidatorTest, KernelTimeGraphIds) {
  const std::string head =
      R"({"type":"kernel_time","version":1,"ts_ns":1,"pid":2,"seq":3,"correlation_id":77,)"
      R"("device":1,"context":5,"stream":6,"start_ns":1000,"end_ns":3000,"duration_ns":2000)";
  EXPECT_EQ(ExpectAgreement(head + "}"), Reason::kOk);
  EXPECT_EQ(ExpectAgreement(head + R"(,"graph_id":9,"graph_node_id":18446744073709551615})"),
            Reason::kOk);
  EXPECT_EQ(ExpectAgreement(head + R"(,"graph_node_id":1,"graph_id":0})"), Reason::kOk);
  EXPECT_EQ(ExpectAgreement(head + R"(,"graph_id":9,"graph_node_id":-1})"), Reason::kOutOfRange);
  EXPECT_EQ(ExpectAgreement(head + R"(,"graph_id":true,"graph_node_id":1})"), Reason::kWrongType);
  ValidateError error;
  LineInfo info;
  EXPECT_EQ(Validate(head + R"(,"graph_id":9})", &info, &error), Reason::kMissingField);
  EXPECT_EQ(error.message(),
            R"(kernel_time: field "graph_node_id" is required when "graph_id" is present)");
  EXPECT_EQ(Validate(head + R"(,"graph_node_id":9})", &info, &error), Reason::kMissingField);
  EXPECT_EQ(error.message(),
            R"(kernel_time: field "graph_id" is required when "graph_node_id" is present)");
  const std::string both = head + R"(,"graph_id":9,"graph_node_id":10})";  // info points into it
  ASSERT_EQ(Validate(both, &info, &error), Reason::kOk);
  EXPECT_TRUE(info.Has(Fact::graph_node_id));
  EXPECT_EQ(info.Uint(Fact::graph_node_id), 10u);
}

// timing_stopped and timing_stopped_reason: optional, together, the reason one of two names
// (schema/v1/stats.schema.json).
TEST(ValidatorTest, TimingStoppedComesWithItsReason) {
  const std::string head =
      R"({"type":"stats","version":1,"ts_ns":1,"pid":2,"seq":3,"emitted":4,"dropped":0,)"
      R"("ring_capacity":8,"interval_ns":5)";
  EXPECT_EQ(ExpectAgreement(head + "}"), Reason::kOk);
  EXPECT_EQ(ExpectAgreement(head + R"(,"timing_stopped":9,"timing_stopped_reason":"records_stopped"})"),
            Reason::kOk);
  EXPECT_EQ(ExpectAgreement(head + R"(,"timing_stopped_reason":"unavailable","timing_stopped":0})"),
            Reason::kOk);
  EXPECT_EQ(ExpectAgreement(head + R"(,"timing_stopped":9,"timing_stopped_reason":"stolen"})"),
            Reason::kOutOfRange);
  EXPECT_EQ(ExpectAgreement(head + R"(,"timing_stopped":-1,"timing_stopped_reason":"unavailable"})"),
            Reason::kOutOfRange);
  EXPECT_EQ(ExpectAgreement(head + R"(,"timing_stopped":1,"timing_stopped_reason":1})"),
            Reason::kWrongType);
  // One without the other: Decode and Validate alike (the schema's dependentRequired, one table).
  EXPECT_EQ(ExpectAgreement(head + R"(,"timing_stopped":9})"), Reason::kMissingField);
  EXPECT_EQ(ExpectAgreement(head + R"(,"timing_stopped_reason":"unavailable"})"),
            Reason::kMissingField);
  EXPECT_EQ(Decode(head + R"(,"timing_stopped":9})").reason, Reason::kMissingField);
  ValidateError error;
  LineInfo info;
  EXPECT_EQ(Validate(head + R"(,"timing_stopped":9})", &info, &error), Reason::kMissingField);
  EXPECT_EQ(error.message(), R"(stats: field "timing_stopped_reason" is required when )"
                             R"("timing_stopped" is present)");
  EXPECT_EQ(Validate(head + R"(,"timing_stopped_reason":"unavailable"})", &info, &error),
            Reason::kMissingField);
  EXPECT_EQ(error.message(), R"(stats: field "timing_stopped" is required when )"
                             R"("timing_stopped_reason" is present)");
}

TEST(ValidatorTest, NullInfoAndErrorAreAllowed) {
  EXPECT_EQ(Validate(EncodeLine(RealisticKernel()), nullptr, nullptr), Reason::kOk);
  EXPECT_EQ(Validate("{", nullptr, nullptr), Reason::kMalformedJson);
  EXPECT_EQ(Validate(KernelWith(R"("tid":-1)"), nullptr, nullptr), Reason::kOutOfRange);
}

// Many members, unknown ones among them: all checked, and the last of a repeated name counts
// (even when its name is escaped).
TEST(ValidatorTest, ManyMembers) {
  std::string tail;
  for (int i = 0; i < 100; ++i) tail += R"("extra)" + std::to_string(i) + R"(":)" + std::to_string(i) + ",";
  tail += R"("tid":77,"t\u0069d":78,"device":5,"d\u0065vice":6,"last":"end")";
  const std::string line = KernelWith(tail);
  EXPECT_EQ(ExpectAgreement(line), Reason::kOk);
  LineInfo info;
  ASSERT_EQ(Validate(line, &info, nullptr), Reason::kOk);
  EXPECT_EQ(info.Uint(Fact::device), 6u);
  EXPECT_EQ(info.Raw(Fact::device), "6");
  const DecodeResult decoded = Decode(line);
  ASSERT_TRUE(decoded.ok()) << decoded.message;
  EXPECT_EQ(std::get<OwnedKernelEvent>(decoded.event).tid, 78);
  EXPECT_EQ(Validate(KernelWith(tail + R"(,"tid":-1)"), &info, nullptr), Reason::kOutOfRange);
}

// A string fact: a view into the line without an escape, else unescaped into the scratch buffer
// when it fits; an absent fact reads as nothing.
TEST(ValidatorTest, FactText) {
  const std::string line = KernelWith(
      R"("demangled":"a\"b\u00e9\ud83d\ude00","name":"xyz","limiting_resource":"w\u0061rps")");
  LineInfo info;
  ASSERT_EQ(Validate(line, &info, nullptr), Reason::kOk);
  char scratch[16];
  std::string_view s;
  ASSERT_TRUE(info.Text(Fact::demangled, scratch, sizeof(scratch), &s));
  EXPECT_EQ(s, "a\"b\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_FALSE(info.Text(Fact::demangled, scratch, 8, &s));  // needs 9 bytes
  ASSERT_TRUE(info.Text(Fact::limiting_resource, scratch, sizeof(scratch), &s));
  EXPECT_EQ(s, "warps");
  ASSERT_TRUE(info.Text(Fact::name, scratch, 0, &s));  // no escape: points into the line
  EXPECT_EQ(s, "xyz");
  EXPECT_GE(s.data(), line.data());
  EXPECT_LT(s.data(), line.data() + line.size());
  EXPECT_FALSE(info.Text(Fact::device, scratch, sizeof(scratch), &s));  // not a string
  EXPECT_FALSE(info.Has(Fact::duration_ns));                            // a kernel_time member
  EXPECT_FALSE(info.Text(Fact::duration_ns, scratch, sizeof(scratch), &s));
  EXPECT_EQ(info.Raw(Fact::duration_ns), "");
  EXPECT_EQ(info.Uint(Fact::duration_ns), 0u);
  EXPECT_EQ(info.header, RealisticKernel().header);
}

TEST(ValidatorTest, MakesNoAllocation) {
  std::vector<std::string> lines = testing::SampleLines();
  lines.push_back(KernelWith(R"("x":1.7976931348623157e308,"y":0.)" + std::string(2000, '0') +
                             "1,\"z\":" + std::string(1000, '7') + ".5e-700"));
  lines.push_back(KernelWith(R"("grid":[1,2,-1])"));
  lines.push_back(KernelWith(R"("occupancy":0.99999999999999999999999999999999999999999)"));
  lines.push_back("{\"a\":\"\xC3\"}");
  lines.push_back(std::string(100'000, '['));
  LineInfo info;
  ValidateError error;
  for (const std::string& line : lines) {
    const int64_t before = test_support::AllocationsOnThisThread();
    Validate(line, &info, &error);
    char scratch[8];
    std::string_view text;
    info.Text(Fact::demangled, scratch, sizeof(scratch), &text);
    EXPECT_EQ(test_support::AllocationsOnThisThread(), before) << Printable(line);
  }
  EXPECT_GT(test_support::AllocationsOnThisThread(), 0);  // the counter works
}

}  // namespace
}  // namespace cuflight::schema
