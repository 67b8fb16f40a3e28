// Temporary files for tests: a directory removed with its contents, and unique socket paths.
#ifndef CUFLIGHT_TESTS_SUPPORT_TEMP_DIR_H_
#define CUFLIGHT_TESTS_SUPPORT_TEMP_DIR_H_

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace cuflight::test_support {

// A fresh directory (mode 0700) under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Copies of files that a test runs or loads as another uid (setpriv), in a directory of their own
// under /tmp that every user may enter and read (0755): the build tree may sit under a directory
// only its owner can enter (a clone in a 0700 home), where the other uid's exec and dlopen get
// "Permission denied". Removed with the object.
class ReadableCopies {
 public:
  explicit ReadableCopies(const std::vector<std::string>& files);
  ~ReadableCopies();
  ReadableCopies(const ReadableCopies&) = delete;
  ReadableCopies& operator=(const ReadableCopies&) = delete;
  // The copy of `file`, named as the constructor was given it ("" and a test failure if none).
  std::string Of(const std::string& file) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::pair<std::string, std::string>> copies_;
};

// A copy of `file` that another uid may run or load (as ReadableCopies makes them), made on the
// first call for that file and kept until the process exits. For a program a test starts as
// another user (setpriv) from many places.
std::string SharedReadableCopy(const std::string& file);

// A socket path no other test of this process uses: <dir>/<tag>-<n>.sock, where <dir> is one
// directory per process made with mkdtemp under $TMPDIR (or /tmp), so mode 0700 and owned by
// this user, as the collector and the producers require of a socket's directory
// (collector/daemon/listen_sockets.cc); removed when the process that made it exits. Keep `tag`
// short: a Unix socket path holds at most 107 bytes.
std::string TempSocketPath(const std::string& tag);

}  // namespace cuflight::test_support

#endif  // CUFLIGHT_TESTS_SUPPORT_TEMP_DIR_H_
