#include "collector_main.h"

#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <exception>
#include <memory>
#include <string>

#include "collector.h"
#include "collector_options.h"
#include "cuflight/exporter/exporter.h"
#include "cuflight/metrics/metrics.h"
#include "cuflight/metrics/metrics_server.h"

namespace cuflight::collector {
namespace {

// The running collector, for the signal handlers (RequestStop/RequestReopen are
// async-signal-safe).
std::atomic<Collector*> g_running{nullptr};
// A stop signal that came while the collector was being made (its socket may already be there):
// it stops as soon as it exists instead of dying by the signal's default action.
std::atomic<bool> g_stop_before_running{false};

extern "C" void OnStopSignal(int /*signo*/) {
  if (Collector* c = g_running.load(std::memory_order_acquire)) {
    c->RequestStop();
  } else {
    g_stop_before_running.store(true, std::memory_order_release);
  }
}

extern "C" void OnHangupSignal(int /*signo*/) {
  if (Collector* c = g_running.load(std::memory_order_acquire)) c->RequestReopen();
}

// Installs the handlers before the collector is made (its socket exists before it runs) and
// restores the previous ones after; Attach names the collector they act on.
class SignalScope {
 public:
  SignalScope() {
    struct sigaction stop {};
    stop.sa_handler = OnStopSignal;
    sigemptyset(&stop.sa_mask);
    stop.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &stop, &old_term_);
    sigaction(SIGINT, &stop, &old_int_);
    struct sigaction hup {};
    hup.sa_handler = OnHangupSignal;
    sigemptyset(&hup.sa_mask);
    hup.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &hup, &old_hup_);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &old_pipe_);
  }
  void Attach(Collector* collector) {
    g_running.store(collector, std::memory_order_release);
    if (g_stop_before_running.exchange(false, std::memory_order_acq_rel)) collector->RequestStop();
  }
  ~SignalScope() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    g_running.store(nullptr, std::memory_order_release);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  struct sigaction old_term_ {};
  struct sigaction old_int_ {};
  struct sigaction old_hup_ {};
  struct sigaction old_pipe_ {};
};

std::shared_ptr<spdlog::logger> MakeStderrLogger(const std::string& level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("collector", sink);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);  // stderr is unbuffered for the reader anyway
  return logger;
}

}  // namespace

int RunCollectorMain(int argc, const char* const* argv, std::string_view program, std::ostream& out,
                     std::ostream& err) noexcept {
  const std::string prefix(program);
  try {
    CollectorOptions options;
    std::string error;
    switch (ParseCollectorArgs(argc, argv, &options, out, &error)) {
      case ParseStatus::kExitOk:
        return 0;
      case ParseStatus::kExitUsage:
        err << prefix << ": " << error << '\n';
        return 2;
      case ParseStatus::kRun:
        break;
    }
    const std::shared_ptr<spdlog::logger> logger = MakeStderrLogger(options.log_level);

    // The web config is read before anything starts: a bad one is a usage error.
    MetricsServerOptions server_options;
    if (!options.web_config.empty()) {
      if (options.metrics.host.empty()) {
        err << prefix << ": --web-config: there is no --metrics endpoint to protect\n";
        return 2;
      }
      if (!LoadWebConfig(options.web_config, &server_options.web_config, &error)) {
        err << prefix << ": --web-config " << error << '\n';
        return 2;
      }
    }
    // The exporter's counters exist with the export; /metrics shows them after the daemon's.
    std::unique_ptr<exporter::ExportMetrics> export_metrics;
    if (!options.otlp.endpoint.empty()) {
      export_metrics = std::make_unique<exporter::ExportMetrics>();
      server_options.more_metrics = [m = export_metrics.get()](std::string* text) {
        m->Render(text);
      };
    }
    // Metrics are kept only when they are served: without --metrics nobody could read them.
    std::unique_ptr<Metrics> metrics;
    std::unique_ptr<MetricsServer> server;
    if (!options.metrics.host.empty()) {
      metrics = std::make_unique<Metrics>();
      std::string metrics_error;
      server = MetricsServer::Start(*metrics, options.metrics.host, options.metrics.port,
                                    &metrics_error, server_options);
      if (!server) {
        err << prefix << ": --metrics: " << metrics_error << '\n';
        return 1;
      }
    }
    StartupError startup;
    SignalScope signals;
    std::unique_ptr<Collector> collector =
        Collector::Create(options, metrics.get(), logger, &startup);
    if (!collector) {
      err << prefix << ": " << startup.line << '\n';
      return startup.exit_code;
    }
    if (server) {
      const WebConfig& web = server_options.web_config;
      logger->info(
          "metrics at {}://{}:{}/metrics{}", web.tls != nullptr ? "https" : "http",
          options.metrics.host, server->port(),
          web.basic_auth_users.empty()
              ? std::string()
              : " (basic auth, users: " + std::to_string(web.basic_auth_users.size()) + ")");
    }
    // The exporter reads the logs the collector writes (it exists now, its directory trusted),
    // on a thread of its own; it never touches the ingest path (cuflight/exporter/exporter.h).
    std::unique_ptr<exporter::Exporter> otlp;
    if (!options.otlp.endpoint.empty()) {
      std::string otlp_error;
      otlp = exporter::Exporter::Start(options.otlp, options.log_dir, options.socket_group,
                                       export_metrics.get(), logger, &otlp_error);
      if (!otlp) {
        err << prefix << ": --otlp-endpoint: " << otlp_error << '\n';
        return 1;
      }
      logger->info("exporting events to {} ({})", options.otlp.endpoint,
                   options.otlp.encoding == exporter::Encoding::kJson ? "http/json"
                                                                      : "http/protobuf");
    }
    signals.Attach(collector.get());
    const int status = collector->Run();
    g_running.store(nullptr, std::memory_order_release);
    collector.reset();
    // After the collector: the events it wrote while stopping are sent too.
    if (otlp) otlp->Stop();
    if (server) server->Stop();
    logger->flush();
    return status;
  } catch (const std::exception& e) {
    err << prefix << ": internal error: " << e.what() << '\n';
    return 1;
  } catch (...) {
    err << prefix << ": internal error\n";
    return 1;
  }
}

}  // namespace cuflight::collector
