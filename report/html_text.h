// Small pieces the HTML report is built from: escaping, dates, the palette.
#ifndef CUFLIGHT_REPORT_HTML_TEXT_H_
#define CUFLIGHT_REPORT_HTML_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "cuflight/schema/occupancy_fields.h"

namespace cuflight::report::html {

// `text` made safe in HTML and SVG text and in double- or single-quoted attribute values: & < >
// " ' become character references; a control character other than tab, LF and CR, and each byte
// of invalid UTF-8 (e.g. a multi-byte character cut by shortening), becomes U+FFFD.
std::string Escape(std::string_view text);

// "2026-11-21 07:00:00 UTC" (seconds floored); "-" for ns <= 0.
std::string FormatUtc(int64_t ns);

// The span of a run, to the millisecond, so that a run under a second is not "07:00:00 UTC to
// 07:00:00 UTC": "2026-11-21 07:00:00.012 to 07:00:00.524 UTC (512ms)", the second date only
// when it differs; FormatUtc's "-" for an end <= 0.
std::string FormatUtcSpan(int64_t first_ns, int64_t last_ns);

// A number with a thin grouping: 1234567 -> "1,234,567".
std::string FormatCount(uint64_t n);

// A number for an SVG coordinate: at most two decimals, no trailing zeros, "." as the point.
std::string Coord(double v);

// Okabe-Ito colours (colour-blind safe).
inline constexpr std::string_view kBlue = "#0072B2";
inline constexpr std::string_view kOrange = "#E69F00";
inline constexpr std::string_view kGreen = "#009E73";
inline constexpr std::string_view kPurple = "#CC79A7";
inline constexpr std::string_view kSky = "#56B4E9";
inline constexpr std::string_view kVermillion = "#D55E00";
inline constexpr std::string_view kYellow = "#F0E442";
inline constexpr std::string_view kGrey = "#999999";

// The colour of a limiting resource, the same in every chart.
std::string_view ResourceColor(schema::Resource r);

// Colours of the kernels the timeline names (the top ones by GPU time); others are kGrey.
inline constexpr int kKernelColorCount = 7;
std::string_view KernelColor(int rank);

}  // namespace cuflight::report::html

#endif  // CUFLIGHT_REPORT_HTML_TEXT_H_
