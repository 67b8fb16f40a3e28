// Small formatting and parsing helpers shared by the report's renderers and the command line.
#ifndef CUFLIGHT_REPORT_TEXT_FORMAT_H_
#define CUFLIGHT_REPORT_TEXT_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/base/clip.h"
#include "cuflight/schema/events.h"

namespace cuflight::report {

// The word for `n` things: `one` when n is 1, `many` otherwise.
constexpr std::string_view PluralWord(int64_t n, std::string_view one, std::string_view many) {
  return n == 1 ? one : many;
}

// `n` and the word for it: "1 file", "3 files".
std::string Plural(int64_t n, std::string_view one, std::string_view many);

// "850ns", "12.3us", "1.23ms", "123ms", "4.56s": three significant digits.
std::string FormatDuration(uint64_t ns);

// A fraction as an integer percent, rounded half up: 0.875 -> "88%".
std::string FormatPercent(double fraction);

// A share that may be small, as a percent with two significant digits (at least the integer
// part): 0.03 -> "3.0%", 0.0025 -> "0.25%", 0.42 -> "42%", 1 -> "100%", 0 -> "0%".
std::string FormatShare(double fraction);

// Bytes, never rounded up: "512 B", "48 KiB", "40.5 KiB" (KiB floored to one decimal).
std::string FormatBytes(int64_t bytes);

// True when a resource limits the occupancy, i.e. it is below 1. At full occupancy nothing
// limits a kernel, whatever limiting_resource names (the resource that would bind first).
inline bool Limited(const schema::OccupancyFields& f) { return f.occupancy < 1.0; }

// The LIMITER a table shows: "regs", "smem", "warps", "blocks", "barriers", "cluster", "other";
// "none" at full occupancy (Limited() false).
std::string_view LimiterLabel(const schema::OccupancyFields& f);

// "256" for 256x1x1, "16x16" for 16x16x1, "8x8x4".
std::string FormatDim3(const schema::Dim3& d);

// A stream as events name it (CUPTI's stream id): "7"; "?" for 0xffffffff (CUPTI could not say);
// hex ("0x7f3a2c001230") for a value above 32 bits (a CUstream handle, as logs of older
// producers hold).
std::string FormatStreamId(uint64_t stream);

// Clip (cuflight/base/clip.h): a text cut to a byte budget at a UTF-8 boundary, ending in "...".
using base::Clip;

// One kernel name shortened to at most `width` bytes (width >= 8) as ShortenKernelNames does for
// a name shown alone (kernel_names.h).
std::string ShortenKernelName(std::string_view name, size_t width);

// `text` as lines of at most `width` bytes, the first starting with `first`, the others with
// `rest`, broken at spaces. Never cuts: a word longer than a line stands alone on its line.
std::vector<std::string> WrapWords(std::string_view text, size_t width, std::string_view first,
                                   std::string_view rest);

// "; did you mean NAME?" for the name of `names` closest to `input` (ASCII case ignored) when it
// is a likely typo: at most 2 edits (insert, delete, substitute, swap two neighbours) away, and
// fewer than half of `input`'s length; "" otherwise. Between names as close, one starting with
// `input`'s first letter wins, then the first in `names`.
std::string DidYouMean(std::string_view input, const std::vector<std::string>& names);

// --since/--until: RFC 3339 ("2026-11-21T07:00:00Z", fractional seconds and a +hh:mm/-hh:mm
// offset allowed) or seconds since the Unix epoch ("1732000000", "1732000000.5"), as ns since the
// epoch. nullopt when it is neither.
std::optional<int64_t> ParseTimeBound(std::string_view text);

// Quotes a CSV field as RFC 4180 says: in double quotes, with '"' doubled, when it holds a comma,
// a double quote, CR or LF; as is otherwise.
std::string CsvField(std::string_view field);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_TEXT_FORMAT_H_
