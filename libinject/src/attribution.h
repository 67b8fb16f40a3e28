// Who the process is to a scheduler: process_start's `attribution` (schema/v1, docs/fleet.md
// "Attribution"), made once at start from the allow-listed environment variables
// (cuflight/env/attribution.h) and /proc/self/cgroup. Never on the hot path.
//
// 1. Container and pod from the cgroup path. The runtimes' documented path forms, cgroup v1
//    ("N:controllers:/path") and v2 ("0::/path") alike, a path component at a time:
//      Kubernetes, cgroupfs driver   /kubepods[/burstable|/besteffort]/pod<uid>/<64 hex>
//      Kubernetes, systemd driver    /kubepods.slice/kubepods-<qos>.slice/
//                                      kubepods-<qos>-pod<uid, '-' as '_'>.slice/
//                                      <cri-containerd|crio|docker>-<64 hex>.scope
//      Docker, cgroupfs driver       /docker/<64 hex>
//      Docker, systemd driver        /system.slice/docker-<64 hex>.scope
//      Podman                        .../libpod-<64 hex>.scope
//    The first line (in file order) that names one wins, for each of the two ids. A container in
//    its own cgroup namespace sees "0::/" and gives neither. CRI-O's monitor ("crio-conmon-") is
//    not a container.
// 2. Values are made safe to carry: bytes that are not well-formed UTF-8, and control
//    characters (C0, DEL, U+2028, U+2029), become '?', and a value is cut to kMaxAttributionValueBytes at a character
//    boundary, so its JSON text is at most twice its size.
// 3. Nothing here throws except std::bad_alloc, and bad input gives absent fields.
#ifndef CUFLIGHT_LIBINJECT_SRC_ATTRIBUTION_H_
#define CUFLIGHT_LIBINJECT_SRC_ATTRIBUTION_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuflight::inject {

// The ids a /proc/self/cgroup text names; "" where none.
struct CgroupIds {
  std::string container_id;  // 64 lower-case hex digits
  std::string pod_uid;       // 8-4-4-4-12 lower-case hex, with '-'
};

// At most this much of /proc/self/cgroup is read (a few hundred bytes in practice; v1 has one
// line per hierarchy).
inline constexpr size_t kMaxCgroupFileBytes = 64 * 1024;

// Parses the text of /proc/<pid>/cgroup (cgroups(7)); lines of another form are skipped.
CgroupIds ParseCgroupIds(std::string_view text);

// `value` made safe to carry (2. above).
std::string SafeAttributionValue(std::string_view value);

// The attribution: the derived fields first, in kDerivedFields order, each present only when a
// source gives it, then the allow-listed variables that are set, kAttributionVariables first and
// `extra_names` after, in order. `getenv_fn` returns nullptr for an unset variable.
std::vector<std::pair<std::string, std::string>> MakeAttribution(
    const std::function<const char*(const char*)>& getenv_fn,
    const std::vector<std::string>& extra_names, const CgroupIds& cgroup);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_ATTRIBUTION_H_
