// A real Prometheus server scrapes the metrics endpoint; its query API must return the
// expected series with the expected values. The test starts its own Prometheus on a free
// loopback port with a temporary configuration and storage, and stops it at the end.
//
// Expected values are worked out by hand from the calls the test makes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/metrics/metrics.h"
#include "cuflight/metrics/metrics_server.h"

namespace cuflight::collector {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr const char* kPrometheus = CUFLIGHT_PROMETHEUS_PATH;
// Prometheus needs a few seconds to start on a loaded machine, then scrapes every second.
constexpr auto kDeadline = std::chrono::seconds(30);
constexpr auto kPollInterval = std::chrono::milliseconds(200);

// A loopback TCP port free at the time of the call.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One Prometheus server process with its own temporary directory.
class PrometheusServer {
 public:
  ~PrometheusServer() { Stop(); }

  // Starts Prometheus scraping 127.0.0.1:`target_port`/metrics every second. Returns "" or
  // what went wrong.
  std::string Start(int target_port) {
    char dir_template[] = "/tmp/cuflight-prometheus-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) return "mkdtemp failed";
    dir_ = dir_template;
    std::ofstream(dir_ / "prometheus.yml") << "global:\n"
                                              "  scrape_interval: 1s\n"
                                              "  scrape_timeout: 1s\n"
                                              "  evaluation_interval: 1s\n"
                                              "scrape_configs:\n"
                                              "  - job_name: cuflight\n"
                                              "    metrics_path: /metrics\n"
                                              "    static_configs:\n"
                                              "      - targets: ['127.0.0.1:"
                                           << target_port << "']\n";
    // A port picked now may be taken before Prometheus binds it: try a few.
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = FreePort();
      if (port_ == 0) return "no free port";
      if (!Spawn()) return "fork failed";
      const Clock::time_point deadline = Clock::now() + kDeadline;
      httplib::Client client("127.0.0.1", port_);
      client.set_connection_timeout(1);
      client.set_read_timeout(2);
      while (Clock::now() < deadline) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          break;  // exited: try another port
        }
        const httplib::Result r = client.Get("/-/ready");
        if (r && r->status == 200) return "";
        std::this_thread::sleep_for(kPollInterval);
      }
      if (pid_ > 0) return "Prometheus not ready within 30 s:\n" + Log();
    }
    return "Prometheus exited at start:\n" + Log();
  }

  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
      int status = 0;
      while (waitpid(pid_, &status, WNOHANG) == 0) {
        if (Clock::now() > deadline) {
          kill(pid_, SIGKILL);
          waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      pid_ = -1;
    }
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      dir_.clear();
    }
  }

  int Port() const { return port_; }
  std::string Log() const { return ReadFile(dir_ / "prometheus.log"); }

 private:
  bool Spawn() {
    const std::string config = "--config.file=" + (dir_ / "prometheus.yml").string();
    const std::string storage = "--storage.tsdb.path=" + (dir_ / "data").string();
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
    const std::string log = (dir_ / "prometheus.log").string();
    std::vector<const char*> argv = {kPrometheus,    config.c_str(),     storage.c_str(),
                                     listen.c_str(), "--log.level=info", nullptr};
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      // Only async-signal-safe calls until exec. Die with the test if it crashes.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      execv(kPrometheus, const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    pid_ = pid;
    return true;
  }

  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string UrlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '-' ||
        u == '_' || u == '.' || u == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

// The contents of the ```promql blocks of docs/metrics.md.
std::vector<std::string> DocQueries() {
  std::vector<std::string> queries;
  std::istringstream in(ReadFile(CUFLIGHT_METRICS_DOC));
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == "```promql") {
      inside = true;
      block.clear();
    } else if (inside && line == "```") {
      inside = false;
      queries.push_back(block);
    } else if (inside) {
      block += (block.empty() ? "" : "\n") + line;
    }
  }
  return queries;
}

class MetricsPrometheusTest : public ::testing::Test {
 protected:
  // The result vector of an instant query, or nullopt on any failure.
  std::optional<json> Query(const std::string& expr) {
    httplib::Client client("127.0.0.1", prometheus_.Port());
    client.set_connection_timeout(2);
    client.set_read_timeout(5);
    const httplib::Result r = client.Get("/api/v1/query?query=" + UrlEncode(expr));
    if (!r || r->status != 200) return std::nullopt;
    const json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || body.value("status", "") != "success") return std::nullopt;
    return body["data"]["result"];
  }

  // Polls `expr` until it returns exactly one sample equal to `expected` (within 1e-9), or the
  // deadline passes; returns the last value seen.
  std::optional<double> WaitForValue(const std::string& expr, double expected) {
    std::optional<double> last;
    const Clock::time_point deadline = Clock::now() + kDeadline;
    while (Clock::now() < deadline) {
      const std::optional<json> result = Query(expr);
      if (result && result->size() == 1) {
        last = std::stod((*result)[0]["value"][1].get<std::string>());
        if (std::abs(*last - expected) <= 1e-9) return last;
      }
      std::this_thread::sleep_for(kPollInterval);
    }
    return last;
  }

  void ExpectValue(const std::string& expr, double expected) {
    const std::optional<double> v = WaitForValue(expr, expected);
    ASSERT_TRUE(v.has_value()) << expr << ": no single sample within 30 s";
    EXPECT_DOUBLE_EQ(*v, expected) << expr;
  }

  PrometheusServer prometheus_;
};

TEST_F(MetricsPrometheusTest, PrometheusScrapesTheExpectedSeries) {
  ASSERT_EQ(access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: install the Debian package `prometheus` (scripts/setup --tests "
      << "installs it; or apt-get install prometheus)";

  Metrics m(10);
  const std::string odd_name = "odd\"name\\with\nnewline";
  m.ProducerConnected();
  m.ProducerConnected();
  for (int i = 0; i < 5; ++i) m.EventReceived("kernel");
  m.Rejected("malformed_json");
  m.Rejected("malformed_json");
  m.Lost(4);
  m.ProducerTimingDropped(3);
  m.BytesWritten(1000);
  // Process 1 (rank 0 of job 4242, pod trainer-0) sees a whole GPU and a MIG instance; process 2
  // (no attribution) runs under CUDA_VISIBLE_DEVICES with the MIG instance as its ordinal 0;
  // process 3 is stalled on its only GPU, the whole one.
  const std::string gpu = "GPU-9f2d1c3e-5b7a-4e21-8c0d-1a2b3c4d5e6f";
  const std::string mig = "MIG-0c8e7a51-2d34-5f67-9a8b-c1d2e3f4a5b6";
  const Metrics::Workload trainer{"4242", "ml", "trainer-0", "pytorch"};
  m.Process(1, trainer, Metrics::TimingPolicy::kSampled);
  m.Process(2, {}, Metrics::TimingPolicy::kAll);
  m.Process(3, trainer, Metrics::TimingPolicy::kAll);
  m.Device(1, 0, gpu, "00000000:19:00.0", "NVIDIA H100 80GB HBM3");
  m.Device(1, 1, mig, "00000000:3B:00.0", "NVIDIA H100 80GB HBM3");
  m.Device(2, 0, mig, "00000000:3B:00.0", "NVIDIA H100 80GB HBM3");
  m.Device(3, 0, gpu, "00000000:19:00.0", "NVIDIA H100 80GB HBM3");
  m.ApiError("CUDA_ERROR_ILLEGAL_ADDRESS", 1);
  m.ProcessCrashed(1);
  m.ConnectionRefused("connection_limit");
  m.Kernel(1, 1, "gemm", 0, "registers", 0.5);
  m.Kernel(1, 2, "gemm", 0, "registers", 0.5);
  m.Kernel(1, 3, "gemm", 0, "registers", 0.5);
  m.Kernel(1, 4, odd_name, 0, "warps", 1.0);
  m.Kernel(2, 1, "softmax", 0, "shared_mem", 0.25);
  m.KernelTime(1, 1, 0, 1'500'000'000);
  m.KernelTime(2, 1, 0, 250'000'000);
  const Metrics::StallAge stall[] = {{0, 12.5}};
  m.Stall(3, "node1", 4242, "/opt/train", stall, Clock::now());

  std::string error;
  auto server = MetricsServer::Start(m, "127.0.0.1", 0, &error);
  ASSERT_NE(server, nullptr) << error;
  const std::string started = prometheus_.Start(server->port());
  ASSERT_EQ(started, "") << started;

  ExpectValue("up{job=\"cuflight\"}", 1);
  const std::string on_gpu = "{UUID=\"" + gpu + "\",pci_bus_id=\"00000000:19:00.0\"," +
                             "modelName=\"NVIDIA H100 80GB HBM3\"";
  const std::string on_mig = "{UUID=\"" + mig + "\"";
  ExpectValue("cuflight_kernel_launches_total" + on_gpu + ",limiting_resource=\"registers\"}", 3);
  ExpectValue("cuflight_kernel_launches_total" + on_gpu + ",limiting_resource=\"warps\"}", 1);
  // Process 2's ordinal 0 is the MIG instance, not the whole GPU.
  ExpectValue("cuflight_kernel_launches_total" + on_mig + ",limiting_resource=\"shared_mem\"}", 1);
  ExpectValue("cuflight_kernel_occupancy_ratio_bucket" + on_gpu + ",le=\"0.5\"}", 3);
  ExpectValue("cuflight_kernel_occupancy_ratio_bucket" + on_gpu + ",le=\"+Inf\"}", 4);
  ExpectValue("cuflight_kernel_occupancy_ratio_count" + on_gpu + "}", 4);
  ExpectValue("cuflight_kernel_occupancy_ratio_sum" + on_gpu + "}", 2.5);
  // One GPU per UUID across families, and a join on UUID (as with dcgm-exporter's series) works.
  ExpectValue("count(count by (UUID, pci_bus_id, modelName) (cuflight_kernel_launches_total))", 2);
  ExpectValue("sum by (UUID) (cuflight_kernel_gpu_seconds_total{UUID=\"" + gpu +
                  "\"}) / on (UUID) sum by (UUID) (cuflight_kernel_timed_launches_total)",
              1.5);
  // Observations .25 .5 .5 .5 1: the median lies in (0.375, 0.5], 1.5 of the 3 ranks in:
  // 0.375 + 0.125 * 1.5 / 3.
  ExpectValue("histogram_quantile(0.5, sum by (le) (cuflight_kernel_occupancy_ratio_bucket))",
              0.4375);
  ExpectValue("cuflight_kernel_gpu_seconds_total" + on_gpu + "}", 1.5);
  ExpectValue("cuflight_kernel_gpu_seconds_total" + on_mig + "}", 0.25);
  // Workload labels; the collector's own labels (job, instance) stay Prometheus's.
  ExpectValue(
      "cuflight_workload_kernel_launches_total{job=\"cuflight\",hpc_job=\"4242\","
      "namespace=\"ml\",pod=\"trainer-0\",container=\"pytorch\",limiting_resource="
      "\"registers\"}",
      3);
  ExpectValue("cuflight_workload_process_crashes_total{hpc_job=\"4242\",pod=\"trainer-0\"}", 1);
  ExpectValue("cuflight_workload_processes_started_total{hpc_job=\"4242\"}", 2);
  ExpectValue(
      "cuflight_workload_api_errors_total{namespace=\"ml\",error=\"CUDA_ERROR_ILLEGAL_ADDRESS\"}",
      1);
  // Process 2 has no attribution: its series have no workload label.
  ExpectValue("cuflight_workload_kernel_launches_total{hpc_job=\"\",limiting_resource="
              "\"shared_mem\"}",
              1);
  ExpectValue("cuflight_kernel_launches_by_timing_total{timing=\"sampled\"}", 4);
  ExpectValue("cuflight_kernel_launches_by_timing_total{timing=\"all\"}", 1);
  ExpectValue("cuflight_build_info{version=\"" CUFLIGHT_PROJECT_VERSION "\",schema=\"v1\"}", 1);
  ExpectValue("sum(cuflight_connections_refused_total)", 1);
  ExpectValue("sum(cuflight_events_rejected_total)", 2);
  // The estimate of docs/metrics.md: gemm's 1.5 s were measured on 1 of its 3 launches.
  ExpectValue(
      "sum by (kernel) (cuflight_kernel_name_gpu_seconds_total{kernel=\"gemm\"}) "
      "* sum by (kernel) (cuflight_kernel_name_launches_total{kernel=\"gemm\"}) "
      "/ sum by (kernel) (cuflight_kernel_name_timed_launches_total{kernel=\"gemm\"})",
      4.5);
  ExpectValue("cuflight_kernel_name_gpu_seconds_total{kernel=\"gemm\"}", 1.5);
  ExpectValue("cuflight_kernel_name_gpu_seconds_total{kernel=\"softmax\"}", 0.25);
  // The mean occupancy per kernel, as docs/metrics.md computes it.
  ExpectValue(
      "cuflight_kernel_name_occupancy_ratio_sum{kernel=\"gemm\"} / "
      "cuflight_kernel_name_occupancy_ratio_count{kernel=\"gemm\"}",
      0.5);
  ExpectValue("count(cuflight_kernel_name_launches_total)", 3);
  ExpectValue("cuflight_events_received_total{type=\"kernel\"}", 5);
  ExpectValue("cuflight_events_rejected_total{reason=\"malformed_json\"}", 2);
  ExpectValue("cuflight_events_lost_total", 4);
  ExpectValue("cuflight_kernel_timing_dropped_total", 3);
  ExpectValue("cuflight_log_written_bytes_total", 1000);
  ExpectValue("cuflight_producers_connected", 2);
  ExpectValue("cuflight_kernel_names_tracked", 3);
  // The stalled process's gauge grows from 12.5 s with the time since its stall event.
  ExpectValue("cuflight_processes_stalled", 1);
  ExpectValue(
      "count(cuflight_kernel_oldest_unfinished_seconds{hostname=\"node1\",pid=\"4242\","
      "exe=\"train\",UUID=\"" +
          gpu + "\",hpc_job=\"4242\",namespace=\"ml\",pod=\"trainer-0\"} >= 12.5)",
      1);

  // The escaped label value reaches Prometheus as the original name.
  const std::optional<json> odd =
      Query("cuflight_kernel_name_launches_total{limiting_resource=\"warps\"}");
  ASSERT_TRUE(odd.has_value());
  ASSERT_EQ(odd->size(), 1u) << odd->dump();
  EXPECT_EQ((*odd)[0]["metric"]["kernel"].get<std::string>(), odd_name);
  EXPECT_EQ((*odd)[0]["value"][1].get<std::string>(), "1");

  // Scrapes are live: new launches show up.
  m.Kernel(1, 5, "gemm", 0, "registers", 0.5);
  m.Kernel(1, 6, "gemm", 0, "registers", 0.5);
  ExpectValue("cuflight_kernel_launches_total" + on_gpu + ",limiting_resource=\"registers\"}", 5);

  // Every PromQL example in docs/metrics.md evaluates; those that are not alert conditions
  // (a comparison, normally empty) return data.
  const std::vector<std::string> doc_queries = DocQueries();
  EXPECT_GE(doc_queries.size(), 6u);
  for (const std::string& expr : doc_queries) {
    const bool alert =
        expr.find(" > ") != std::string::npos || expr.find(" >= ") != std::string::npos;
    std::optional<json> result;
    const Clock::time_point deadline = Clock::now() + kDeadline;
    while (Clock::now() < deadline) {
      result = Query(expr);
      if (result && (alert || !result->empty())) break;
      std::this_thread::sleep_for(kPollInterval);
    }
    ASSERT_TRUE(result.has_value()) << "query failed: " << expr;
    if (!alert) {
      EXPECT_FALSE(result->empty()) << "no data: " << expr;
    }
  }

  // Prometheus saw no error in any scrape of the target.
  httplib::Client client("127.0.0.1", prometheus_.Port());
  const httplib::Result targets = client.Get("/api/v1/targets");
  ASSERT_TRUE(targets && targets->status == 200);
  const json t = json::parse(targets->body);
  ASSERT_EQ(t["data"]["activeTargets"].size(), 1u) << t.dump();
  EXPECT_EQ(t["data"]["activeTargets"][0]["health"], "up") << t.dump();
  EXPECT_EQ(t["data"]["activeTargets"][0]["lastError"], "") << t.dump();

  prometheus_.Stop();
  server->Stop();
}

}  // namespace
}  // namespace cuflight::collector
