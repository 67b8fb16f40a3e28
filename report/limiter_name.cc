#include "cuflight/report/limiter_name.h"

#include <cctype>
#include <vector>

#include "cuflight/report/text_format.h"

namespace cuflight::report {
namespace {

using schema::Resource;

struct Alias {
  std::string_view name;
  Resource resource;
};
constexpr Alias kAliases[] = {{"regs", Resource::kRegisters},
                              {"smem", Resource::kSharedMem},
                              {"shared_memory", Resource::kSharedMem}};

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<Resource> ParseLimiter(std::string_view name) {
  const std::string lower = Lower(name);
  for (const Alias& a : kAliases) {
    if (a.name == lower) return a.resource;
  }
  return schema::ResourceFromName(lower);
}

std::string LimiterError(std::string_view name) {
  std::vector<std::string> names;
  std::string list;
  for (int i = 0; i < schema::kResourceCount; ++i) {
    const auto r = static_cast<Resource>(i);
    names.emplace_back(schema::ResourceName(r));
    if (!list.empty()) list += ", ";
    list += schema::ResourceName(r);
    for (const Alias& a : kAliases) {
      if (a.resource == r && a.name != "shared_memory") list += " (" + std::string(a.name) + ")";
    }
  }
  for (const Alias& a : kAliases) names.emplace_back(a.name);
  return "--limiter '" + std::string(name) + "' is not a resource: use one of " + list +
         DidYouMean(name, names);
}

}  // namespace cuflight::report
