// Who a process is to a scheduler: the environment variables process_start's `attribution`
// carries and the derived fields made from them (docs/fleet.md, "Attribution"). Part of the
// environment contract: the injected library reads exactly these names (and the ones
// CUFLIGHT_ATTRIBUTION_ENV adds), never a variable outside the list.
//
// 1. The allow-list: kAttributionVariables, then the names of CUFLIGHT_ATTRIBUTION_ENV
//    (Config::attribution_env). A variable set (even to "") is carried under its own name.
// 2. Derived fields (lower-case names, so they never meet an environment variable's): for each,
//    its sources in order, the first usable one winning. Numeric fields take a source only when
//    it is a decimal integer in [0, 2^31-1] (written without leading zeros). pod_uid and
//    container_id come first from /proc/self/cgroup (libinject/src/attribution.h).
// 3. Bounds: a value is cut to kMaxAttributionValueBytes; at most kMaxAttributionExtraNames names
//    added, each at most kMaxAttributionNameBytes of [A-Z0-9_], not starting with a digit.
#ifndef CUFLIGHT_ENV_ATTRIBUTION_H_
#define CUFLIGHT_ENV_ATTRIBUTION_H_

#include <array>
#include <cstddef>
#include <string_view>

namespace cuflight::env {

// The variables read by default: Slurm's job and task ids, torchrun's (torch.distributed.run)
// rank and world, Open MPI's and PMI's ranks, and the pod's identity as the Kubernetes downward
// API puts it in the environment (deploy/kubernetes/gpu-pod-example.yaml).
inline constexpr std::array<std::string_view, 20> kAttributionVariables = {
    "SLURM_JOB_ID",         "SLURM_JOB_NAME",       "SLURM_PROCID",
    "SLURM_LOCALID",        "SLURM_ARRAY_JOB_ID",   "SLURM_ARRAY_TASK_ID",
    "SLURM_NTASKS",         "RANK",                 "LOCAL_RANK",
    "WORLD_SIZE",           "GROUP_RANK",           "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",             "PMI_SIZE",             "POD_NAME",
    "POD_NAMESPACE",        "POD_UID"};

inline constexpr size_t kMaxAttributionValueBytes = 256;
inline constexpr size_t kMaxAttributionExtraNames = 16;
inline constexpr size_t kMaxAttributionNameBytes = 64;

// A derived field and its environment sources, in order (the cgroup, where it is a source, comes
// before them).
struct DerivedField {
  std::string_view name;
  bool numeric;
  std::array<std::string_view, 4> sources;  // "" pads
};

inline constexpr std::array<DerivedField, 8> kDerivedFields = {{
    {"job", false, {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "", ""}},
    {"rank", true, {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}},
    {"local_rank", true, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", ""}},
    {"world_size", true, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}},
    {"pod_uid", false, {"POD_UID", "", "", ""}},
    {"container_id", false, {"", "", "", ""}},
    {"pod_name", false, {"POD_NAME", "", "", ""}},
    {"pod_namespace", false, {"POD_NAMESPACE", "", "", ""}},
}};

// True for a name CUFLIGHT_ATTRIBUTION_ENV accepts: 1..kMaxAttributionNameBytes bytes of
// [A-Z0-9_], not starting with a digit.
constexpr bool IsAttributionName(std::string_view name) {
  if (name.empty() || name.size() > kMaxAttributionNameBytes) return false;
  if (name[0] >= '0' && name[0] <= '9') return false;
  for (char c : name) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace cuflight::env

#endif  // CUFLIGHT_ENV_ATTRIBUTION_H_
