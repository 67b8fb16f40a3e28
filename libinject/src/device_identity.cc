#include "device_identity.h"

#include <atomic>
#include <cstdio>
#include <cstring>

namespace cuflight::inject {
namespace {

// The remembered MIG UUIDs, 36 characters each; written once at start, then published.
char g_mig_names[kMaxMigNames][36];
std::atomic<int> g_mig_count{0};

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Copies a UUID (8-4-4-4-12 hex) in lower case into out[36]; false when `s` is not one.
bool LowerUuid(std::string_view s, char* out) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < 36; ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
      out[i] = '-';
      continue;
    }
    if (!IsHex(c)) return false;
    out[i] = c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return true;
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

void RememberMigNames(const std::function<const char*(const char*)>& getenv_fn) noexcept {
  int count = 0;
  try {
    for (const char* variable : {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}) {
      const char* value = getenv_fn(variable);
      if (value == nullptr) continue;
      std::string_view rest(value);
      while (!rest.empty() && count < kMaxMigNames) {
        const size_t comma = rest.find(',');
        std::string_view entry = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        while (!entry.empty() && IsBlank(entry.front())) entry.remove_prefix(1);
        while (!entry.empty() && IsBlank(entry.back())) entry.remove_suffix(1);
        if (entry.size() != 40 || (entry.substr(0, 4) != "MIG-" && entry.substr(0, 4) != "mig-")) {
          continue;
        }
        if (LowerUuid(entry.substr(4), g_mig_names[count])) ++count;
      }
    }
  } catch (...) {
  }
  g_mig_count.store(count, std::memory_order_release);
}

bool NamedAsMig(std::string_view uuid36) noexcept {
  if (uuid36.size() != 36) return false;
  const int count = g_mig_count.load(std::memory_order_acquire);
  for (int i = 0; i < count; ++i) {
    if (std::memcmp(g_mig_names[i], uuid36.data(), 36) == 0) return true;
  }
  return false;
}

std::string FormatDeviceUuid(const CUuuid& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';
    const auto byte = static_cast<unsigned char>(uuid.bytes[i]);
    hex += kHex[byte >> 4];
    hex += kHex[byte & 0xf];
  }
  return (NamedAsMig(hex) ? "MIG-" : "GPU-") + hex;
}

std::string FormatPciBusId(long long domain, long long bus, long long device) {
  if (domain < 0 || domain > 0xffffffffLL || bus < 0 || bus > 0xff || device < 0 || device > 0x1f) {
    return "";
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%08llX:%02llX:%02llX.0", domain, bus, device);
  return text;
}

}  // namespace cuflight::inject
