// ReadLogFile: one plain or zstd JSONL file -> decoded events, with damage counted.
#include <sys/stat.h>

#include "cuflight/logread/log_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <new>
#include <utility>
#include <variant>

#include "cuflight/base/clip.h"
#include "cuflight/base/scoped_fd.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/line_decoder.h"
#include "file_reader.h"
#include "zstd_file.h"

namespace cuflight::logread {
namespace {

namespace fs = std::filesystem;

constexpr size_t kReadChunkBytes = 1 << 20;
// The first line of a log is an event of a few hundred bytes to a few KiB; this much data without
// a line break is not a log. Later lines have no limit (the collector's --max-line-bytes can be
// raised), the decoder judges them.
constexpr size_t kMaxFirstLineBytes = 1 << 20;
// Longest decoder message quoted in a note, "..." included.
constexpr size_t kMaxNoteMessageBytes = 163;

// zstd frame magic 0xFD2FB528, little-endian; skippable frames are 0x184D2A50..0x184D2A5F.
bool IsZstdMagic(std::string_view head) {
  if (head.size() < 4) return false;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(head[i]); };
  if (b(0) == 0x28 && b(1) == 0xB5 && b(2) == 0x2F && b(3) == 0xFD) return true;
  return (b(0) & 0xF0) == 0x50 && b(1) == 0x2A && b(2) == 0x4D && b(3) == 0x18;
}

// Control bytes JSON text never holds raw (a log line may hold '\r' before its '\n').
bool LooksBinary(std::string_view bytes) {
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t' && u != '\r') || u == 0x7F) return true;
  }
  return false;
}

// Thrown from a sink to stop reading a file that is not a log; caught in ReadLogFile.
struct NotALog {
  std::string line;
};

class LineSplitter {
 public:
  LineSplitter(const fs::path& file, internal::LineSink& sink, ReadSummary* summary)
      : file_(file), sink_(sink), summary_(summary) {}

  void Feed(std::string_view chunk) {
    bytes_ += chunk.size();
    while (!chunk.empty()) {
      const size_t nl = chunk.find('\n');
      if (nl == std::string_view::npos) {
        pending_.append(chunk);
        if (line_no_ == 0 && pending_.size() > kMaxFirstLineBytes) {
          throw NotALog{LooksBinary(pending_)
                            ? "not a cuflight log: binary data"
                            : fmt::format("not a cuflight log: no line break in the first {} bytes",
                                          kMaxFirstLineBytes)};
        }
        return;
      }
      if (pending_.empty()) {
        Line(chunk.substr(0, nl));
      } else {
        pending_.append(chunk.substr(0, nl));
        Line(pending_);
        pending_.clear();
      }
      chunk.remove_prefix(nl + 1);
    }
  }

  // At the end of the file: the torn last line, or the verdict on a file without any line.
  void Finish() {
    if (line_no_ == 0) {
      if (bytes_ == 0) throw NotALog{"not a cuflight log: empty file"};
      // Only a fragment: an event cut short is a torn line of a log that held nothing else;
      // anything else is not a log.
      std::string_view head = pending_;
      if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);
      while (!head.empty() && (head.front() == ' ' || head.front() == '\t')) head.remove_prefix(1);
      if (LooksBinary(pending_)) throw NotALog{"not a cuflight log: binary data"};
      if (!head.starts_with('{')) throw NotALog{"not a cuflight log: no complete line, and no JSON object begins it"};
    }
    if (pending_.empty()) return;
    ++line_no_;
    ++summary_->lines;
    ++summary_->torn_lines;
    Note(fmt::format("torn last line {} skipped in {} ({} bytes without a line end)", line_no_,
                     file_.native(), pending_.size()));
    pending_.clear();
  }

 private:
  void Line(std::string_view text) {
    ++line_no_;
    ++summary_->lines;
    if (sink_.raw()) {
      if (line_no_ == 1) CheckFirstLine(text, &first_);
      sink_.RawLine(text, line_no_);
      return;
    }
    schema::DecodeResult& result = *sink_.Slot();
    if (line_no_ == 1) {
      CheckFirstLine(text, &result);
      // Counted as every other line is (the check decoded it already; decode it again to count).
    }
    switch (internal::DecodeLine(decoder_, text, line_no_, file_, &result, summary_)) {
      case internal::LineKind::kEvent:
        sink_.Event(line_no_);
        break;
      case internal::LineKind::kUnknown:
        sink_.Unknown(decoder_.last_type(), line_no_);
        break;
      case internal::LineKind::kRejected:
        break;
    }
  }

  // Line 1 must be a cuflight event header: else the file is not a log (or one this version
  // cannot read).
  void CheckFirstLine(std::string_view text, schema::DecodeResult* result) {
    decoder_.Decode(text, result);
    if (result->header) return;
    if (result->reason == schema::Reason::kUnsupportedVersion) {
      throw NotALog{fmt::format("unsupported schema version (line 1: {}); this cuflight reads "
                                "version {}",
                                base::Clip(result->message, kMaxNoteMessageBytes),
                                schema::kSchemaVersion)};
    }
    if (LooksBinary(text)) throw NotALog{"not a cuflight log: binary data"};
    throw NotALog{fmt::format("not a cuflight log: line 1 is not a cuflight event: {}: {}",
                              schema::ReasonName(result->reason),
                              base::Clip(result->message, kMaxNoteMessageBytes))};
  }

  void Note(std::string note) {
    if (summary_->notes.size() < ReadSummary::kMaxNotes) {
      summary_->notes.push_back(std::move(note));
    } else {
      ++summary_->notes_left_out;
    }
  }

  const fs::path& file_;
  internal::LineSink& sink_;
  ReadSummary* summary_;
  internal::KernelLineCache decoder_;
  schema::DecodeResult first_;  // line 1 of a raw sink's file, decoded for the check
  std::string pending_;
  uint64_t line_no_ = 0;
  uint64_t bytes_ = 0;
};

ssize_t ReadSome(int fd, char* buf, size_t size) {
  for (;;) {
    const ssize_t n = ::read(fd, buf, size);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// ReadLogFile's sink: each event straight to the callback.
class CallbackSink final : public internal::LineSink {
 public:
  CallbackSink(const fs::path& file, const OnEvent& on_event, ReadSummary* summary)
      : file_(file), on_event_(on_event), summary_(summary) {}
  schema::DecodeResult* Slot() override { return &result_; }
  void Event(uint64_t line) override {
    if (const schema::OwnedEvent* event = expansion_.Deliver(&result_.event, file_, line,
                                                              summary_)) {
      on_event_(*event, Origin{&file_, line, expansion_.config()});
    }
  }
  void Unknown(std::string_view, uint64_t) override {}

 private:
  const fs::path& file_;
  const OnEvent& on_event_;
  ReadSummary* summary_;
  internal::Expansion expansion_;
  schema::DecodeResult result_;
};

}  // namespace

namespace internal {

bool ReadFileInto(const fs::path& file, LineSink& sink, ReadSummary* summary,
                  std::atomic<uint64_t>* bytes_read, std::string* error) {
  base::ScopedFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.Get() < 0) {
    *error = fmt::format("{}: cannot open: {}", file.native(), ErrnoText(errno));
    return false;
  }
  ++summary->files;
  std::string buf(kReadChunkBytes, '\0');
  ssize_t n = ReadSome(fd.Get(), buf.data(), buf.size());
  if (n < 0) {
    *error = fmt::format("{}: cannot read: {}", file.native(), ErrnoText(errno));
    return false;
  }
  LineSplitter splitter(file, sink, summary);
  try {
    if (IsZstdMagic(std::string_view(buf.data(), static_cast<size_t>(n)))) {
      ++summary->compressed_files;
      std::string zstd_error;
      if (!logstore::DecompressFile(
              file, [&](std::string_view chunk) { splitter.Feed(chunk); }, &zstd_error)) {
        *error = zstd_error;  // names the file
        return false;
      }
      struct stat st {};
      if (bytes_read != nullptr && ::fstat(fd.Get(), &st) == 0) {
        bytes_read->fetch_add(static_cast<uint64_t>(st.st_size), std::memory_order_relaxed);
      }
    } else {
      while (n > 0) {
        if (bytes_read != nullptr) {
          bytes_read->fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
        }
        splitter.Feed(std::string_view(buf.data(), static_cast<size_t>(n)));
        n = ReadSome(fd.Get(), buf.data(), buf.size());
      }
      if (n < 0) {
        *error = fmt::format("{}: cannot read: {}", file.native(), ErrnoText(errno));
        return false;
      }
    }
    splitter.Finish();
  } catch (const NotALog& e) {
    *error = fmt::format("{}: {}", file.native(), e.line);
    return false;
  }
  return true;
}

LineKind DecodeLine(KernelLineCache& decoder, std::string_view text, uint64_t line,
                    const fs::path& file, schema::DecodeResult* result, ReadSummary* summary) {
  decoder.Decode(text, result);
  if (result->ok()) {
    ++summary->events;
    return LineKind::kEvent;
  }
  if (result->reason == schema::Reason::kUnknownType) {
    ++summary->unknown_type_lines;
    return LineKind::kUnknown;
  }
  ++summary->rejected_lines;
  std::string note = fmt::format("rejected line {} in {}: {}: {}", line, file.native(),
                                 schema::ReasonName(result->reason),
                                 base::Clip(result->message, kMaxNoteMessageBytes));
  if (summary->notes.size() < ReadSummary::kMaxNotes) {
    summary->notes.push_back(std::move(note));
  } else {
    ++summary->notes_left_out;
  }
  return LineKind::kRejected;
}

void AddSummary(const ReadSummary& from, ReadSummary* to) {
  to->files += from.files;
  to->lines += from.lines;
  to->events += from.events;
  to->torn_lines += from.torn_lines;
  to->rejected_lines += from.rejected_lines;
  to->unknown_type_lines += from.unknown_type_lines;
  to->compressed_files += from.compressed_files;
  for (const std::string& note : from.notes) {
    if (to->notes.size() < ReadSummary::kMaxNotes) {
      to->notes.push_back(note);
    } else {
      ++to->notes_left_out;
    }
  }
  to->notes_left_out += from.notes_left_out;
}

const schema::OwnedEvent* Expansion::Deliver(schema::OwnedEvent* event, const fs::path& file,
                                             uint64_t line, ReadSummary* summary) {
  if (file_ != &file) {  // a new file: a new sequence
    configs_.Reset();
    kernels_.clear();
    known_.clear();
    file_ = &file;
  }
  config_ = 0;
  if (const auto* launch = std::get_if<schema::OwnedLaunchEvent>(event)) {
    const uint64_t id = launch->config;
    if (id < known_.size() && known_[id].kernel != nullptr) {
      // Its configuration's members are there since its first launch in the file (an id's
      // description never changes within the sequence): only the launch's are written.
      const Known& known = known_[id];
      schema::ExpandLaunch(*known.config, *launch, known.kernel);
      config_ = id;
      return known.kept;
    }
    if (const schema::OwnedKernelConfigEvent* config = configs_.Find(id)) {
      try {
        schema::OwnedEvent& kept = kernels_[id];
        auto* kernel = std::get_if<schema::OwnedKernelEvent>(&kept);
        if (kernel != nullptr) {
          schema::ExpandLaunch(*config, *launch, kernel);
        } else {
          kernel = &kept.emplace<schema::OwnedKernelEvent>();
          schema::Expand(*config, *launch, kernel);
        }
        if (id < kMaxKnownIds) {
          if (known_.size() <= id) known_.resize(id + 1);
          known_[id] = Known{config, kernel, &kept};
        }
        config_ = id;
        return &kept;
      } catch (const std::bad_alloc&) {
        kernels_.erase(id);  // expanded in place below, as ConfigExpander does
        if (id < known_.size()) known_[id] = Known{};
      }
    }
  }
  schema::ExpandVerdict verdict;
  try {
    verdict = configs_.Feed(event);
  } catch (const std::bad_alloc&) {
    verdict = schema::ExpandVerdict::kConfigFlood;
  }
  if (verdict == schema::ExpandVerdict::kPassed || verdict == schema::ExpandVerdict::kExpanded) {
    return event;
  }
  NotDelivered(*event, verdict, file, line, summary);
  return nullptr;
}

void Expansion::NotDelivered(const schema::OwnedEvent& event, schema::ExpandVerdict verdict,
                             const fs::path& file, uint64_t line, ReadSummary* summary) {
  if (summary->events > 0) --summary->events;  // a description, or refused: not an event
  if (verdict == schema::ExpandVerdict::kDescribed) return;
  ++summary->rejected_lines;
  const auto* launch = std::get_if<schema::OwnedLaunchEvent>(&event);
  const auto* config = std::get_if<schema::OwnedKernelConfigEvent>(&event);
  std::string note = fmt::format("rejected line {} in {}: {}: configuration {}", line,
                                 file.native(), schema::ExpandVerdictName(verdict),
                                 launch != nullptr ? launch->config
                                 : config != nullptr ? config->config
                                                     : 0);
  if (summary->notes.size() < ReadSummary::kMaxNotes) {
    summary->notes.push_back(std::move(note));
  } else {
    ++summary->notes_left_out;
  }
}

}  // namespace internal

bool ReadLogFile(const fs::path& file, const OnEvent& on_event, ReadSummary* summary,
                 std::string* error) {
  CallbackSink sink(file, on_event, summary);
  return internal::ReadFileInto(file, sink, summary, nullptr, error);
}

}  // namespace cuflight::logread
