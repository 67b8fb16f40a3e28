// Replaces the value of the top-level "pid" member of one JSON object line: the stored line must
// carry the kernel-verified pid (SO_PEERCRED) when the payload claims another.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_PID_REWRITE_H_
#define CUFLIGHT_COLLECTOR_DAEMON_PID_REWRITE_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace cuflight::collector {

// `line` is one valid JSON object (as ValidateLine accepted it), with or without a trailing
// newline. Writes to *out the same bytes with the value of every top-level member named "pid"
// (also when the name is written with escapes) replaced by `pid` in decimal. Returns false, with
// *out unspecified, when the line is not an object or has no top-level "pid". Other members,
// nested "pid" members and whitespace are kept byte for byte.
bool RewritePid(std::string_view line, int32_t pid, std::string* out);

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_PID_REWRITE_H_
