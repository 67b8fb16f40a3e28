// libFuzzer target: arbitrary bytes as one line, through Validate, Decode and the reference
// decoder (tests/support/reference_decoder.h, over nlohmann/json). abort() when they disagree on:
//   - the Reason (Validate and Decode promise the reference's Reason for every line),
//   - whether the header is valid, and its value,
//   - the event of an accepted line (Decode's and Validate's, when it decodes, equal the
//     reference's; Validate's type is its type),
//   - the message of a rejected line (Decode's is Validate's),
//   - the `type` text of a line that is one object, and every fact of an accepted line (its raw
//     text parses, with nlohmann, to the value nlohmann gives that member; an integer's value).
// An accepted line must also survive Encode(Decode(line)): the new line is accepted by both, and
// decodes to the same event. LineDecoder (the log readers' decoder) must give Decode's result:
// reason, message, header and event.
//
// Build and run: scripts/fuzz (clang++ -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/line_decoder.h"
#include "cuflight/schema/validator.h"
#include "reference_decoder.h"

namespace {

using cuflight::schema::Decode;
using cuflight::schema::DecodeResult;
using cuflight::schema::LineInfo;
using cuflight::schema::Reason;
using cuflight::schema::ReasonName;
using cuflight::schema::Validate;
using cuflight::schema::ValidateError;

[[noreturn]] void Disagree(std::string_view line, const char* what, std::string_view detail) {
  std::fprintf(stderr, "line_fuzzer: %s: %.*s\nline (%zu bytes): ", what,
               static_cast<int>(detail.size()), detail.data(), line.size());
  for (const char c : line.substr(0, 2000)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      std::fputc(c, stderr);
    } else {
      std::fprintf(stderr, "\\x%02x", u);
    }
  }
  std::fputc('\n', stderr);
  std::abort();
}

void CheckFacts(std::string_view line, const LineInfo& info, bool accepted) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    Disagree(line, "Validate saw an object nlohmann cannot parse", e.what());
  }
  if (!doc.is_object()) Disagree(line, "Validate saw an object, nlohmann not", doc.type_name());
  if (!info.type_text.empty() &&
      !(doc.contains("type") && doc["type"].is_string() && doc["type"] == info.type_text)) {
    Disagree(line, "type_text is not the type nlohmann reads", info.type_text);
  }
  if (!accepted) return;
  for (int f = 0; f < cuflight::schema::kFactCount; ++f) {
    const auto fact = static_cast<cuflight::schema::Fact>(f);
    const std::string key(cuflight::schema::kFactNames[f]);
    if (info.Has(fact) != doc.contains(key)) Disagree(line, "a fact's presence differs", key);
    if (!info.Has(fact)) continue;
    nlohmann::json member;
    try {
      member = nlohmann::json::parse(info.Raw(fact));
    } catch (const nlohmann::json::exception& e) {
      Disagree(line, "a fact's raw text does not parse", e.what());
    }
    if (member != doc[key]) Disagree(line, "a fact's raw text holds another value", key);
    if (member.is_number_integer() && fact != cuflight::schema::Fact::occupancy &&
        info.Uint(fact) != member.get<uint64_t>()) {  // occupancy: a number, not an integer
      Disagree(line, "a fact's integer value differs", key);
    }
  }
}

void CheckRoundTrip(std::string_view line, const DecodeResult& decoded) {
  std::vector<char> buf(4 * line.size() + 4096);
  const size_t n = cuflight::schema::Encode(decoded.event, buf.data(), buf.size());
  if (n == 0) Disagree(line, "Encode failed on a decoded event", "");
  const std::string_view again(buf.data(), n);
  const DecodeResult redecoded = Decode(again);
  if (!redecoded.ok()) Disagree(line, "the re-encoded line is rejected", redecoded.message);
  if (!(redecoded.event == decoded.event)) Disagree(line, "the re-encoded line differs", again);
  if (Validate(again, nullptr, nullptr) != Reason::kOk) {
    Disagree(line, "Validate rejects the re-encoded line", again);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  const DecodeResult reference = cuflight::test_support::ReferenceDecode(line);
  const DecodeResult decoded = Decode(line);
  LineInfo info;
  ValidateError error;
  const Reason reason = Validate(line, &info, &error);
  if (reason != reference.reason || decoded.reason != reference.reason) {
    const std::string detail =
        "Validate " + std::string(ReasonName(reason)) + " (" + std::string(error.message()) +
        "), Decode " + std::string(ReasonName(decoded.reason)) + ", reference " +
        std::string(ReasonName(reference.reason)) + " (" + reference.message + ")";
    Disagree(line, "verdicts differ", detail);
  }
  if (info.header_valid != reference.header.has_value()) {
    Disagree(line, "header validity differs", "");
  }
  if (reference.header && !(info.header == *reference.header)) Disagree(line, "headers differ", "");
  if (decoded.header != reference.header) Disagree(line, "Decode's header differs", "");
  if (!decoded.ok() && decoded.message != error.message()) {
    Disagree(line, "Decode's message is not Validate's", decoded.message);
  }
  if (reference.ok()) {
    if (!info.type_known || info.type != TypeOf(reference.event)) {
      Disagree(line, "event types differ", "");
    }
    if (!(decoded.event == reference.event)) Disagree(line, "Decode's event differs", "");
    static cuflight::schema::OwnedEvent event;  // reused, as the collector does
    LineInfo again;
    if (Validate(line, &again, nullptr, ~uint32_t{0}, &event) != Reason::kOk ||
        !(event == reference.event)) {
      Disagree(line, "Validate's decoded event differs", "");
    }
  }
  if (reason != Reason::kMalformedJson && reason != Reason::kNotAnObject) {
    CheckFacts(line, info, reason == Reason::kOk);
  }
  if (decoded.ok()) CheckRoundTrip(line, decoded);
  static cuflight::schema::LineDecoder line_decoder;  // one per process: reused, as readers do
  static DecodeResult reused;
  line_decoder.Decode(line, &reused);
  if (reused.reason != decoded.reason) Disagree(line, "LineDecoder's verdict differs", "");
  if (reused.message != decoded.message) Disagree(line, "LineDecoder's message differs", "");
  if (reused.header != decoded.header) Disagree(line, "LineDecoder's header differs", "");
  if (decoded.ok() && !(reused.event == decoded.event)) {
    Disagree(line, "LineDecoder's event differs", "");
  }
  return 0;
}
