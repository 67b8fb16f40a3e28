// What the collector counted since it started: connections, lines by outcome, rejections by
// reason, seq gaps, acks. A snapshot type; Collector::stats() returns a copy.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_INGEST_STATS_H_
#define CUFLIGHT_COLLECTOR_DAEMON_INGEST_STATS_H_

#include <array>
#include <cstdint>
#include <string_view>

#include "cuflight/schema/decoder.h"

namespace cuflight::collector {

// Why a line was not stored. The first values mirror schema::Reason (same numbers); the rest are
// the collector's own.
enum class RejectReason : uint8_t {
  kMalformedJson = 1,
  kNotAnObject = 2,
  kUnknownType = 3,
  kUnsupportedVersion = 4,
  kMissingField = 5,
  kWrongType = 6,
  kOutOfRange = 7,
  kInternalError = 8,
  kLineTooLong = 9,       // longer than max_line_bytes; discarded unread
  kTruncatedLine = 10,    // the connection ended in the middle of a line
  kNoProcessStart = 11,   // a valid event before the connection's process_start
  kIdentityChanged = 12,  // a second process_start naming another process on one connection
  kStoreFailed = 13,      // the log could not take it (the producer keeps and resends it)
  kReservedType = 14,     // a type only the collector writes (process_lost)
  // A seq beyond what the stream's process could have made by now (docs/collector.md, "Counts a
  // producer cannot inflate"): not stored, and it accounts for nothing.
  kImplausibleSeq = 15,
  // Interned kernel configurations (docs/protocol.md): a launch naming a configuration the
  // process did not describe; a description of a described id that says something else; a
  // description beyond schema::kMaxConfigsPerSequence for one process.
  kUnknownConfig = 16,
  kConfigRedefined = 17,
  kConfigFlood = 18,
};
inline constexpr int kRejectReasonSlots = 19;  // index 0 unused

constexpr RejectReason FromSchemaReason(schema::Reason reason) {
  return static_cast<RejectReason>(static_cast<uint8_t>(reason));
}

// Stable snake_case name, also the metrics label: the schema's ReasonName for the first eight,
// then "line_too_long", "truncated_line", "no_process_start", "identity_changed", "store_failed",
// "reserved_type", "implausible_seq", "unknown_config", "config_redefined", "config_flood".
constexpr std::string_view RejectReasonName(RejectReason reason) {
  const auto value = static_cast<uint8_t>(reason);
  if (value >= 1 && value <= 8) return schema::ReasonName(static_cast<schema::Reason>(value));
  switch (reason) {
    case RejectReason::kLineTooLong:
      return "line_too_long";
    case RejectReason::kTruncatedLine:
      return "truncated_line";
    case RejectReason::kNoProcessStart:
      return "no_process_start";
    case RejectReason::kIdentityChanged:
      return "identity_changed";
    case RejectReason::kStoreFailed:
      return "store_failed";
    case RejectReason::kReservedType:
      return "reserved_type";
    case RejectReason::kImplausibleSeq:
      return "implausible_seq";
    case RejectReason::kUnknownConfig:
      return "unknown_config";
    case RejectReason::kConfigRedefined:
      return "config_redefined";
    case RejectReason::kConfigFlood:
      return "config_flood";
    default:
      return "unknown";
  }
}

struct IngestStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over max_connections (accepted, then closed at once)
  uint64_t connections_closed = 0;
  uint64_t connections_open = 0;
  uint64_t handshake_timeouts = 0;  // closed for sending no valid process_start in time
  uint64_t idle_timeouts = 0;       // identified, closed for sending nothing for idle_timeout
  uint64_t uid_limit_refusals = 0;  // of connections_refused: their uid's share was taken
  // Connections closed to make room for an owner with fewer (every slot taken; fair shares).
  uint64_t fair_share_closes = 0;
  // Processes whose connection ended without process_end and that could not be held for their
  // return or their black box (their owner's share of held processes, or all, taken).
  uint64_t linger_refusals = 0;
  // Of connections_refused: a Unix peer neither the collector's user, nor root, nor a member of
  // --socket-group.
  uint64_t peer_refusals = 0;

  uint64_t bytes_received = 0;
  uint64_t lines_received = 0;  // every framed line, good or bad, over-long ones included
  uint64_t lines_valid = 0;     // passed validation
  uint64_t lines_stored = 0;    // appended to a log
  uint64_t duplicates = 0;      // valid, but that seq of the process was already stored
  uint64_t lines_rejected = 0;  // sum of rejected[]
  std::array<uint64_t, kRejectReasonSlots> rejected{};  // by RejectReason
  // Missing from the logs, over all processes: seq gaps (cuflight_events_lost_total) and
  // events_unstored.
  uint64_t events_lost = 0;
  // Of events_lost: received, refused by the log (buffers full) and not sent again before the
  // process's process_lost (cuflight_events_unstored_total).
  uint64_t events_unstored = 0;
  uint64_t pid_mismatch = 0;  // payload pid differed from SO_PEERCRED; stored rewritten
  // `cuflight yield` requests answered (yield_control.h), and the producers they matched that
  // the requester was not allowed to make yield (another user's, or TCP ones for a non-root).
  uint64_t yield_requests = 0;
  uint64_t yield_refused = 0;
  // Claimed amounts not counted: seq gaps and drop-counter increases beyond what the producer
  // could have made (cuflight_counts_refused_total), in events.
  uint64_t counts_refused = 0;

  uint64_t processes_seen = 0;   // distinct producer processes identified
  uint64_t processes_ended = 0;  // process_end stored
  uint64_t processes_lost = 0;   // process_lost written
  uint64_t acks_sent = 0;
  // Connections whose ack write failed (the producer closed or died without reading its acks);
  // they are read to their end all the same.
  uint64_t ack_write_failures = 0;
  uint64_t flushes = 0;
  uint64_t reopens = 0;  // log files reopened (SIGHUP, RequestReopen)

  // Producers' black boxes (docs/protocol.md, "The black box").
  uint64_t blackboxes_received = 0;  // accepted on a connection
  // Refused on receipt (not a sealed memfd, too large, a bad header, no pidfd, a second one),
  // unreadable when read, or read with invalid entries (cuflight_blackbox_errors_total).
  uint64_t blackbox_errors = 0;
  uint64_t blackboxes_read = 0;          // read after their producer died
  uint64_t blackbox_skipped_alive = 0;   // not read: the producer still ran at the deadline
  uint64_t events_recovered = 0;         // stored from them (also in lines_stored)
  uint64_t blackbox_torn = 0;            // launches the kill caught in mid-record (used no seq)
  uint64_t blackbox_unrecoverable = 0;   // seqs used for what could not be made (lost)
  uint64_t blackbox_lines_rejected = 0;  // made, but refused by validation (lost)

  uint64_t rejected_for(RejectReason reason) const { return rejected[static_cast<size_t>(reason)]; }
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_INGEST_STATS_H_
