// A GPU's identity as NVIDIA's tools write it, for the device event: its UUID ("GPU-..." or
// "MIG-...") and its PCI bus id ("00000000:19:00.0").
//
// 1. cuDeviceGetUuid_v2 "If the device is in MIG mode, returns its MIG UUID which uniquely
//    identifies the subscribed MIG compute instance" (cuda.h, cuDeviceGetUuid), but no driver
//    API call or device attribute says whether a device is a MIG instance (only NVML does:
//    nvmlDeviceIsMigDeviceHandle). So the prefix is "MIG-" only when the process's environment
//    names that UUID as a MIG device: CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES (the NVIDIA
//    container runtime's, set by the Kubernetes device plugin) holding "MIG-<uuid>". Otherwise
//    "GPU-" (docs/gpu-verification.md lists the check on a MIG machine).
// 2. The PCI bus id from CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, _PCI_BUS_ID and _PCI_DEVICE_ID
//    (cuda.h), written as NVML's nvmlPciInfo_t.busId and nvidia-smi: "%08X:%02X:%02X.0"
//    (cuDeviceGetPCIBusId's own form has a 4-digit domain, "0000:19:00.0", which matches
//    neither dcgm-exporter's pci_bus_id label nor nvidia-smi). The function is always 0: the
//    driver API gives none, and a GPU is function 0 of its device.
// 3. RememberMigNames runs once at start, before any device is read; NamedAsMig is then
//    read-only and may be called from any thread.
#ifndef CUFLIGHT_LIBINJECT_SRC_DEVICE_IDENTITY_H_
#define CUFLIGHT_LIBINJECT_SRC_DEVICE_IDENTITY_H_

#include <cuda.h>

#include <functional>
#include <string>
#include <string_view>

namespace cuflight::inject {

// At most this many MIG UUIDs are remembered from the environment (the devices one process can
// see; CUDA enumerates at most one MIG instance per process, many under CUDA 12's
// CUDA_VISIBLE_DEVICES lists).
inline constexpr int kMaxMigNames = 64;

// Reads CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES through `getenv_fn` and remembers each
// "MIG-<8-4-4-4-12 hex>" entry (comma-separated, blanks around ignored, case-insensitive hex).
// Never throws; allocates nothing.
void RememberMigNames(const std::function<const char*(const char*)>& getenv_fn) noexcept;

// True when `uuid36` (8-4-4-4-12 lower-case hex) was named as a MIG device.
bool NamedAsMig(std::string_view uuid36) noexcept;

// "GPU-<uuid>" or, when NamedAsMig, "MIG-<uuid>"; lower-case hex, as nvidia-smi -L prints.
std::string FormatDeviceUuid(const CUuuid& uuid);

// "DDDDDDDD:BB:DD.0" in upper-case hex; "" when a part is out of PCI's range (domain 0..2^32-1,
// bus 0..255, device 0..31).
std::string FormatPciBusId(long long domain, long long bus, long long device);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_DEVICE_IDENTITY_H_
