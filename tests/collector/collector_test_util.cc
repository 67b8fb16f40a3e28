#include "collector_test_util.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "cuflight/schema/ack.h"
#include "cuflight/schema/encoder.h"
#include "cuflight/schema/events.h"
#include "h100_device.h"

namespace cuflight::collector::testing {

RawClient RawClient::Unix(const std::filesystem::path& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return RawClient();
  }
  return RawClient(fd);
}

RawClient RawClient::Tcp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return RawClient();
  }
  return RawClient(fd);
}

RawClient::~RawClient() { Close(); }

RawClient::RawClient(RawClient&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), in_(std::move(other.in_)), last_ack_(other.last_ack_) {}

RawClient& RawClient::operator=(RawClient&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    in_ = std::move(other.in_);
    last_ack_ = other.last_ack_;
  }
  return *this;
}

bool RawClient::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool RawClient::ReadSome(std::chrono::milliseconds wait) {
  pollfd p{fd_, POLLIN, 0};
  const int ready = poll(&p, 1, static_cast<int>(wait.count()));
  if (ready <= 0) return true;
  std::array<char, 4096> buf;
  const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
  if (n <= 0) return false;
  in_.append(buf.data(), static_cast<size_t>(n));
  size_t nl;
  while ((nl = in_.find('\n')) != std::string::npos) {
    if (auto seq = schema::ParseAck(std::string_view(in_).substr(0, nl + 1))) last_ack_ = *seq;
    in_.erase(0, nl + 1);
  }
  return true;
}

std::optional<uint64_t> RawClient::WaitAck(uint64_t seq, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!(last_ack_ && *last_ack_ >= seq)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    if (!ReadSome(std::min(left, std::chrono::milliseconds(50)))) return std::nullopt;
  }
  return last_ack_;
}

bool RawClient::WaitClosedByPeer(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!ReadSome(std::chrono::milliseconds(50))) return true;
  }
  return false;
}

void RawClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

namespace {

template <class E>
std::string EncodeEvent(const E& event) {
  std::string buf(8192, '\0');
  const size_t n = schema::Encode(event, buf.data(), buf.size());
  EXPECT_GT(n, 0u);
  buf.resize(n);
  return buf;
}

schema::Header HeaderFor(const ProducerIdentity& id, uint64_t seq) {
  return schema::Header{1732000000123456789 + static_cast<int64_t>(seq), id.pid, seq};
}

}  // namespace

ProducerIdentity Identity(const std::string& exe, int64_t start_ns) {
  ProducerIdentity id;
  id.pid = static_cast<int32_t>(getpid());
  id.exe = "/opt/bin/" + exe;
  id.start_ns = start_ns;
  return id;
}

std::string ProcessStartLine(const ProducerIdentity& id, uint64_t seq) {
  schema::ProcessStartEvent e;
  e.header = HeaderFor(id, seq);
  e.exe = id.exe;
  static const std::array<std::string_view, 2> kArgv = {"trainer", "--epochs=3"};
  e.argv = kArgv;
  e.hostname = id.hostname;
  e.start_ns = id.start_ns;
  e.cuflight_version = "0.1.0";
  e.cuda_driver_version = 12040;
  e.cupti_version = 22;
  e.instance_id = id.instance_id;
  e.pid_ns = id.pid_ns;
  std::vector<std::pair<std::string_view, std::string_view>> attribution(id.attribution.begin(),
                                                                          id.attribution.end());
  std::vector<std::pair<std::string_view, std::string_view>> config(id.config.begin(),
                                                                     id.config.end());
  e.attribution = attribution;
  e.config = config;
  return EncodeEvent(e);
}

std::string ProcessCrashLine(const ProducerIdentity& id, uint64_t seq) {
  schema::ProcessCrashEvent e;
  e.header = HeaderFor(id, seq);
  e.signal = 11;
  e.signal_name = "SIGSEGV";
  e.code = 1;
  e.tid = id.pid;
  return EncodeEvent(e);
}

std::string ApiErrorLine(const ProducerIdentity& id, uint64_t seq, std::string_view error_name,
                         int32_t code) {
  schema::ApiErrorEvent e;
  e.header = HeaderFor(id, seq);
  e.api = "cuCtxSynchronize";
  e.code = code;
  e.error_name = error_name;
  e.message = "an error the test made";
  e.device = 0;
  e.context = 1;
  e.stream = 0xffffffff;
  return EncodeEvent(e);
}

std::string DeviceLine(const ProducerIdentity& id, uint64_t seq, int32_t device) {
  schema::DeviceEvent e;
  e.header = HeaderFor(id, seq);
  e.device = device;
  test_support::SetH100(&e);
  return EncodeEvent(e);
}

std::string DeviceLine(const ProducerIdentity& id, uint64_t seq, int32_t device,
                       std::string_view uuid, std::string_view pci_bus_id) {
  schema::DeviceEvent e;
  e.header = HeaderFor(id, seq);
  e.device = device;
  test_support::SetH100(&e);
  e.uuid = uuid;
  e.pci_bus_id = pci_bus_id;
  return EncodeEvent(e);
}

std::string KernelLine(const ProducerIdentity& id, uint64_t seq, uint64_t correlation_id) {
  schema::KernelEvent k;
  k.header = HeaderFor(id, seq);
  k.tid = id.pid;
  k.context = 0x55d1c0a3b2e0;
  k.stream = 0x55d1c0f41230;
  k.correlation_id = correlation_id;
  k.api = "cuLaunchKernel";
  k.name = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE";
  k.demangled = "void cutlass::Kernel<cutlass::gemm::kernel::Gemm>(Gemm::Params)";
  k.grid = {264, 8, 1};
  k.block = {256, 1, 1};
  k.num_regs = 168;
  k.static_shared_bytes = 49152;
  k.max_threads_per_block = 256;
  k.occupancy.max_active_blocks = 1;
  k.occupancy.active_warps = 8;
  k.occupancy.max_warps = 64;
  k.occupancy.occupancy = 0.125;
  k.occupancy.reg_occupancy = 0.125;
  k.occupancy.smem_occupancy = 0.25;
  k.occupancy.warp_occupancy = 1;
  k.occupancy.block_occupancy = 1;
  k.occupancy.barrier_occupancy = 1;
  k.occupancy.limiting_resource = schema::Resource::kRegisters;
  k.occupancy.limiting_resources = schema::MaskOf(schema::Resource::kRegisters);
  k.occupancy.allocated_regs_per_block = 43008;
  k.occupancy.allocated_smem_per_block = 50176;
  k.occupancy.waves = 16;
  k.occupancy.tail_utilization = 1;
  k.occupancy.best_block_size = 128;
  return EncodeEvent(k);
}

std::string KernelTimeLine(const ProducerIdentity& id, uint64_t seq, uint64_t correlation_id) {
  schema::KernelTimeEvent e;
  e.header = HeaderFor(id, seq);
  e.correlation_id = correlation_id;
  e.context = 0x55d1c0a3b2e0;
  e.stream = 0x55d1c0f41230;
  e.start_ns = 1000000 + seq * 10;
  e.end_ns = e.start_ns + 5;
  e.duration_ns = 5;
  return EncodeEvent(e);
}

std::string StatsLine(const ProducerIdentity& id, uint64_t seq, uint64_t emitted,
                      uint64_t dropped, uint64_t timing_dropped) {
  schema::StatsEvent e;
  e.header = HeaderFor(id, seq);
  e.emitted = emitted;
  e.dropped = dropped;
  e.dropped_ring_full = dropped;
  e.timing_dropped = timing_dropped;
  e.ring_capacity = 65536;
  e.interval_ns = 1000000000;
  return EncodeEvent(e);
}

std::string ProcessEndLine(const ProducerIdentity& id, uint64_t seq, uint64_t emitted,
                           uint64_t dropped, uint64_t timing_dropped) {
  schema::ProcessEndEvent e;
  e.header = HeaderFor(id, seq);
  e.exit_code = 0;
  e.emitted = emitted;
  e.dropped = dropped;
  e.dropped_ring_full = dropped;
  e.timing_dropped = timing_dropped;
  return EncodeEvent(e);
}

uint64_t PeakRssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stoull(line.substr(6)) * 1024;  // "VmHWM:   12345 kB"
    }
  }
  return 0;
}

}  // namespace cuflight::collector::testing
