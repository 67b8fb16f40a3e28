// Parsing of flag values. Every flag is taken as text by CLI11 and converted here, so that a bad
// value always yields one UsageError line that names the flag, the text and what is allowed.
#ifndef CUFLIGHT_CLI_ARG_PARSE_H_
#define CUFLIGHT_CLI_ARG_PARSE_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cuflight::cli {

// The values a numeric flag accepts, as the error line words them:
// "<owner> <min>..<max> <unit>", e.g. "device a100 allows 1..1024 threads per block".
struct Allowed {
  int64_t min = 0;
  int64_t max = 0;
  std::string_view unit;
  std::string owner = "allowed";
};
std::string Describe(const Allowed& allowed);

// Throws UsageError "<flag> <text> is out of range: <allowed>".
[[noreturn]] void ThrowOutOfRange(std::string_view flag, std::string_view text,
                                  std::string_view allowed);

// A decimal integer (optional sign) within [allowed.min, allowed.max]. Throws UsageError
// "<flag> <text> is not an integer: ..." or "<flag> <text> is out of range: ...".
int64_t ParseInteger(std::string_view flag, std::string_view text, const Allowed& allowed);

// As ParseInteger, also accepting a unit, any case, after optional spaces: B; K, KB or KiB
// (times 1024); M, MB or MiB (times 1024 x 1024). KB is 1024-based, as the CUDA documentation
// uses it. "96KB", "96 KiB", "96k", "98304". Throws UsageError naming the flag for another unit.
int64_t ParseBytes(std::string_view flag, std::string_view text, const Allowed& allowed);

// "X", "X,Y" or "X,Y,Z" (or with 'x' between the parts: "16x16", "8x8x4"); missing trailing
// parts are 1. Only the syntax is checked here (each part
// an integer, at most three parts); `expected` words the accepted form for the error line, e.g.
// "X,Y,Z with each part 1..1024". Ranges are the caller's, with ThrowOutOfRange.
std::array<int64_t, 3> ParseTriple(std::string_view flag, std::string_view text,
                                   std::string_view expected);

struct ComputeCapability {
  int major = 0;
  int minor = 0;
};
// "MAJOR.MINOR" with MAJOR 1..99 and MINOR 0..9, e.g. "9.0". Throws UsageError naming the flag.
ComputeCapability ParseComputeCapability(std::string_view flag, std::string_view text);

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_ARG_PARSE_H_
