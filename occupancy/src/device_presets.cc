#include "cuflight/occupancy/device_presets.h"

#include <array>
#include <cctype>

namespace cuflight::occupancy {
namespace {

// Values are what cudaGetDeviceProperties reports on each GPU.
//
// Per-SM limits (threads, blocks, registers, shared memory per SM / per block opt-in, 1 KiB
// reserved per block from cc 8.0) come from the CUDA C++ Programming Guide, "Compute
// Capabilities", table "Technical Specifications per Compute Capability"
// (docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html), and
// match the architecture tables in cuda_occupancy.h (CUDA 13.0: cudaOccMaxBlocksPerMultiprocessor
// and cudaOccAlignUpShmemSizeVoltaPlus per major.minor). SM counts come from NVIDIA's architecture
// whitepapers and product datasheets, cited per row; where NVIDIA publishes CUDA cores rather
// than SMs, the count is cores / 128 FP32 cores per SM (64 on GA100). sharedMemPerBlock is 48 KiB
// on every device (the limit without opt-in). regsPerBlock is 64 Ki on every listed device.
constexpr int64_t KiB = 1024;

constexpr DeviceLimits Volta(int sms) {
  // cc 7.0: 2048 threads, 32 blocks, 96 KiB shared memory per SM, 96 KiB opt-in per block.
  return {7, 0, sms, 1024, 2048, 32, 65536, 65536, 96 * KiB, 48 * KiB, 96 * KiB, 0, 32, 0, 0};
}
constexpr DeviceLimits Turing(int sms) {
  // cc 7.5: 1024 threads, 16 blocks, 64 KiB shared memory per SM, 64 KiB opt-in per block.
  return {7, 5, sms, 1024, 1024, 16, 65536, 65536, 64 * KiB, 48 * KiB, 64 * KiB, 0, 32, 0, 0};
}
constexpr DeviceLimits Ga100(int sms) {
  // cc 8.0: 2048 threads, 32 blocks, 164 KiB per SM, 163 KiB opt-in per block, 1 KiB reserved.
  return {8, 0, sms, 1024, 2048, 32, 65536, 65536, 164 * KiB, 48 * KiB, 163 * KiB, KiB, 32, 0, 0};
}
constexpr DeviceLimits Ga10x(int sms) {
  // cc 8.6: 1536 threads, 16 blocks, 100 KiB per SM, 99 KiB opt-in per block, 1 KiB reserved.
  return {8, 6, sms, 1024, 1536, 16, 65536, 65536, 100 * KiB, 48 * KiB, 99 * KiB, KiB, 32, 0, 0};
}
constexpr DeviceLimits Orin(int sms) {
  // cc 8.7 (Jetson AGX Orin): 1536 threads, 16 blocks, 164 KiB per SM, 163 KiB opt-in per block
  // (the GA100 carveout steps), 1 KiB reserved.
  return {8, 7, sms, 1024, 1536, 16, 65536, 65536, 164 * KiB, 48 * KiB, 163 * KiB, KiB, 32, 0, 0};
}
constexpr DeviceLimits Ada(int sms) {
  // cc 8.9: 1536 threads, 24 blocks, 100 KiB per SM, 99 KiB opt-in per block, 1 KiB reserved.
  return {8, 9, sms, 1024, 1536, 24, 65536, 65536, 100 * KiB, 48 * KiB, 99 * KiB, KiB, 32, 0, 0};
}
constexpr DeviceLimits Hopper(int sms) {
  // cc 9.0: 2048 threads, 32 blocks, 228 KiB per SM, 227 KiB opt-in per block, 1 KiB reserved;
  // clusters of up to 8 blocks portably, 16 with the non-portable attribute.
  return {9, 0, sms, 1024, 2048, 32, 65536, 65536, 228 * KiB, 48 * KiB, 227 * KiB, KiB, 32, 8, 16};
}
constexpr DeviceLimits Gb100(int sms) {
  // cc 10.0: as Hopper: 2048 threads, 32 blocks, 228 KiB per SM, 227 KiB opt-in, clusters 8/16.
  return {10, 0, sms, 1024, 2048, 32, 65536, 65536, 228 * KiB, 48 * KiB, 227 * KiB, KiB, 32, 8, 16};
}
constexpr DeviceLimits Gb10x3(int sms) {
  // cc 10.3 (Blackwell Ultra): as cc 10.0: 2048 threads, 32 blocks, 228 KiB per SM, 227 KiB opt-in.
  DeviceLimits l = Gb100(sms);
  l.cc_minor = 3;
  return l;
}
constexpr DeviceLimits Gb20x(int sms) {
  // cc 12.0: 1536 threads, 24 blocks, 100 KiB per SM, 99 KiB opt-in, 1 KiB reserved, clusters 8.
  return {12, 0, sms, 1024, 1536, 24, 65536, 65536, 100 * KiB, 48 * KiB, 99 * KiB, KiB, 32, 8, 8};
}
constexpr DeviceLimits Gb10(int sms) {
  // cc 12.1 (GB10, DGX Spark): as cc 12.0: 1536 threads, 24 blocks, 100 KiB per SM, 99 KiB opt-in.
  DeviceLimits l = Gb20x(sms);
  l.cc_minor = 1;
  return l;
}

constexpr std::array kPresets = {
    // 80 SMs: Tesla V100 datasheet / Volta whitepaper (V100 SXM2 and PCIe).
    DevicePreset{"v100", "v100-sxm2,v100-pcie", "Tesla V100", Volta(80)},
    // 40 SMs: Tesla T4 datasheet / Turing whitepaper (TU104, 40 of 48 SMs enabled).
    DevicePreset{"t4", "", "Tesla T4", Turing(40)},
    // 108 SMs: A100 whitepaper (GA100, 108 of 128 SMs enabled), same on 40 GB and 80 GB parts.
    DevicePreset{"a100", "a100-40gb,a100-sxm4-40gb,a100-pcie", "NVIDIA A100 40GB", Ga100(108)},
    DevicePreset{"a100-80gb", "a100-sxm4-80gb", "NVIDIA A100 80GB", Ga100(108)},
    // 56 SMs: A30 datasheet (GA100, 3584 FP32 CUDA cores / 64 per SM).
    DevicePreset{"a30", "", "NVIDIA A30", Ga100(56)},
    // 72 SMs: A10 datasheet (GA102, 72 SMs).
    DevicePreset{"a10", "", "NVIDIA A10", Ga10x(72)},
    // 82 SMs: GeForce RTX 3090 (GA102, Ampere GA102 whitepaper).
    DevicePreset{"rtx3090", "3090", "NVIDIA GeForce RTX 3090", Ga10x(82)},
    // 68 SMs: GeForce RTX 3080 10 GB (GA102, 8704 CUDA cores / 128 per SM; the 12 GB card has 70).
    DevicePreset{"rtx3080", "3080", "NVIDIA GeForce RTX 3080", Ga10x(68)},
    // 84 SMs: A40 datasheet (GA102, 10752 CUDA cores / 128 per SM).
    DevicePreset{"a40", "", "NVIDIA A40", Ga10x(84)},
    // 84 SMs: RTX A6000 datasheet (GA102, 10752 CUDA cores / 128 per SM).
    DevicePreset{"rtx-a6000", "a6000", "NVIDIA RTX A6000", Ga10x(84)},
    // 16 SMs: Jetson AGX Orin 64GB datasheet (2048 CUDA cores / 128 per SM; the 32 GB module has
    // 14, Orin NX and Nano fewer: give --sm-count).
    DevicePreset{"orin", "jetson-orin,agx-orin", "NVIDIA Jetson AGX Orin 64GB", Orin(16)},
    // 58 SMs: L4 datasheet (AD104, 7424 CUDA cores / 128 per SM).
    DevicePreset{"l4", "", "NVIDIA L4", Ada(58)},
    // 142 SMs: L40S datasheet (AD102, 18176 CUDA cores / 128 per SM).
    DevicePreset{"l40s", "", "NVIDIA L40S", Ada(142)},
    // 142 SMs: L40 datasheet (AD102, 18176 CUDA cores / 128 per SM).
    DevicePreset{"l40", "", "NVIDIA L40", Ada(142)},
    // 142 SMs: RTX 6000 Ada Generation datasheet (AD102, 18176 CUDA cores / 128 per SM).
    // (The GPU reports "NVIDIA RTX 6000 Ada Generation"; the name here is short for the table.)
    DevicePreset{"rtx6000-ada", "rtx-6000-ada,6000-ada", "NVIDIA RTX 6000 Ada", Ada(142)},
    // 128 SMs: GeForce RTX 4090 (AD102, Ada Lovelace whitepaper: 16384 CUDA cores).
    DevicePreset{"rtx4090", "4090", "NVIDIA GeForce RTX 4090", Ada(128)},
    // 132 SMs: H100 whitepaper, H100 SXM5; 114 SMs for H100 PCIe.
    DevicePreset{"h100-sxm", "h100,h100-sxm5", "NVIDIA H100 80GB HBM3 (SXM5)", Hopper(132)},
    DevicePreset{"h100-pcie", "", "NVIDIA H100 PCIe", Hopper(114)},
    // 132 SMs: H200 is the GH100 die of H100 SXM with HBM3e.
    // 132 SMs: H100 NVL product brief (GH100, 16896 FP32 CUDA cores / 128 per SM).
    DevicePreset{"h100-nvl", "", "NVIDIA H100 NVL", Hopper(132)},
    DevicePreset{"h200", "h200-sxm", "NVIDIA H200", Hopper(132)},
    // 132 SMs: GH200 Grace Hopper Superchip whitepaper (its H100 has 132 SMs).
    DevicePreset{"gh200", "", "NVIDIA GH200 480GB", Hopper(132)},
    // 132 SMs: H800 SXM5, the H100 SXM5 configuration (16896 FP32 CUDA cores / 128 per SM).
    DevicePreset{"h800", "h800-sxm", "NVIDIA H800", Hopper(132)},
    // 78 SMs: H20 (GH100): NVIDIA publishes no SM count for it; 78 is what
    // cudaGetDeviceProperties reports on it (published Geekbench 6 runs). Give --sm-count if
    // yours differs.
    DevicePreset{"h20", "", "NVIDIA H20", Hopper(78)},
    // 148 SMs: Blackwell B200 (two dies, 74 SMs each, as cudaGetDeviceProperties reports).
    DevicePreset{"b200", "", "NVIDIA B200", Gb100(148)},
    // cc 10.3. NVIDIA's Blackwell Ultra technical blog (2025-08) gives 160 SMs for the full
    // two-die GPU, as for Blackwell, whose B200 product enables 148; NVIDIA's B300 datasheet gives
    // no SM count, so 148 is assumed here. Give --sm-count, or --device current on the machine.
    DevicePreset{"b300", "b300-sxm", "NVIDIA B300", Gb10x3(148)},
    // 170 SMs: GeForce RTX 5090 (GB202, 21760 CUDA cores / 128 per SM).
    DevicePreset{"rtx5090", "5090", "NVIDIA GeForce RTX 5090", Gb20x(170)},
    // 48 SMs: GB10 (DGX Spark) product page: 6144 CUDA cores / 128 per SM; cc 12.1.
    DevicePreset{"gb10", "dgx-spark,spark", "NVIDIA GB10", Gb10(48)},
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::span<const DevicePreset> DevicePresets() { return kPresets; }

const DevicePreset* FindDevicePreset(std::string_view key) {
  for (const DevicePreset& p : kPresets) {
    if (EqualsIgnoreCase(p.key, key)) return &p;
    std::string_view rest = p.aliases;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      if (EqualsIgnoreCase(rest.substr(0, comma), key)) return &p;
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  return nullptr;
}

}  // namespace cuflight::occupancy
