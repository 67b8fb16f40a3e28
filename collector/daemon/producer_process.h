// What the collector knows about one producer stream (a process, as producer_identity.h names
// it) while it is connected (or within its reconnect grace): its log stream and the accounting
// of its seq numbers.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_PROCESS_H_
#define CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "cuflight/metrics/metrics.h"
#include "cuflight/schema/config_expander.h"
#include "log_sink.h"
#include "producer_blackbox.h"

namespace cuflight::collector {

struct ProducerProcess {
  uint64_t id = 0;      // unique for the collector's life; the metrics' process_id
  std::string map_key;  // key in the collector's process table
  ProcessKey key;
  LogSink::Stream* stream = nullptr;

  // Highest seq in the log (recovered from it on first sight, then what this collector stored);
  // process_lost's last_seq.
  std::optional<uint64_t> highest_stored;
  // One past the highest seq accounted for: stored, or received and rejected with a valid header.
  // A seq above it opens a gap of (seq - next_expected) lost events.
  uint64_t next_expected = 0;
  // When the process started, as the collector's steady clock puts it (its process_start's
  // start_ns, at most kMaxStreamAgeCredit before it was first seen, never after): seqs and
  // counts beyond what it could have made since are refused (collector.cc, SeqBound).
  std::chrono::steady_clock::time_point seq_origin{};
  // The `stream` label of its stall series: "<instance_id>-<owner>", the tail of its log's name
  // (empty for a stream named without an owner).
  std::string stall_label;
  uint64_t stored = 0;  // lines this collector stored for the process
  uint64_t lost = 0;    // seq gaps, and refused lines not sent again (process_lost)
  // Highest seq of a line the log refused (buffers full); counted as lost at process_lost if
  // the producer did not send it again.
  std::optional<uint64_t> highest_refused;

  // The producer's own cumulative drop counters, from its latest stats / process_end stored.
  uint64_t dropped_ring_full = 0;
  uint64_t dropped_disconnected = 0;
  uint64_t dropped_backpressure = 0;
  uint64_t dropped_other = 0;
  uint64_t timing_dropped = 0;  // kernel timing records lost (not events)
  uint64_t occupancy_disagreements = 0;  // launches the driver and the engine disagreed on

  // A stream of one TCP connection (producer_identity.h): process_lost follows its close at
  // once, and seq gaps count from its first event after the preamble (the producer's earlier
  // events went to the streams of its earlier connections).
  bool per_connection = false;
  bool baseline_pending = false;

  int connections = 0;  // open connections identified as this process
  bool ended = false;   // process_end stored
  // Set while it is held without a connection (for its return or its black box): the owner
  // whose lingering slot it takes (collector.cc, Linger).
  std::optional<uid_t> lingering_owner;
  // Set while no connection is open: when to append process_lost if it has not come back.
  std::optional<std::chrono::steady_clock::time_point> lost_deadline;

  // The black box of its last connection, kept from that connection's end (without
  // process_end) until the producer is gone (its pidfd is watched) or the deadline: then it is
  // read, and what it gives is stored before process_lost.
  std::unique_ptr<ProducerBlackbox> blackbox;
  bool blackbox_read = false;  // a black box was read: process_lost says events_recovered
  uint64_t recovered = 0;      // events stored from it (also in `stored`)
  // Its black box is being read (the collector's recovery queue holds it): process_lost is
  // written when the reading ends.
  bool recovering = false;
  bool lost_written = false;  // process_lost appended

  // Whether the metrics remember its launches for their kernel_time (Metrics::RemembersLaunches:
  // not when its timing policy is off), as the metrics last answered (after Metrics::Process):
  // a launch of a process with timing off then neither prefetches nor probes the join.
  bool metrics_join = true;

  // Interned kernel configurations (docs/protocol.md): what the process described, checked and
  // bounded by `configs` (schema::kMaxConfigsPerSequence), and for each id `configs` accepted,
  // what its launches need, found with one look-up per launch line.
  schema::ConfigExpander configs;
  struct InternedConfig {
    // Its kernel_config line as stored, and the log file (LogSink::file_serial) it was last
    // written to: a launch stored in another file is preceded there by its description again,
    // so that every file is readable alone.
    std::string line;
    uint64_t file_serial = 0;
    // What a launch of it counts in the metrics, from its description (`name`: a view into
    // `configs`' copy, which lives as long as the process): the kernel's name (demangled when
    // known), limiting resource, occupancy, and its device.
    std::string_view name;
    schema::Resource limiting_resource = schema::Resource::kOther;
    double occupancy = 0;
    int32_t device = 0;
    // The metrics' labels of name and limiting resource, resolved at its first launch stored
    // (Metrics::LabelsOf), so that later launches neither hash the name nor match the resource.
    std::optional<Metrics::KernelLabels> labels;
  };
  std::unordered_map<uint64_t, InternedConfig> interned;

  // The configuration `config_id` names, or nullptr when the process did not describe it.
  // Launches come in runs of one configuration (a loop launching the same kernel): the last one
  // found is kept (entries are never erased, and a node keeps its address across rehashes).
  InternedConfig* Interned(uint64_t config_id) {
    if (last_interned_ != nullptr && last_interned_id_ == config_id) return last_interned_;
    const auto it = interned.find(config_id);
    if (it == interned.end()) return nullptr;
    last_interned_id_ = config_id;
    last_interned_ = &it->second;
    return last_interned_;
  }

 private:
  uint64_t last_interned_id_ = 0;
  InternedConfig* last_interned_ = nullptr;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_PRODUCER_PROCESS_H_
