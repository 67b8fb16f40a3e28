// The collector's settings: defaults, command-line flags and the JSON config file.
//
// Every setting is a long flag (`--rotate-bytes 64M`) and, under the same name without the
// dashes, a key of the JSON object in `--config FILE` (`{"rotate-bytes": "64M"}`); a flag given
// on the command line wins over the file. Values are checked here, so a bad one is reported as one
// line naming the flag (or the file and key) before anything starts.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_COLLECTOR_OPTIONS_H_
#define CUFLIGHT_COLLECTOR_DAEMON_COLLECTOR_OPTIONS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "cuflight/exporter/exporter.h"
#include "producer_blackbox.h"

namespace cuflight::collector {

// A HOST:PORT pair as given: host is a name or an IP literal (IPv6 in brackets on the command
// line, stored without them); port 0..65535, 0 asking the kernel for a free port.
struct HostPort {
  std::string host;
  int port = 0;

  bool operator==(const HostPort&) const = default;
};

struct CollectorOptions {
  // Unix domain socket producers connect to (docs/protocol.md: $CUFLIGHT_COLLECTOR, else
  // $XDG_RUNTIME_DIR/cuflight/collector.sock, else /tmp/cuflight-<uid>/collector.sock).
  std::filesystem::path socket;
  // The group whose members' processes may connect to the socket besides the collector's own
  // user and root (docs/collector.md, "Who may connect"); nullopt (the default): nobody else.
  // The socket is then 0660 with this group, and the group must be able to search its directory.
  std::optional<gid_t> socket_group;
  std::string socket_group_name;  // as given (a name, or the gid in decimal), for messages
  // Where the event logs go (DefaultLogDir()).
  std::filesystem::path log_dir;
  // How a producer's end may be learnt for its black box (producer_blackbox.h); all sources by
  // default. Not a flag: tests turn sources off to take an older kernel's path on any kernel.
  ProducerEndSources producer_end_sources;
  uint64_t rotate_bytes = 64ull << 20;
  uint64_t retain_bytes = 0;  // 0: no size limit
  int retain_days = 0;        // 0: no age limit
  std::chrono::milliseconds fsync_interval{1000};
  // Prometheus endpoint; empty host: off.
  HostPort metrics;
  // The endpoint's web config (exporter-toolkit's YAML: basic_auth_users with bcrypt hashes),
  // read at startup (cuflight/metrics/web_config.h); empty: no authentication.
  std::string web_config;
  // Producer TCP listener; empty host: off. Only loopback addresses unless tcp_allow_remote.
  HostPort tcp;
  bool tcp_allow_remote = false;
  // Over TCP nothing about the writer is verified, so by default each TCP connection writes a
  // stream of its own (docs/collector.md, "Process identity"). True: a TCP connection continues
  // the stream its process_start names, as the Unix socket does for one uid (opt-in, weaker).
  bool tcp_trust_identity = false;
  // Simultaneous producer connections; one more is accepted and closed at once (counted), unless
  // its owner holds two fewer than another, whose newest connection is then closed for it (fair
  // shares, collector.h point 6). Also the most processes held after their connection ended.
  int max_connections = 1024;
  // Simultaneous connections of one uid (SO_PEERCRED; all TCP peers together count as one),
  // so that one user cannot hold every slot, and the most processes of one uid held after their
  // connection ended; 0: a quarter of max_connections (at least 1).
  int max_connections_per_uid = 0;
  // Longest accepted line without its '\n'; longer lines are discarded and counted.
  size_t max_line_bytes = 64 * 1024;
  // A connection that has not identified itself (a valid process_start) within this time is
  // closed, so silent or trickling peers cannot hold a connection slot.
  std::chrono::milliseconds handshake_timeout{10000};
  // An identified connection that sends nothing for this long is closed (0: never). Producers
  // send a stats event every CUFLIGHT_STATS_MS (5 s by default) even when idle, so a live one is
  // never closed; one that is (stopped, hung) reconnects when it sends again.
  std::chrono::milliseconds idle_timeout{60000};
  // How long after a producer disconnects without process_end the collector waits for the same
  // process to reconnect before it appends process_lost.
  std::chrono::milliseconds reconnect_grace{2000};
  // Bound on the event lines received and not yet written (all logs together, e.g. while the
  // disk is full); past it a process's lines are refused (store_failed) until it reconnects.
  uint64_t max_pending_bytes = 128ull << 20;
  // How often retention scans the log directory (on its own thread).
  std::chrono::milliseconds retention_interval{10000};
  // spdlog level name: trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
  // The OTLP export of the logs (--otlp-*; cuflight/exporter/exporter.h); endpoint empty: off.
  exporter::ExportOptions otlp;
};

// Outcome of ParseCollectorArgs.
enum class ParseStatus {
  kRun,        // options are complete and valid
  kExitOk,     // --help or --version was printed to `out`
  kExitUsage,  // *error holds one line naming the flag or config key
};

// Parses argv[1..argc) (argv[0] is the program name, used in --help) over the defaults, then the
// config file (if --config), then the flags given. On kExitUsage, *error is one line without the
// program-name prefix and without a newline, e.g.
// "--rotate-bytes: '12x' is not a byte count (an integer with an optional K, M or G suffix)".
// Never throws.
ParseStatus ParseCollectorArgs(int argc, const char* const* argv, CollectorOptions* options,
                               std::ostream& out, std::string* error) noexcept;

// The protocol's default socket path for this user (see CollectorOptions::socket), with the real
// uid in the /tmp fallback, as the producer side (transport::DefaultCollectorPath) computes it.
std::filesystem::path DefaultSocketPath();

// Default log directory: /var/log/cuflight for root; otherwise $XDG_STATE_HOME/cuflight/logs,
// else $HOME/.local/state/cuflight/logs, else ./cuflight-logs.
std::filesystem::path DefaultLogDir();

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_COLLECTOR_OPTIONS_H_
