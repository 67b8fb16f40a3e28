#include "cuflight/schema/config_expander.h"

#include <utility>
#include <variant>

namespace cuflight::schema {

ExpandVerdict ConfigExpander::Describe(const OwnedKernelConfigEvent& config) {
  if (const OwnedKernelConfigEvent* known = Find(config.config); known != nullptr) {
    return SameConfig(*known, config) ? ExpandVerdict::kDescribed
                                      : ExpandVerdict::kConfigRedefined;
  }
  if (configs_.size() >= max_configs_) return ExpandVerdict::kConfigFlood;
  configs_.emplace(config.config, config);
  return ExpandVerdict::kDescribed;
}

ExpandVerdict ConfigExpander::Feed(OwnedEvent* event) {
  if (const auto* config = std::get_if<OwnedKernelConfigEvent>(event)) return Describe(*config);
  const auto* launch = std::get_if<OwnedLaunchEvent>(event);
  if (launch == nullptr) return ExpandVerdict::kPassed;
  const OwnedKernelConfigEvent* config = Find(launch->config);
  if (config == nullptr) return ExpandVerdict::kUnknownConfig;
  OwnedKernelEvent kernel;
  Expand(*config, *launch, &kernel);
  event->emplace<OwnedKernelEvent>(std::move(kernel));
  return ExpandVerdict::kExpanded;
}

}  // namespace cuflight::schema
