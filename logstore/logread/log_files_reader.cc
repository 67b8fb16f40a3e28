// ReadLogFiles: log files split into lines on one thread, the lines decoded on worker threads,
// the events delivered in file and line order on the caller's.
//
// 1. The reader thread reads the files in order (zstd decompressed), checks each is a log, splits
//    it into lines and packs them into batches of kBatchLines lines, each with a sequence number.
//    A file's end (its torn last line, or why it is not a log) is a batch of its own.
// 2. Decoder threads take batches in any order and decode their lines into the batch's events
//    (schema::LineDecoder, behind a KernelLineCache each), counting events, unknown and rejected
//    lines in the batch's summary.
// 3. The caller takes batches in sequence order as they are decoded, delivers their events and
//    adds their summaries: the same calls and the same summary as reading file by file.
// 4. At most kMaxBatches batches exist; the reader waits for one to come back. So memory is
//    bounded (batches of text and decoded events) whatever the size of the logs, and one large
//    file is decoded in parallel as well as many small ones.
// 5. The caller's exception, or a failed file, stops the threads (they finish at their next wait)
//    and joins them before ReadLogFiles returns or rethrows.
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "file_reader.h"

namespace cuflight::logread {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Item {
  schema::DecodeResult result;
  uint64_t line = 0;
  bool unknown = false;
  std::string unknown_type;
};

constexpr size_t kBatchLines = ReadOptions::kChunkEvents;

struct Batch {
  size_t file = 0;
  // Lines as read: text[ends[i-1], ends[i]) is line first_line + i.
  std::string text;
  std::vector<size_t> ends;
  uint64_t first_line = 0;
  // Decoded: events and unknown-type lines, in line order.
  std::vector<Item> items;
  size_t size = 0;
  ReadSummary summary;  // decoded lines' counts and notes; for a file's end, the reader's
  bool file_end = false;
  bool failed = false;
  std::string error;
  bool decoded = false;

  void Reset() {
    text.clear();
    ends.clear();
    size = 0;
    summary = ReadSummary{};
    file_end = false;
    failed = false;
    error.clear();
    decoded = false;
  }
};

class Pipeline {
 public:
  Pipeline(const std::vector<fs::path>& files, unsigned decoders)
      : files_(files), max_batches_(2 * static_cast<size_t>(decoders) + 4) {
    reader_ = std::thread([this] { Read(); });
    for (unsigned i = 0; i < decoders; ++i) decoders_.emplace_back([this] { Decode(); });
  }

  ~Pipeline() { Stop(); }

  // The next batch in sequence order once decoded; nullptr after the last file's end.
  Batch* Next() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return (!order_.empty() && order_.front()->decoded) ||
                                (order_.empty() && reader_done_); });
    if (order_.empty()) return nullptr;
    Batch* b = order_.front();
    order_.pop_front();
    return b;
  }

  void Recycle(Batch* b) {
    b->Reset();
    {
      std::lock_guard lock(mu_);
      free_.push_back(b);
    }
    cv_.notify_all();
  }

  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (reader_.joinable()) reader_.join();
    for (std::thread& t : decoders_) t.join();
    decoders_.clear();
  }

  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }

 private:
  struct Stopped {};

  // The reader's sink: raw lines packed into batches.
  class BatchSink final : public internal::LineSink {
   public:
    BatchSink(Pipeline& p, size_t file) : p_(p), file_(file) {}
    schema::DecodeResult* Slot() override { return nullptr; }  // raw: never asked
    void Event(uint64_t) override {}
    void Unknown(std::string_view, uint64_t) override {}
    bool raw() const override { return true; }
    void RawLine(std::string_view text, uint64_t line) override {
      if (batch_ == nullptr) {
        batch_ = p_.Take();
        batch_->file = file_;
        batch_->first_line = line;
      }
      batch_->text.append(text.data(), text.size());
      batch_->ends.push_back(batch_->text.size());
      if (batch_->ends.size() == kBatchLines) Flush();
    }
    // Submits the batch being filled, if any.
    void Flush() {
      if (batch_ == nullptr) return;
      p_.Submit(batch_, true);
      batch_ = nullptr;
    }

   private:
    Pipeline& p_;
    size_t file_;
    Batch* batch_ = nullptr;
  };

  // A free batch, waiting for one while all are in flight. Throws Stopped when stopped.
  Batch* Take() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stop_ || !free_.empty() || owned_.size() < max_batches_; });
    if (stop_) throw Stopped{};
    if (!free_.empty()) {
      Batch* b = free_.back();
      free_.pop_back();
      return b;
    }
    owned_.push_back(std::make_unique<Batch>());
    owned_.back()->items.reserve(kBatchLines);
    return owned_.back().get();
  }

  // Puts `b` in sequence order, and on the decoders' queue when it has lines to decode.
  void Submit(Batch* b, bool decode) {
    {
      std::lock_guard lock(mu_);
      if (stop_) throw Stopped{};
      order_.push_back(b);
      if (decode) {
        to_decode_.push_back(b);
      } else {
        b->decoded = true;
      }
    }
    cv_.notify_all();
  }

  void Read() {
    try {
      for (size_t i = 0; i < files_.size(); ++i) {
        BatchSink sink(*this, i);
        ReadSummary summary;
        std::string error;
        bool ok;
        try {
          ok = internal::ReadFileInto(files_[i], sink, &summary, &bytes_read_, &error);
        } catch (const Stopped&) {
          throw;
        } catch (const std::exception& e) {  // std::bad_alloc: the file fails, the caller says so
          ok = false;
          error = files_[i].native() + ": " + e.what();
        }
        sink.Flush();  // the lines read before an error are delivered before it
        Batch* end = Take();
        end->file = i;
        end->file_end = true;
        end->failed = !ok;
        end->error = std::move(error);
        end->summary = std::move(summary);
        Submit(end, false);
        if (!ok) break;  // the caller stops at this file
      }
    } catch (const Stopped&) {
    }
    {
      std::lock_guard lock(mu_);
      reader_done_ = true;
    }
    cv_.notify_all();
  }

  void Decode() {
    internal::KernelLineCache decoder;
    for (;;) {
      Batch* b;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !to_decode_.empty(); });
        if (stop_) return;
        b = to_decode_.front();
        to_decode_.pop_front();
      }
      const fs::path& file = files_[b->file];
      size_t begin = 0;
      for (size_t i = 0; i < b->ends.size(); ++i) {
        const std::string_view text(b->text.data() + begin, b->ends[i] - begin);
        begin = b->ends[i];
        const uint64_t line = b->first_line + i;
        if (b->size == b->items.size()) b->items.emplace_back();
        Item& item = b->items[b->size];
        const internal::LineKind kind =
            internal::DecodeLine(decoder, text, line, file, &item.result, &b->summary);
        if (kind == internal::LineKind::kRejected) continue;
        item.line = line;
        item.unknown = kind == internal::LineKind::kUnknown;
        if (item.unknown) {
          item.unknown_type.assign(decoder.last_type());
        }
        ++b->size;
      }
      {
        std::lock_guard lock(mu_);
        b->decoded = true;
      }
      cv_.notify_all();
    }
  }

  const std::vector<fs::path>& files_;
  const size_t max_batches_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Batch>> owned_;
  std::vector<Batch*> free_;
  std::deque<Batch*> order_;      // submitted, in sequence order
  std::deque<Batch*> to_decode_;  // submitted, not yet taken by a decoder
  bool stop_ = false;
  bool reader_done_ = false;
  std::atomic<uint64_t> bytes_read_{0};
  std::thread reader_;
  std::vector<std::thread> decoders_;
};

// Sequential reading on the calling thread (no worker thread). Every kTickEvents events it calls
// `tick`, so that progress is said within a large file too.
class DirectSink final : public internal::LineSink {
 public:
  static constexpr uint64_t kTickEvents = ReadOptions::kChunkEvents;

  DirectSink(const fs::path& file, const OnEvent& on_event, const OnUnknownEvent& on_unknown,
             uint64_t* events, const std::function<void()>& tick, ReadSummary* summary)
      : file_(file),
        on_event_(on_event),
        on_unknown_(on_unknown),
        events_(events),
        tick_(tick),
        summary_(summary) {}
  schema::DecodeResult* Slot() override { return &result_; }
  void Event(uint64_t line) override {
    const schema::OwnedEvent* event = expansion_.Deliver(&result_.event, file_, line, summary_);
    if (event == nullptr) return;
    ++*events_;
    on_event_(*event, Origin{&file_, line, expansion_.config()});
    if (*events_ % kTickEvents == 0) tick_();
  }
  void Unknown(std::string_view type, uint64_t line) override {
    if (on_unknown_ && result_.header) {
      on_unknown_(UnknownEvent{type, *result_.header}, Origin{&file_, line});
    }
  }

 private:
  const fs::path& file_;
  const OnEvent& on_event_;
  const OnUnknownEvent& on_unknown_;
  uint64_t* events_;
  const std::function<void()>& tick_;
  ReadSummary* summary_;
  internal::Expansion expansion_;
  schema::DecodeResult result_;
};

uint64_t FileSize(const fs::path& file) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  return ec ? 0 : static_cast<uint64_t>(size);
}

// The cores this process may run on: its affinity mask (taskset, a container's cpuset), which
// std::thread::hardware_concurrency ignores; that count when the mask cannot be read.
unsigned UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  return std::thread::hardware_concurrency();
}

// Decoder threads: as asked, else one per usable core but one (the calling thread's, which uses
// the events: on two cores one decoder reads a million-launch log faster than two); none
// (everything on the calling thread) on one core, where threads would only add copies and
// switches, or when asked to read sequentially.
unsigned WorkerThreads(const ReadOptions& options, size_t files) {
  if (options.sequential || files == 0) return 0;
  if (options.threads > 0) return options.threads;
  const unsigned cores = UsableCores();
  return cores <= 1 ? 0 : cores - 1;
}

}  // namespace

bool ReadLogFiles(const std::vector<fs::path>& files, const OnEvent& on_event,
                  const ReadOptions& options, ReadSummary* summary, std::string* error) {
  const Clock::time_point start = Clock::now();
  ReadProgress progress;
  progress.files = files.size();
  for (const fs::path& file : files) progress.bytes += FileSize(file);
  Clock::time_point last_report = start;
  auto report = [&](bool final_report, uint64_t bytes_read) {
    if (!options.on_progress) return;
    const Clock::time_point now = Clock::now();
    if (!final_report &&
        std::chrono::duration<double>(now - last_report).count() < options.progress_interval_s) {
      return;
    }
    last_report = now;
    progress.bytes_read = std::min(bytes_read, progress.bytes);
    progress.seconds = std::chrono::duration<double>(now - start).count();
    options.on_progress(progress);
  };

  const unsigned threads = WorkerThreads(options, files.size());
  if (threads == 0) {
    std::atomic<uint64_t> bytes_read{0};
    const std::function<void()> tick = [&] { report(false, bytes_read.load()); };
    for (const fs::path& file : files) {
      DirectSink sink(file, on_event, options.on_unknown, &progress.events, tick, summary);
      if (!internal::ReadFileInto(file, sink, summary, &bytes_read, error)) return false;
      ++progress.files_done;
      report(false, bytes_read.load());
    }
    report(true, bytes_read.load());
    return true;
  }

  Pipeline pipeline(files, threads);
  internal::Expansion expansion;
  for (;;) {
    Batch* b = pipeline.Next();
    if (b == nullptr) break;
    const fs::path& file = files[b->file];
    for (size_t k = 0; k < b->size; ++k) {
      Item& item = b->items[k];
      Origin origin{&file, item.line};
      if (!item.unknown) {
        const schema::OwnedEvent* event =
            expansion.Deliver(&item.result.event, file, item.line, &b->summary);
        if (event == nullptr) continue;
        ++progress.events;
        origin.config = expansion.config();
        on_event(*event, origin);
      } else if (options.on_unknown && item.result.header) {
        options.on_unknown(UnknownEvent{item.unknown_type, *item.result.header}, origin);
      }
    }
    internal::AddSummary(b->summary, summary);
    if (b->file_end) {
      if (b->failed) {
        *error = b->error;
        pipeline.Stop();
        return false;
      }
      ++progress.files_done;
    }
    pipeline.Recycle(b);
    report(false, pipeline.bytes_read());
  }
  pipeline.Stop();
  report(true, pipeline.bytes_read());
  return true;
}

}  // namespace cuflight::logread
