#include "cursor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "cuflight/base/clip.h"
#include "cuflight/base/scoped_fd.h"
#include "segment_file.h"

namespace cuflight::exporter {
namespace {

constexpr int kCursorVersion = 1;

std::string Errno(std::string_view what, const std::filesystem::path& file, int err) {
  return std::string(what) + " " + file.string() + ": " + std::strerror(err);
}

}  // namespace

bool LoadCursor(const std::filesystem::path& file, Cursor* cursor, std::string* error) {
  cursor->clear();
  // Never a symbolic link (SaveCursor replaces one with a file: reading through it would read
  // what another name holds), never a FIFO or device (O_NONBLOCK: the open cannot wait on one;
  // then only a regular file is read), only the collector's own file, at most kMaxCursorBytes.
  base::ScopedFd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.Get() < 0) {
    if (errno == ENOENT) return true;
    if (errno == ELOOP) {
      *error = "the cursor " + file.string() +
               " is a symbolic link: not followed (give --otlp-cursor the file itself)";
      return false;
    }
    *error = Errno("cannot read the cursor", file, errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0) {
    *error = Errno("cannot read the cursor", file, errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "the cursor " + file.string() + " is not a regular file";
    return false;
  }
  if (st.st_uid != ::geteuid()) {
    *error = "the cursor " + file.string() + " is owned by uid " + std::to_string(st.st_uid) +
             ", not by the collector's (" + std::to_string(::geteuid()) + ")";
    return false;
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    *error = "the cursor " + file.string() + " is writable by every user";
    return false;
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxCursorBytes) {
    *error = "the cursor " + file.string() + " is " + std::to_string(st.st_size) +
             " bytes, more than a cursor's " + std::to_string(kMaxCursorBytes) +
             " (remove it to export every log from its start)";
    return false;
  }
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {  // one byte more than its size: a file that grew is refused too
    const ssize_t n = ::read(fd.Get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = Errno("cannot read the cursor", file, errno);
      return false;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  const auto bad = [&](std::string_view why) {
    *error = "the cursor " + file.string() + " is not an exporter cursor: " + std::string(why) +
             " (remove it to export every log from its start)";
    return false;
  };
  if (got > static_cast<uint64_t>(st.st_size)) return bad("it grew while it was read");
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  if (!doc.contains("version") || doc["version"] != kCursorVersion) return bad("version is not 1");
  if (!doc.contains("streams") || !doc["streams"].is_object()) return bad("no \"streams\" object");
  for (const auto& [key, value] : doc["streams"].items()) {
    if (!value.is_object() || !value.contains("segment") || !value.contains("offset") ||
        !value["segment"].is_number_unsigned() || !value["offset"].is_number_unsigned() ||
        value["segment"].get<uint64_t>() == 0 ||
        (value.contains("finished") && !value["finished"].is_boolean())) {
      // The key as JSON writes it in ASCII (its control characters escaped), cut for the line.
      return bad("stream " + base::Clip(nlohmann::json(key).dump(-1, ' ', true), 80) +
                 " has no valid segment and offset");
    }
    CursorEntry entry;
    entry.position = {value["segment"].get<uint64_t>(), value["offset"].get<uint64_t>()};
    entry.finished = value.value("finished", false);
    (*cursor)[key] = entry;
  }
  return true;
}

bool SaveCursor(const std::filesystem::path& file, const Cursor& cursor, std::string* error) {
  nlohmann::json streams = nlohmann::json::object();
  for (const auto& [key, entry] : cursor) {
    nlohmann::json e = {{"segment", entry.position.segment}, {"offset", entry.position.offset}};
    if (entry.finished) e["finished"] = true;
    streams[key] = std::move(e);
  }
  const std::string text =
      nlohmann::json{{"version", kCursorVersion}, {"streams", std::move(streams)}}.dump() + "\n";
  const std::filesystem::path tmp = file.string() + ".tmp";
  // A new file of its own: whatever is at the temporary name (one a crash left, a symbolic link,
  // a FIFO) is removed first, never written through.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    *error = Errno("cannot remove the cursor's temporary file", tmp, errno);
    return false;
  }
  base::ScopedFd fd(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.Get() < 0) {
    *error = Errno("cannot write the cursor", tmp, errno);
    return false;
  }
  int err = 0;
  if (logstore::WriteFully(fd.Get(), text.data(), text.size(), &err) != text.size()) {
    *error = Errno("cannot write the cursor", tmp, err);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::fsync(fd.Get()) != 0) {
    *error = Errno("cannot fsync the cursor", tmp, errno);
    ::unlink(tmp.c_str());
    return false;
  }
  if (!fd.Close()) {
    *error = Errno("cannot write the cursor", tmp, errno);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    *error = Errno("cannot replace the cursor", file, errno);
    ::unlink(tmp.c_str());
    return false;
  }
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
  if (!logstore::FsyncDirectory(dir)) {
    *error = Errno("cannot fsync the directory of the cursor", dir, errno);
    return false;
  }
  return true;
}

}  // namespace cuflight::exporter
