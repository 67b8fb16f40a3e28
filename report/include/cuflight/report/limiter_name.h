// The --limiter values `cuflight report` and `cuflight tail` accept: one parser for both.
#ifndef CUFLIGHT_REPORT_LIMITER_NAME_H_
#define CUFLIGHT_REPORT_LIMITER_NAME_H_

#include <optional>
#include <string>
#include <string_view>

#include "cuflight/schema/occupancy_fields.h"

namespace cuflight::report {

// A schema::ResourceName ("registers", "shared_mem", "warps", "blocks", "barriers", "cluster",
// "other") or a short form the table prints or users type ("regs", "smem", "shared_memory"),
// ASCII case ignored; nullopt for anything else.
std::optional<schema::Resource> ParseLimiter(std::string_view name);

// The error line for a `name` ParseLimiter rejects: "--limiter 'x' is not a resource: use one of
// registers (regs), shared_mem (smem), warps, blocks, barriers, cluster, other", with "; did you
// mean ...?" for a likely typo.
std::string LimiterError(std::string_view name);

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_LIMITER_NAME_H_
