// The kernel timing policy (CUFLIGHT_TIMING): which launches get a kernel_time event. One
// definition for the environment contract (cuflight/env/config.h, process_start's config.timing)
// and the wire (stats, process_end and process_crash carry it as timing_policy).
//   kAll:     kernel activity (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) is enabled for the whole
//             run: every launch is timed;
//   kSampled: it is enabled only in timing windows (libinject/src/timing_windows.h): a launch made
//             in one is timed, the others are not (their kernel events say timing_window false);
//   kOff:     no kernel activity: no launch is timed.
#ifndef CUFLIGHT_SCHEMA_TIMING_POLICY_H_
#define CUFLIGHT_SCHEMA_TIMING_POLICY_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace cuflight::schema {

// kUnknown: a line written before the field existed (not encoded; readers take the policy from
// process_start's config.timing, else kAll).
enum class TimingPolicy : uint8_t {
  kUnknown = 0,
  kAll = 1,
  kSampled = 2,
  kOff = 3,
};

// "all", "sampled", "off"; "" for kUnknown.
constexpr std::string_view TimingPolicyName(TimingPolicy policy) {
  switch (policy) {
    case TimingPolicy::kAll:
      return "all";
    case TimingPolicy::kSampled:
      return "sampled";
    case TimingPolicy::kOff:
      return "off";
    case TimingPolicy::kUnknown:
      break;
  }
  return "";
}

// Inverse of TimingPolicyName for the three wire names; nullopt for any other string.
constexpr std::optional<TimingPolicy> TimingPolicyFromName(std::string_view name) {
  if (name == "all") return TimingPolicy::kAll;
  if (name == "sampled") return TimingPolicy::kSampled;
  if (name == "off") return TimingPolicy::kOff;
  return std::nullopt;
}

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_TIMING_POLICY_H_
