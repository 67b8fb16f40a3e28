#include "cursor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

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
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return true;
    *error = Errno("cannot read the cursor", file, errno);
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  const auto bad = [&](std::string_view why) {
    *error = "the cursor " + file.string() + " is not an exporter cursor: " + std::string(why) +
             " (remove it to export every log from its start)";
    return false;
  };
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  if (!doc.contains("version") || doc["version"] != kCursorVersion) return bad("version is not 1");
  if (!doc.contains("streams") || !doc["streams"].is_object()) return bad("no \"streams\" object");
  for (const auto& [key, value] : doc["streams"].items()) {
    if (!value.is_object() || !value.contains("segment") || !value.contains("offset") ||
        !value["segment"].is_number_unsigned() || !value["offset"].is_number_unsigned() ||
        value["segment"].get<uint64_t>() == 0) {
      return bad("stream \"" + key + "\" has no valid segment and offset");
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
  base::ScopedFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                           0600));
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
