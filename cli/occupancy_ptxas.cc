#include "occupancy_ptxas.h"

#include <charconv>
#include <map>
#include <optional>

namespace cuflight::cli {
namespace {

// The decimal number that ends right before `at` in `line` (spaces skipped), e.g. the 92 of
// "Used 92 registers" for `at` at "registers"; nullopt when there is none or it overflows.
std::optional<int64_t> NumberBefore(std::string_view line, size_t at) {
  size_t end = at;
  while (end > 0 && line[end - 1] == ' ') --end;
  size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  if (begin == end) return std::nullopt;
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(line.data() + begin, line.data() + end, value);
  if (ec != std::errc() || ptr != line.data() + end) return std::nullopt;
  return value;
}

// The number before `word` in `line`, or `otherwise` when `word` is absent; nullopt when `word`
// is present without a readable number.
std::optional<int64_t> Field(std::string_view line, std::string_view word, int64_t otherwise) {
  const size_t at = line.find(word);
  if (at == std::string_view::npos) return otherwise;
  return NumberBefore(line, at);
}

// The text between the quotes after `after` in `line`: "'NAME'" -> NAME.
std::string Quoted(std::string_view line, size_t after) {
  const size_t open = line.find('\'', after);
  if (open == std::string_view::npos) return "";
  const size_t close = line.find('\'', open + 1);
  if (close == std::string_view::npos) return "";
  return std::string(line.substr(open + 1, close - open - 1));
}

// The number right after `key` in `line` ("REG:92" -> 92), or `otherwise` when `key` is absent;
// nullopt when `key` is present without a readable number.
std::optional<int64_t> After(std::string_view line, std::string_view key, int64_t otherwise) {
  const size_t at = line.find(key);
  if (at == std::string_view::npos) return otherwise;
  size_t end = at + key.size();
  while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
  int64_t value = 0;
  const char* first = line.data() + at + key.size();
  const auto [ptr, ec] = std::from_chars(first, line.data() + end, value);
  if (ec != std::errc() || ptr == first) return std::nullopt;
  return value;
}

struct Properties {
  int64_t stack_frame = 0, spill_stores = 0, spill_loads = 0;
};

}  // namespace

std::vector<PtxasKernel> ParsePtxasOutput(std::string_view text) {
  constexpr std::string_view kEntry = "Compiling entry function ";
  constexpr std::string_view kProperties = "Function properties for ";
  std::vector<PtxasKernel> kernels;
  std::map<std::string, Properties, std::less<>> properties;
  std::optional<PtxasKernel> entry;  // named by "Compiling entry function", not yet "Used"
  std::string properties_of;         // the function the next "stack frame" line describes
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

    if (const size_t at = line.find(kEntry); at != std::string_view::npos) {
      entry = PtxasKernel{};
      entry->name = Quoted(line, at + kEntry.size());
      if (const size_t f = line.find(" for ", at); f != std::string_view::npos) {
        entry->arch = Quoted(line, f);
      }
      continue;
    }
    if (const size_t at = line.find(kProperties); at != std::string_view::npos) {
      std::string_view name = line.substr(at + kProperties.size());
      while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
      properties_of = std::string(name);
      continue;
    }
    if (line.find("bytes stack frame") != std::string_view::npos) {
      const auto stack = Field(line, "bytes stack frame", 0);
      const auto stores = Field(line, "bytes spill stores", 0);
      const auto loads = Field(line, "bytes spill loads", 0);
      if (stack && stores && loads) properties[properties_of] = {*stack, *stores, *loads};
      properties_of.clear();
      continue;
    }
    // cuobjdump --dump-resource-usage: " Function NAME:" then "  REG:92 STACK:0 SHARED:16640 ...".
    if (const size_t at = line.find("Function ");
        at != std::string_view::npos && line.find("REG:") == std::string_view::npos) {
      std::string_view name = line.substr(at + 9);
      while (!name.empty() && (name.back() == ' ' || name.back() == ':')) name.remove_suffix(1);
      entry = PtxasKernel{};
      entry->name = std::string(name);
      continue;
    }
    if (line.find("REG:") != std::string_view::npos) {
      const auto regs = After(line, "REG:", 0);
      const auto smem = After(line, "SHARED:", 0);
      const auto stack = After(line, "STACK:", 0);
      if (!regs || !smem || !stack || *regs > 65535 || *smem > (int64_t{1} << 40)) continue;
      PtxasKernel kernel = entry.value_or(PtxasKernel{});
      entry.reset();
      kernel.registers = static_cast<int>(*regs);
      kernel.static_smem = *smem;
      kernel.stack_frame = *stack;
      kernels.push_back(std::move(kernel));
      continue;
    }
    const size_t used = line.find("Used ");
    const size_t registers = line.find(" registers");
    if (used == std::string_view::npos || registers == std::string_view::npos || registers < used) {
      continue;
    }
    const std::optional<int64_t> regs = NumberBefore(line, registers);
    const std::optional<int64_t> smem = Field(line, " bytes smem", 0);
    if (!regs || !smem || *regs > 65535 || *smem > (int64_t{1} << 40)) continue;
    PtxasKernel kernel = entry.value_or(PtxasKernel{});
    entry.reset();
    kernel.registers = static_cast<int>(*regs);
    kernel.static_smem = *smem;
    if (const auto p = properties.find(kernel.name);
        !kernel.name.empty() && p != properties.end()) {
      kernel.stack_frame = p->second.stack_frame;
      kernel.spill_stores = p->second.spill_stores;
      kernel.spill_loads = p->second.spill_loads;
    }
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

std::string_view StripPtxasUnit(std::string_view text) {
  auto trim = [](std::string_view t) {
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    return t;
  };
  text = trim(text);
  for (const std::string_view unit : {"bytes smem", "registers"}) {
    if (text.size() > unit.size() && text.ends_with(unit)) {
      return trim(text.substr(0, text.size() - unit.size()));
    }
  }
  return text;
}

}  // namespace cuflight::cli
