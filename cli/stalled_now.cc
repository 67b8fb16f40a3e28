#include "stalled_now.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <system_error>

#include "cuflight/schema/decoder.h"

namespace cuflight::cli {
namespace {

bool IsPlainLog(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return name.size() > 6 && name.ends_with(".jsonl");
}

// The last `n` bytes of the file at `path` (fewer when it is shorter); empty when unreadable.
std::string ReadTail(const std::filesystem::path& path, size_t n) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    const auto size = static_cast<uint64_t>(st.st_size);
    const uint64_t from = size > n ? size - n : 0;
    out.resize(size - from);
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t r =
          pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(from + got));
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    out.resize(got);
    if (from > 0) {  // the first line is cut: start after it
      const size_t nl = out.find('\n');
      out.erase(0, nl == std::string::npos ? out.size() : nl + 1);
    }
  }
  close(fd);
  return out;
}

bool EndsOrStalls(std::string_view line) {
  for (std::string_view type :
       {"\"stall\"", "\"process_end\"", "\"process_lost\"", "\"process_crash\""}) {
    const size_t at = line.find(type);
    if (at != std::string_view::npos && line.substr(0, at).ends_with("\"type\":")) return true;
  }
  return false;
}

}  // namespace

std::vector<StalledProcess> FindStalledNow(const std::filesystem::path& dir, size_t tail_bytes) {
  std::vector<StalledProcess> out;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir, ec);
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec) || !IsPlainLog(it->path())) continue;
    const std::string text = ReadTail(it->path(), tail_bytes);
    // The latest relevant event by seq: a stall (kept when stalled) or an ending.
    uint64_t latest_seq = 0;
    bool any = false;
    bool stalled = false;
    StalledProcess found;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) break;  // a partial last line
      const std::string_view line(text.data() + pos, nl - pos);
      pos = nl + 1;
      if (!EndsOrStalls(line)) continue;
      schema::DecodeResult d = schema::Decode(line);
      if (!d.ok() || !d.header || (any && d.header->seq < latest_seq)) continue;
      any = true;
      latest_seq = d.header->seq;
      auto* stall = std::get_if<schema::OwnedStallEvent>(&d.event);
      stalled = stall != nullptr && stall->state == schema::StallState::kStalled;
      if (stalled) {
        found.line.assign(line);
        found.event = std::move(*stall);
      }
    }
    if (!stalled) continue;
    found.file = it->path();
    out.push_back(std::move(found));
  }
  std::stable_sort(out.begin(), out.end(), [](const StalledProcess& a, const StalledProcess& b) {
    return a.event.stalled_ms > b.event.stalled_ms;
  });
  return out;
}

}  // namespace cuflight::cli
