#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <variant>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "sample_events.h"

namespace cuflight::schema {
namespace {

using testing::InvalidUtf8Cases;

KernelEvent KernelNamed(std::string_view name) {
  KernelEvent k;
  k.api = "cuLaunchKernel";
  k.name = name;
  k.demangled = "d";
  return k;
}

std::string EncodeKernelNamed(std::string_view name) {
  std::string line(6 * name.size() + 4096, '\0');
  line.resize(Encode(KernelNamed(name), line.data(), line.size()));
  return line;
}

// The JSON text Encode writes for the kernel's `name`, quotes included.
std::string EncodedName(std::string_view name) {
  const std::string line = EncodeKernelNamed(name);
  const size_t begin = line.find(R"(,"name":)");
  const size_t end = line.find(R"(,"demangled":)");
  if (begin == std::string::npos || end == std::string::npos) return std::string("<no name>");
  return line.substr(begin + 8, end - begin - 8);
}

// The name Decode reads back from the encoded line.
std::string RoundTripName(std::string_view name) {
  const DecodeResult result = Decode(EncodeKernelNamed(name));
  if (!result.ok()) return std::string("<decode failed: ").append(result.message);
  return std::get<OwnedKernelEvent>(result.event).name;
}

std::string Quoted(std::string_view s) {
  std::string quoted(1, '"');
  quoted.append(s);
  quoted += '"';
  return quoted;
}

// One line: a single '\n', at the end, and no other byte below 0x20.
void ExpectOneLine(const std::string& line) {
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  for (size_t i = 0; i + 1 < line.size(); ++i) {
    EXPECT_GE(static_cast<unsigned char>(line[i]), 0x20u) << "raw control byte at " << i;
  }
}

TEST(StringEscapeTest, QuotesAndBackslashes) {
  EXPECT_EQ(EncodedName(R"(a"b)"), R"("a\"b")");
  EXPECT_EQ(EncodedName(R"(a\b)"), R"("a\\b")");
  EXPECT_EQ(EncodedName(R"(\")"), R"("\\\"")");
  EXPECT_EQ(EncodedName(R"("})"), R"("\"}")");
  EXPECT_EQ(RoundTripName(R"(x"\\"y\)"), R"(x"\\"y\)");
}

TEST(StringEscapeTest, EveryControlCharacterAndDel) {
  for (int c = 0; c <= 0x7F; ++c) {
    if (c >= 0x20 && c < 0x7F) continue;
    const std::string name = {'a', static_cast<char>(c), 'b'};
    std::string expected;
    switch (c) {
      case '\b':
        expected = R"(\b)";
        break;
      case '\f':
        expected = R"(\f)";
        break;
      case '\n':
        expected = R"(\n)";
        break;
      case '\r':
        expected = R"(\r)";
        break;
      case '\t':
        expected = R"(\t)";
        break;
      default: {
        char u[8];
        std::snprintf(u, sizeof(u), "\\u%04x", c);
        expected = u;
      }
    }
    EXPECT_EQ(EncodedName(name), Quoted(std::string(1, 'a').append(expected).append("b")))
        << "byte " << c;
    EXPECT_EQ(RoundTripName(name), name) << "byte " << c;
    ExpectOneLine(EncodeKernelNamed(name));
  }
}

TEST(StringEscapeTest, ValidMultibyteTextPassesThrough) {
  for (const std::string_view text :
       {"caf\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC", "\xF0\x9F\x98\x80", "\xC2\x80", "\xEF\xBF\xBF",
        "\xF4\x8F\xBF\xBF", "\xEF\xBF\xBD", "\xED\x9F\xBF", "\xEE\x80\x80"}) {
    EXPECT_EQ(EncodedName(text), Quoted(text));
    EXPECT_EQ(RoundTripName(text), text);
  }
}

TEST(StringEscapeTest, LineAndParagraphSeparatorsAreEscaped) {
  EXPECT_EQ(EncodedName("a\xE2\x80\xA8"
                        "b\xE2\x80\xA9"
                        "c"),
            R"("a\u2028b\u2029c")");
  EXPECT_EQ(RoundTripName("a\xE2\x80\xA8"
                          "b"),
            "a\xE2\x80\xA8"
            "b");
  EXPECT_EQ(EncodedName("\xE2\x80\xA7\xE2\x80\xAA"), "\"\xE2\x80\xA7\xE2\x80\xAA\"");
}

TEST(StringEscapeTest, IllFormedUtf8BecomesOneReplacementPerMaximalSubpart) {
  for (const testing::InvalidUtf8Case& c : InvalidUtf8Cases()) {
    std::string hex;
    for (const unsigned char b : c.input) {
      char h[4];
      std::snprintf(h, sizeof(h), "%02X ", b);
      hex += h;
    }
    EXPECT_EQ(EncodedName(c.input), Quoted(c.decoded)) << hex;
    EXPECT_EQ(RoundTripName(c.input), c.decoded) << hex;
  }
}

TEST(StringEscapeTest, TruncatedSequenceAtTheVeryEndOfTheName) {
  // The name's bytes end mid-sequence; the byte after the view must not be read.
  const std::string storage = "ab\xE6\x97\xA5";
  EXPECT_EQ(EncodedName(std::string_view(storage).substr(0, 4)), "\"ab\xEF\xBF\xBD\"");
}

TEST(StringEscapeTest, LongNamesEncodeOrReturnZero) {
  const std::string name = std::string(100'000, '"') + std::string(100'000, '\x01');
  const size_t needed = EncodeKernelNamed(name).size();
  ASSERT_GT(needed, 800'000u);
  std::string buf(needed, '\0');
  EXPECT_EQ(Encode(KernelNamed(name), buf.data(), needed), needed);
  EXPECT_EQ(Encode(KernelNamed(name), buf.data(), needed - 1), 0u);
  EXPECT_EQ(Encode(KernelNamed(name), buf.data(), 4096), 0u);
  ExpectOneLine(buf);
  EXPECT_EQ(RoundTripName(name), name);
}

}  // namespace
}  // namespace cuflight::schema
