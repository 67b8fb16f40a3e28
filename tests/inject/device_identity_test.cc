// The device event's GPU identity: the PCI bus id as nvidia-smi writes it and the UUID's "MIG-"
// prefix for a device the environment names as a MIG instance (device_identity.h), read through
// the fake driver.
#include "device_identity.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "inject_test_support.h"

namespace cuflight::inject::testing {
namespace {

// A getenv over a map.
std::function<const char*(const char*)> EnvOf(const std::map<std::string, std::string>& vars) {
  return [&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// Forgets what a test remembered.
struct MigNamesReset {
  ~MigNamesReset() { RememberMigNames([](const char*) -> const char* { return nullptr; }); }
};

TEST(DeviceIdentityTest, PciBusIdAsNvidiaSmiWritesIt) {
  // nvidia-smi --query-gpu=pci.bus_id: "00000000:19:00.0" (8 hex digits of domain, upper case).
  EXPECT_EQ(FormatPciBusId(0, 0x19, 0), "00000000:19:00.0");
  EXPECT_EQ(FormatPciBusId(0x10000, 0xab, 0x1f), "00010000:AB:1F.0");
  EXPECT_EQ(FormatPciBusId(0xffffffffLL, 0xff, 0), "FFFFFFFF:FF:00.0");
  EXPECT_EQ(FormatPciBusId(-1, 0x19, 0), "");
  EXPECT_EQ(FormatPciBusId(0, 0x100, 0), "");
  EXPECT_EQ(FormatPciBusId(0, 0x19, 0x20), "");
}

TEST(DeviceIdentityTest, MigOnlyWhereTheEnvironmentNamesIt) {
  MigNamesReset reset;
  CUuuid uuid{};
  for (int i = 0; i < 16; ++i) uuid.bytes[i] = static_cast<char>(0xA0 + i);
  const std::string hex = "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf";
  EXPECT_EQ(FormatDeviceUuid(uuid), "GPU-" + hex);
  // CUDA_VISIBLE_DEVICES's MIG form, upper-case hex and blanks around an entry allowed.
  const std::map<std::string, std::string> cuda = {
      {"CUDA_VISIBLE_DEVICES", "0, MIG-A0A1A2A3-A4A5-A6A7-A8A9-AAABACADAEAF ,GPU-x"}};
  RememberMigNames(EnvOf(cuda));
  EXPECT_EQ(FormatDeviceUuid(uuid), "MIG-" + hex);
  // The NVIDIA container runtime's variable counts too; another MIG UUID does not.
  const std::map<std::string, std::string> runtime = {
      {"NVIDIA_VISIBLE_DEVICES", "MIG-00000000-0000-0000-0000-000000000000"}};
  RememberMigNames(EnvOf(runtime));
  EXPECT_EQ(FormatDeviceUuid(uuid), "GPU-" + hex);
  const std::map<std::string, std::string> both = {
      {"NVIDIA_VISIBLE_DEVICES", "MIG-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"}};
  RememberMigNames(EnvOf(both));
  EXPECT_EQ(FormatDeviceUuid(uuid), "MIG-" + hex);
  // Malformed entries are none: CUDA 11's "MIG-GPU-<uuid>/gi/ci" form, a short UUID.
  const std::map<std::string, std::string> bad = {
      {"CUDA_VISIBLE_DEVICES",
       "MIG-GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf/1/0,MIG-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaea"}};
  RememberMigNames(EnvOf(bad));
  EXPECT_EQ(FormatDeviceUuid(uuid), "GPU-" + hex);
}

TEST(DeviceIdentityTest, ReadDeviceInfoCarriesThePciBusIdAndTheMigUuid) {
  MigNamesReset reset;
  Harness h;
  h.fake.devices[1] = h.fake.devices[0];
  // The fake's octets are i * 16 + ordinal (fake_cuda.cc); its buses 0x19 + ordinal.
  const std::unique_ptr<DeviceInfo> zero = ReadDeviceInfo(h.driver, 0);
  EXPECT_EQ(zero->uuid, "GPU-00102030-4050-6070-8090-a0b0c0d0e0f0");
  EXPECT_EQ(zero->pci_bus_id, "00000000:19:00.0");
  const std::map<std::string, std::string> env = {
      {"CUDA_VISIBLE_DEVICES", "MIG-01112131-4151-6171-8191-a1b1c1d1e1f1"}};
  RememberMigNames(EnvOf(env));
  h.fake.pci_domain = 0x10000;
  const std::unique_ptr<DeviceInfo> one = ReadDeviceInfo(h.driver, 1);
  EXPECT_EQ(one->uuid, "MIG-01112131-4151-6171-8191-a1b1c1d1e1f1");
  EXPECT_EQ(one->pci_bus_id, "00010000:1A:00.0");
  EXPECT_EQ(ReadDeviceInfo(h.driver, 0)->uuid, "GPU-00102030-4050-6070-8090-a0b0c0d0e0f0");
}

}  // namespace
}  // namespace cuflight::inject::testing
