#include "cuflight/report/device_spec.h"

#include <fmt/format.h>

#include <cctype>
#include <optional>
#include <regex>
#include <vector>

#include "cuflight/report/text_format.h"

namespace cuflight::report {
namespace {

using occupancy::DevicePreset;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Lower case, without the vendor words and without separators.
std::string Normalized(std::string_view s) {
  std::string lower = Lower(s);
  for (const std::string_view word : {"nvidia", "tesla", "geforce"}) {
    for (size_t at = lower.find(word); at != std::string::npos; at = lower.find(word)) {
      lower.erase(at, word.size());
    }
  }
  std::string out;
  for (const char c : lower) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}

std::vector<std::string_view> Aliases(const DevicePreset& p) {
  std::vector<std::string_view> out;
  std::string_view rest = p.aliases;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    out.push_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return out;
}

// The forms of a preset's names a reported name is compared with: key, aliases, name, and the
// name without its parenthesised form factor.
std::vector<std::string> Forms(const DevicePreset& p) {
  std::vector<std::string> forms = {Normalized(p.key), Normalized(p.name)};
  for (const std::string_view a : Aliases(p)) forms.push_back(Normalized(a));
  const std::string_view name = p.name;
  if (const size_t paren = name.find(" ("); paren != std::string_view::npos) {
    forms.push_back(Normalized(name.substr(0, paren)));
  }
  return forms;
}

std::string Describe(const DevicePreset& p) {
  return fmt::format("preset {} ({}, {} SMs)", p.key, p.name, p.limits.sm_count);
}

struct Capability {
  int major = 0;
  int minor = 0;
};

// sm_90, sm90, sm_90a, sm_100f, compute_90, cc 9.0, cc9.0, 9.0.
std::optional<Capability> ParseCapability(std::string_view spec) {
  static const std::regex kArch(R"(^\s*(?:sm|compute)_?(\d)(\d{1,2})[af]?\s*$)", std::regex::icase);
  static const std::regex kDotted(R"(^\s*(?:cc\s*)?(\d{1,2})\.(\d)\s*$)", std::regex::icase);
  const std::string s(spec);
  std::smatch m;
  if (std::regex_match(s, m, kArch)) {
    // sm_XY: X the major version; sm_XYZ (10.0 and later): XY the major, Z the minor.
    const std::string digits = m[1].str() + m[2].str();
    return Capability{std::stoi(digits.substr(0, digits.size() - 1)),
                      std::stoi(digits.substr(digits.size() - 1))};
  }
  if (std::regex_match(s, m, kDotted)) return Capability{std::stoi(m[1]), std::stoi(m[2])};
  return std::nullopt;
}

std::string Keys() {
  std::string keys;
  for (const DevicePreset& p : occupancy::DevicePresets()) {
    if (!keys.empty()) keys += ", ";
    keys += p.key;
  }
  return keys;
}

}  // namespace

ResolvedPreset ResolveDevicePreset(std::string_view spec) {
  ResolvedPreset out;
  if (const DevicePreset* p = occupancy::FindDevicePreset(spec)) {
    out.preset = p;
    // An alias that is the start of other presets' keys ("h100") names one of several GPUs.
    const std::string lower = Lower(spec);
    if (lower != Lower(p->key)) {
      std::vector<std::string> others;
      for (const DevicePreset& q : occupancy::DevicePresets()) {
        if (&q != p && Lower(q.key).starts_with(lower)) others.emplace_back(q.key);
      }
      if (!others.empty()) {
        out.note = fmt::format("'{}' is {}; the other presets it may mean: {}", spec,
                               Describe(*p), fmt::join(others, ", "));
      }
    }
    return out;
  }
  const auto presets = occupancy::DevicePresets();
  if (const std::optional<Capability> cc = ParseCapability(spec)) {
    std::vector<std::string> others;
    std::vector<std::string> covered;
    for (const DevicePreset& p : presets) {
      const std::string c = fmt::format("{}.{}", p.limits.cc_major, p.limits.cc_minor);
      if (covered.empty() || covered.back() != c) covered.push_back(c);
      if (p.limits.cc_major != cc->major || p.limits.cc_minor != cc->minor) continue;
      if (out.preset == nullptr) {
        out.preset = &p;
      } else {
        others.emplace_back(p.key);
      }
    }
    if (out.preset == nullptr) {
      out.error = fmt::format("'{}' is compute capability {}.{}, which no preset has (presets: {})",
                              spec, cc->major, cc->minor, fmt::join(covered, ", "));
      out.unmatched_cc = true;
      out.cc_major = cc->major;
      out.cc_minor = cc->minor;
      return out;
    }
    out.note = fmt::format("{} is compute capability {}.{}: {}", spec, cc->major, cc->minor,
                           Describe(*out.preset));
    if (!others.empty()) {
      out.note += fmt::format("; the other {}.{} presets: {}", cc->major, cc->minor,
                              fmt::join(others, ", "));
    }
    return out;
  }
  const std::string wanted = Normalized(spec);
  if (!wanted.empty()) {
    // A full name, or a name a GPU reports.
    for (const DevicePreset& p : presets) {
      for (const std::string& form : Forms(p)) {
        if (form == wanted) {
          out.preset = &p;
          out.note = fmt::format("'{}' is {}", spec, Describe(p));
          return out;
        }
      }
    }
    // A key or alias followed by memory size and form factor words only.
    static const std::regex kTail(R"(^(?:\d+gb|hbm\d*e?|sxm\d*|pcie|generation)+$)");
    const DevicePreset* best = nullptr;
    size_t best_length = 0;
    for (const DevicePreset& p : presets) {
      for (const std::string& form : Forms(p)) {
        if (form.size() > best_length && wanted.starts_with(form) &&
            std::regex_match(wanted.substr(form.size()), kTail)) {
          best = &p;
          best_length = form.size();
        }
      }
    }
    if (best != nullptr) {
      out.preset = best;
      out.note = fmt::format("'{}' is {}", spec, Describe(*best));
      return out;
    }
  }
  std::vector<std::string> names;
  for (const DevicePreset& p : presets) {
    names.emplace_back(p.key);
    for (const std::string_view a : Aliases(p)) names.emplace_back(a);
  }
  out.error = fmt::format(
      "'{}' is not a known device: use one of {}, a name --list-devices prints, or a compute "
      "capability such as sm_90",
      spec, Keys());
  out.hint = DidYouMean(Lower(spec), names);
  return out;
}

}  // namespace cuflight::report
