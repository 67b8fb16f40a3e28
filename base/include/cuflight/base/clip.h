// Cutting a text to a byte budget for a line meant for people (a note, a table cell, an error).
#ifndef CUFLIGHT_BASE_CLIP_H_
#define CUFLIGHT_BASE_CLIP_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace cuflight::base {

// `text` cut to at most `max` bytes (>= 4) at a UTF-8 character boundary, ending in "..."; whole
// when it fits.
inline std::string Clip(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  size_t cut = max > 3 ? max - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0u) == 0x80u) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

}  // namespace cuflight::base

#endif  // CUFLIGHT_BASE_CLIP_H_
