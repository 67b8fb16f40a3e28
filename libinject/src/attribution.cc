#include "attribution.h"

#include <cstdint>

#include "cuflight/env/attribution.h"

namespace cuflight::inject {
namespace {

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

char LowerHex(char c) { return c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c; }

// 8-4-4-4-12 hex digits, the separators '-' or (systemd slice names) '_'; lower case, with '-'.
bool ParseUuid(std::string_view s, std::string* out) {
  if (s.size() != 36) return false;
  std::string uuid(36, '-');
  for (size_t i = 0; i < 36; ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-' && s[i] != '_') return false;
      continue;
    }
    if (!IsHex(s[i])) return false;
    uuid[i] = LowerHex(s[i]);
  }
  *out = std::move(uuid);
  return true;
}

bool ParseContainerHex(std::string_view s, std::string* out) {
  if (s.size() != 64) return false;
  std::string id(64, '0');
  for (size_t i = 0; i < 64; ++i) {
    if (!IsHex(s[i])) return false;
    id[i] = LowerHex(s[i]);
  }
  *out = std::move(id);
  return true;
}

// A path component naming a pod: "pod<uid>" (cgroupfs) or "kubepods[-<qos>]-pod<uid>.slice"
// (systemd).
bool PodOf(std::string_view component, std::string* uid) {
  if (component.ends_with(".slice")) {
    component.remove_suffix(6);
    if (!component.starts_with("kubepods-")) return false;
    const size_t pod = component.rfind("-pod");
    if (pod == std::string_view::npos) return false;
    return ParseUuid(component.substr(pod + 4), uid);
  }
  return component.starts_with("pod") && ParseUuid(component.substr(3), uid);
}

// A path component naming a container: 64 hex digits (cgroupfs: Kubernetes' and Docker's), or
// "<runtime>-<64 hex>.scope" (systemd).
bool ContainerOf(std::string_view component, std::string* id) {
  if (component.ends_with(".scope")) {
    component.remove_suffix(6);
    for (std::string_view prefix : {"cri-containerd-", "crio-", "docker-", "libpod-"}) {
      if (component.starts_with(prefix)) {
        return ParseContainerHex(component.substr(prefix.size()), id);
      }
    }
    return false;
  }
  return ParseContainerHex(component, id);
}

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at
// most U+10FFFF) at the start of `s`, or 0.
size_t Utf8SequenceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  if (b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  }
  return n;
}

// A decimal integer in [0, 2^31-1], written without leading zeros; false otherwise.
bool NormalInt(std::string_view s, std::string* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > 0x7fffffff) return false;
  *out = std::to_string(v);
  return true;
}

}  // namespace

CgroupIds ParseCgroupIds(std::string_view text) {
  CgroupIds ids;
  if (text.size() > kMaxCgroupFileBytes) text = text.substr(0, kMaxCgroupFileBytes);
  while (!text.empty() && (ids.container_id.empty() || ids.pod_uid.empty())) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    // "hierarchy-ID:controller-list:cgroup-path" (cgroups(7)); the path may hold ':'.
    const size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    const size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view path = line.substr(second + 1);
    if (!path.starts_with('/')) continue;
    std::string pod;
    std::string container;
    while (!path.empty()) {
      const size_t slash = path.find('/');
      const std::string_view component = path.substr(0, slash);
      path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
      if (component.empty()) continue;
      std::string found;
      if (pod.empty() && PodOf(component, &found)) {
        pod = std::move(found);
      } else if (ContainerOf(component, &found)) {
        container = std::move(found);  // the innermost counts
      }
    }
    if (ids.pod_uid.empty() && !pod.empty()) ids.pod_uid = std::move(pod);
    if (ids.container_id.empty() && !container.empty()) ids.container_id = std::move(container);
  }
  return ids;
}

std::string SafeAttributionValue(std::string_view value) {
  std::string out;
  const size_t cap = env::kMaxAttributionValueBytes;
  out.reserve(value.size() < cap ? value.size() : cap);
  while (!value.empty()) {
    size_t n = Utf8SequenceLength(value);
    const auto c = static_cast<unsigned char>(value[0]);
    // C0 controls, DEL, and U+2028/U+2029 (which JSON writers escape for JavaScript's sake).
    const bool control = (n == 1 && (c < 0x20 || c == 0x7f)) ||
                         (n == 3 && c == 0xE2 && static_cast<unsigned char>(value[1]) == 0x80 &&
                          (static_cast<unsigned char>(value[2]) & 0xFE) == 0xA8);
    if (n == 0 || control) {
      if (out.size() + 1 > cap) break;
      out += '?';
      n = n == 0 ? 1 : n;  // a bad byte at a time; a control character whole
    } else {
      if (out.size() + n > cap) break;
      out.append(value.substr(0, n));
    }
    value.remove_prefix(n);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> MakeAttribution(
    const std::function<const char*(const char*)>& getenv_fn,
    const std::vector<std::string>& extra_names, const CgroupIds& cgroup) {
  // The allow-list, each variable read once.
  std::vector<std::pair<std::string, std::string>> env;
  const auto read = [&](std::string_view name) {
    const std::string key(name);
    const char* raw = getenv_fn(key.c_str());
    if (raw != nullptr) env.emplace_back(key, SafeAttributionValue(raw));
  };
  for (std::string_view name : env::kAttributionVariables) read(name);
  size_t added = 0;
  for (const std::string& name : extra_names) {
    if (added == env::kMaxAttributionExtraNames) break;
    if (!env::IsAttributionName(name)) continue;
    bool known = false;
    for (const auto& [k, v] : env) known = known || k == name;
    if (known) continue;
    read(name);
    ++added;
  }
  const auto lookup = [&](std::string_view name) -> const std::string* {
    for (const auto& [k, v] : env) {
      if (k == name) return &v;
    }
    return nullptr;
  };

  std::vector<std::pair<std::string, std::string>> out;
  for (const env::DerivedField& field : env::kDerivedFields) {
    std::string value;
    if (field.name == "pod_uid") value = cgroup.pod_uid;
    if (field.name == "container_id") value = cgroup.container_id;
    for (std::string_view source : field.sources) {
      if (!value.empty() || source.empty()) continue;
      const std::string* given = lookup(source);
      if (given == nullptr || given->empty()) continue;
      if (field.numeric) {
        NormalInt(*given, &value);
      } else if (field.name == "pod_uid") {
        ParseUuid(*given, &value);
      } else {
        value = *given;
      }
    }
    if (!value.empty()) out.emplace_back(std::string(field.name), std::move(value));
  }
  for (auto& entry : env) out.push_back(std::move(entry));
  return out;
}

}  // namespace cuflight::inject
