// ReadLogFiles: many log files decoded on worker threads, delivered in file order on the caller's.
//
// 1. Workers take files in order (an atomic index), decode each into chunks of kChunkEvents
//    events and queue the chunks on that file's queue, at most kChunksPerFile deep: a worker
//    whose queue is full waits. The caller drains the queues file by file.
// 2. No deadlock: the file the caller waits for is the lowest one not yet delivered; workers take
//    files in increasing order, so it has been taken, and its worker only waits on its own queue,
//    which the caller drains.
// 3. Chunks go back to a pool once delivered, so their events' storage (strings included) is
//    reused and the memory held is bounded by the chunks in flight.
// 4. The caller's exception, or a failed file, sets `stop`; workers then finish at their next
//    queue operation and are joined before ReadLogFiles returns or rethrows.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
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

struct Chunk {
  std::vector<Item> items;
  size_t size = 0;
  // The file's last chunk: its summary, and whether it failed (with the error).
  bool last = false;
  bool failed = false;
  std::string error;
  ReadSummary summary;
};

class Pipeline {
 public:
  explicit Pipeline(const std::vector<fs::path>& files) : files_(files), queues_(files.size()) {}

  ~Pipeline() { Stop(); }

  void Start(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }

  // The next chunk of file `index`, waiting for it; back to Recycle() once delivered.
  std::unique_ptr<Chunk> Next(size_t index) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !queues_[index].empty(); });
    std::unique_ptr<Chunk> chunk = std::move(queues_[index].front());
    queues_[index].pop_front();
    cv_.notify_all();  // room on this file's queue
    return chunk;
  }

  void Recycle(std::unique_ptr<Chunk> chunk) {
    chunk->size = 0;
    chunk->last = false;
    chunk->failed = false;
    chunk->error.clear();
    chunk->summary = ReadSummary{};
    std::lock_guard lock(mu_);
    pool_.push_back(std::move(chunk));
  }

  // Stops the workers (they finish at their next queue operation) and joins them.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }

 private:
  // Decodes one file into chunks on its queue.
  class ChunkSink final : public internal::LineSink {
   public:
    ChunkSink(Pipeline& p, size_t index) : p_(p), index_(index), chunk_(p.Take()) {}

    schema::DecodeResult* Slot() override {
      if (chunk_->size == chunk_->items.size()) chunk_->items.emplace_back();
      return &chunk_->items[chunk_->size].result;
    }
    void Event(uint64_t line) override { Commit(line, false, {}); }
    void Unknown(std::string_view type, uint64_t line) override { Commit(line, true, type); }

    // Queues the last chunk of the file. False when the pipeline stopped.
    bool Finish(bool ok, std::string error, ReadSummary summary) {
      chunk_->last = true;
      chunk_->failed = !ok;
      chunk_->error = std::move(error);
      chunk_->summary = std::move(summary);
      return p_.Put(index_, std::move(chunk_));
    }

   private:
    void Commit(uint64_t line, bool unknown, std::string_view type) {
      Item& item = chunk_->items[chunk_->size++];
      item.line = line;
      item.unknown = unknown;
      item.unknown_type.assign(type.data(), type.size());
      if (chunk_->size == ReadOptions::kChunkEvents) {
        if (!p_.Put(index_, std::move(chunk_))) throw Stopped{};
        chunk_ = p_.Take();
      }
    }

    Pipeline& p_;
    size_t index_;
    std::unique_ptr<Chunk> chunk_;
  };

  struct Stopped {};

  std::unique_ptr<Chunk> Take() {
    {
      std::lock_guard lock(mu_);
      if (!pool_.empty()) {
        std::unique_ptr<Chunk> chunk = std::move(pool_.back());
        pool_.pop_back();
        return chunk;
      }
    }
    auto chunk = std::make_unique<Chunk>();
    chunk->items.reserve(ReadOptions::kChunkEvents);
    return chunk;
  }

  // Queues `chunk` on file `index`'s queue, waiting for room. False when stopped.
  bool Put(size_t index, std::unique_ptr<Chunk> chunk) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stop_ || queues_[index].size() < ReadOptions::kChunksPerFile; });
    if (stop_) return false;
    queues_[index].push_back(std::move(chunk));
    cv_.notify_all();
    return true;
  }

  void Work() {
    for (;;) {
      const size_t index = next_file_.fetch_add(1);
      if (index >= files_.size()) return;
      {
        std::lock_guard lock(mu_);
        if (stop_) return;
      }
      ReadSummary summary;
      std::string error;
      bool ok = false;
      try {
        ChunkSink sink(*this, index);
        ok = internal::ReadFileInto(files_[index], sink, &summary, &bytes_read_, &error);
        if (!sink.Finish(ok, std::move(error), std::move(summary))) return;
      } catch (const Stopped&) {
        return;
      } catch (const std::exception& e) {  // std::bad_alloc: the file fails, the caller says so
        auto chunk = Take();
        chunk->last = true;
        chunk->failed = true;
        chunk->error = files_[index].native() + ": " + e.what();
        if (!Put(index, std::move(chunk))) return;
      }
    }
  }

  const std::vector<fs::path>& files_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<std::unique_ptr<Chunk>>> queues_;
  std::vector<std::unique_ptr<Chunk>> pool_;
  bool stop_ = false;
  std::atomic<size_t> next_file_{0};
  std::atomic<uint64_t> bytes_read_{0};
  std::vector<std::thread> workers_;
};

// Sequential reading on the calling thread (no worker thread).
class DirectSink final : public internal::LineSink {
 public:
  DirectSink(const fs::path& file, const OnEvent& on_event, const OnUnknownEvent& on_unknown,
             uint64_t* events)
      : file_(file), on_event_(on_event), on_unknown_(on_unknown), events_(events) {}
  schema::DecodeResult* Slot() override { return &result_; }
  void Event(uint64_t line) override {
    ++*events_;
    on_event_(result_.event, Origin{&file_, line});
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
  schema::DecodeResult result_;
};

uint64_t FileSize(const fs::path& file) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  return ec ? 0 : static_cast<uint64_t>(size);
}

unsigned WorkerThreads(const ReadOptions& options, size_t files) {
  if (options.sequential || files == 0) return 0;
  if (options.threads > 0) return static_cast<unsigned>(std::min<size_t>(options.threads, files));
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores <= 1) return 0;
  return static_cast<unsigned>(std::min<size_t>(cores, files));
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
    for (const fs::path& file : files) {
      DirectSink sink(file, on_event, options.on_unknown, &progress.events);
      if (!internal::ReadFileInto(file, sink, summary, &bytes_read, error)) return false;
      ++progress.files_done;
      report(false, bytes_read.load());
    }
    report(true, bytes_read.load());
    return true;
  }

  Pipeline pipeline(files);
  pipeline.Start(threads);
  for (size_t i = 0; i < files.size(); ++i) {
    for (;;) {
      std::unique_ptr<Chunk> chunk = pipeline.Next(i);
      for (size_t k = 0; k < chunk->size; ++k) {
        const Item& item = chunk->items[k];
        const Origin origin{&files[i], item.line};
        if (!item.unknown) {
          ++progress.events;
          on_event(item.result.event, origin);
        } else if (options.on_unknown && item.result.header) {
          options.on_unknown(UnknownEvent{item.unknown_type, *item.result.header}, origin);
        }
      }
      const bool last = chunk->last;
      if (last) {
        internal::AddSummary(chunk->summary, summary);
        if (chunk->failed) {
          *error = chunk->error;
          pipeline.Stop();
          return false;
        }
      }
      pipeline.Recycle(std::move(chunk));
      report(false, pipeline.bytes_read());
      if (last) break;
    }
    ++progress.files_done;
  }
  pipeline.Stop();
  report(true, pipeline.bytes_read());
  return true;
}

}  // namespace cuflight::logread
