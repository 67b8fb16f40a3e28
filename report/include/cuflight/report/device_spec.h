// What `--device` (cuflight occupancy) and `--retarget` (cuflight report) accept: a preset key or
// alias, a preset's full name or the name a GPU reports (as the report's DEVICE column and
// `cuflight occupancy --list-devices` print them), or a compute capability (sm_90, sm_90a,
// compute_90, cc 9.0, 9.0), which picks the first preset of that capability and says so. An alias
// that other presets' keys start with ("h100": h100-sxm, and h100-pcie, h100-nvl) says which it
// took too.
#ifndef CUFLIGHT_REPORT_DEVICE_SPEC_H_
#define CUFLIGHT_REPORT_DEVICE_SPEC_H_

#include <string>
#include <string_view>

#include "cuflight/occupancy/device_presets.h"

namespace cuflight::report {

struct ResolvedPreset {
  const occupancy::DevicePreset* preset = nullptr;  // nullptr: `error` says why
  // "" for a preset key or alias; otherwise which preset `spec` named, e.g. "sm_90 is compute
  // capability 9.0: preset h100-sxm (NVIDIA H100 80GB HBM3 (SXM5), 132 SMs); the other 9.0
  // presets: h100-pcie, h200".
  std::string note;
  // When no preset matches: "'x' is not a known device: use one of <keys>, ...", or for a
  // capability no preset has, the capabilities the presets cover. Without a flag name: the
  // caller puts its own in front.
  std::string error;
  // With `error`, for a likely typo: "; did you mean h100?" (DidYouMean), to end the line.
  std::string hint;
  // With `error`: `spec` is compute capability cc_major.cc_minor, which no preset has (a caller
  // that can take the device's limits from elsewhere may use it).
  bool unmatched_cc = false;
  int cc_major = 0;
  int cc_minor = 0;
};

// Matching ignores ASCII case, and for names also spaces, '-', '_', '(' and ')', the vendor
// words "NVIDIA", "Tesla" and "GeForce", and a preset name's parenthesised form factor ("NVIDIA
// H100 80GB HBM3" is "NVIDIA H100 80GB HBM3 (SXM5)"). A reported name that is a preset key or
// alias followed by memory size, form factor or "Generation" words ("Tesla V100-SXM2-16GB":
// v100-sxm2 and "16GB"; "NVIDIA RTX 6000 Ada Generation") matches that preset.
ResolvedPreset ResolveDevicePreset(std::string_view spec);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_DEVICE_SPEC_H_
