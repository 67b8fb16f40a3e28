// File names of cuflight's logs: where one producer process's stream lives and how its rotated
// segments are named, plus the sanitising rule that keeps names from a peer harmless. The
// collector's log sink and the injected library's spill files share this layout, so the report
// tools read both alike.
//
// Layout under the log directory:
//   <dir>/<YYYY-MM-DD>/<base>.jsonl                 the active file (appended to)
//   <dir>/<YYYY-MM-DD>/<base>.<NNNNNN>.jsonl        a closed segment waiting for compression
//   <dir>/<YYYY-MM-DD>/<base>.<NNNNNN>.jsonl.zst    a closed, compressed segment
//   <dir>/<YYYY-MM-DD>/<base>.<NNNNNN>.jsonl.zst.tmp  compression in progress (never complete)
// where <base> names one stream (docs/collector.md, "Process identity"):
//   <host>-<exe>-<pid>-<start_ns>-<instance_id>-<owner>   a producer that reports an instance id,
//                                                         or whose pid the collector cannot verify
//   <host>-<exe>-<pid>-<start_ns>                         a producer without an instance id whose
//                                                         pid the kernel verified (older producers)
// with <owner> what the collector verified about the writer ("u<uid>" on the Unix socket, "tcp"
// or "t<16 hex digits>" over TCP), the date the UTC day of start_ns, and NNNNNN the segment
// number from 1, zero-padded to 6 digits (more digits past 999999). Segment N holds the lines
// before segment N+1, and the active file the newest ones.
//
// Sanitising rule (host, exe and owner; exe is first cut to its basename, after the last '/'):
//   - bytes other than A-Z a-z 0-9 '.' '_' '+' '-' become '_' (so no '/', no control character,
//     no space, no non-ASCII byte survives; a multi-byte UTF-8 character becomes several '_');
//   - a leading '.' or '-' becomes '_' (no hidden files, no "." or "..", no option-like names);
//   - the result is cut to kMaxNameComponentBytes bytes; an empty result becomes "unknown".
// pid, start_ns and instance_id are printed as decimal integers; a negative start_ns is dated
// 1970-01-01. A full name is therefore at most about 235 bytes, below NAME_MAX (255).
#ifndef CUFLIGHT_SCHEMA_LOG_LAYOUT_H_
#define CUFLIGHT_SCHEMA_LOG_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cuflight::schema {

inline constexpr size_t kMaxNameComponentBytes = 64;

// Applies the sanitising rule above to one name component (host or an exe basename).
std::string SanitizeNameComponent(std::string_view raw);

// The part of `exe` after its last '/' (trailing '/' ignored); "" if there is none.
std::string_view ExeBaseName(std::string_view exe);

// "YYYY-MM-DD", the UTC day of `start_ns` (ns since the Unix epoch; negative counts as 0).
std::string StartDate(int64_t start_ns);

// "<host>-<exe>-<pid>-<start_ns>" with host and exe sanitised (exe cut to its basename first).
std::string StreamBaseName(std::string_view host, std::string_view exe, int32_t pid,
                           int64_t start_ns);

// "<host>-<exe>-<pid>-<start_ns>-<instance_id>-<owner>", host, exe and owner sanitised.
std::string StreamBaseName(std::string_view host, std::string_view exe, int32_t pid,
                           int64_t start_ns, uint64_t instance_id, std::string_view owner);

// What a stream base name states: pid and start_ns, and for the longer form the instance id and
// the owner (0 and "" for the shorter one).
struct StreamNameParts {
  int32_t pid = 0;
  int64_t start_ns = 0;
  uint64_t instance_id = 0;
  std::string owner;
};

// Parses a <base> of either form above (host and exe are not returned: they may contain '-').
// False when `base` is of neither form.
bool ParseStreamBaseName(std::string_view base, StreamNameParts* out);

// "<base>.jsonl".
std::string ActiveFileName(std::string_view base);

// "<base>.<NNNNNN>.jsonl" or, when `compressed`, "<base>.<NNNNNN>.jsonl.zst". index >= 1.
std::string SegmentFileName(std::string_view base, uint64_t index, bool compressed);

// True for "YYYY-MM-DD" (digits and dashes in those places; the date itself is not checked).
bool IsDateDirName(std::string_view name);

enum class LogFileKind : uint8_t {
  kOther,              // not a file of the log sink
  kActive,             // <base>.jsonl
  kPlainSegment,       // <base>.<N>.jsonl
  kCompressedSegment,  // <base>.<N>.jsonl.zst
  kTemp,               // <base>.<N>.jsonl.zst.tmp
};

struct ParsedLogFileName {
  LogFileKind kind = LogFileKind::kOther;
  std::string base;    // set for every kind but kOther
  uint64_t index = 0;  // segment number; 0 for kActive
};

// Classifies a file name (no directory part) of the layout above.
ParsedLogFileName ParseLogFileName(std::string_view name);

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_LOG_LAYOUT_H_
