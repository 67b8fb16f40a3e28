// The listening sockets: directory and file ownership rules, modes, stale versus live sockets,
// and TCP restricted to loopback.
#include "listen_sockets.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "collector_test_util.h"

namespace cuflight::collector {
namespace {

using testing::RawClient;
using testing::TempDir;

constexpr uid_t kOtherUid = 65534;  // nobody

mode_t ModeOf(const std::filesystem::path& p) {
  struct stat st {};
  EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// A socket file at `path` that nobody listens on, as a collector killed with -9 leaves it.
void MakeStaleSocket(const std::filesystem::path& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
}

TEST(ListenSocketsTest, CreatesAnOwnerOnlyDirectoryAndA0660Socket) {
  TempDir dir;
  const auto path = dir.path() / "a" / "b" / "collector.sock";
  ListenError error;
  UnixListener listener = UnixListener::Open(path, &error);
  ASSERT_GE(listener.fd(), 0) << error.line;
  EXPECT_EQ(ModeOf(dir.path() / "a" / "b"), 0700u);
  EXPECT_EQ(ModeOf(path), 0660u);
  EXPECT_TRUE(RawClient::Unix(path).connected());
  listener.Close();
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path)));
}

TEST(ListenSocketsTest, RefusesADirectoryOthersCanWrite) {
  TempDir dir;
  const auto sub = dir.path() / "shared";
  std::filesystem::create_directory(sub);
  chmod(sub.c_str(), 0777);
  ListenError error;
  UnixListener listener = UnixListener::Open(sub / "c.sock", &error);
  EXPECT_LT(listener.fd(), 0);
  EXPECT_TRUE(error.bad_value);
  EXPECT_NE(
      error.line.find("--socket: directory " + sub.string() + " is writable by group or others"),
      std::string::npos)
      << error.line;
  EXPECT_FALSE(std::filesystem::exists(sub / "c.sock"));
}

TEST(ListenSocketsTest, RefusesADirectoryOwnedBySomeoneElse) {
  TempDir dir;
  std::filesystem::path other_dir;
  if (geteuid() == 0) {
    other_dir = dir.path() / "theirs";
    std::filesystem::create_directory(other_dir);
    chmod(other_dir.c_str(), 0755);
    ASSERT_EQ(chown(other_dir.c_str(), kOtherUid, kOtherUid), 0);
  } else {
    other_dir = "/usr";  // root's
  }
  ListenError error;
  UnixListener listener = UnixListener::Open(other_dir / "c.sock", &error);
  EXPECT_LT(listener.fd(), 0);
  EXPECT_TRUE(error.bad_value);
  EXPECT_NE(error.line.find("is owned by uid"), std::string::npos) << error.line;
}

TEST(ListenSocketsTest, RefusesASymlinkedDirectory) {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "real");
  std::filesystem::create_directory_symlink(dir.path() / "real", dir.path() / "link");
  ListenError error;
  UnixListener listener = UnixListener::Open(dir.path() / "link" / "c.sock", &error);
  EXPECT_LT(listener.fd(), 0);
  EXPECT_NE(error.line.find("is not a directory"), std::string::npos) << error.line;
}

TEST(ListenSocketsTest, RefusesAFileThatIsNotASocketAndLeavesIt) {
  TempDir dir;
  const auto path = dir.path() / "c.sock";
  std::ofstream(path) << "precious";
  ListenError error;
  UnixListener listener = UnixListener::Open(path, &error);
  EXPECT_LT(listener.fd(), 0);
  EXPECT_TRUE(error.bad_value);
  EXPECT_NE(error.line.find("exists and is not a socket"), std::string::npos) << error.line;
  std::ifstream in(path);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "precious");
}

TEST(ListenSocketsTest, RefusesASocketOwnedBySomeoneElse) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a socket owned by another user";
  TempDir dir;
  const auto path = dir.path() / "c.sock";
  MakeStaleSocket(path);
  ASSERT_EQ(lchown(path.c_str(), kOtherUid, kOtherUid), 0);
  ListenError error;
  UnixListener listener = UnixListener::Open(path, &error);
  EXPECT_LT(listener.fd(), 0);
  EXPECT_TRUE(error.bad_value);
  EXPECT_NE(error.line.find("is owned by uid 65534, not by this user"), std::string::npos)
      << error.line;
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::symlink_status(path)));
}

TEST(ListenSocketsTest, RemovesAStaleSocket) {
  TempDir dir;
  const auto path = dir.path() / "c.sock";
  MakeStaleSocket(path);
  ASSERT_FALSE(RawClient::Unix(path).connected());
  ListenError error;
  UnixListener listener = UnixListener::Open(path, &error);
  ASSERT_GE(listener.fd(), 0) << error.line;
  EXPECT_TRUE(RawClient::Unix(path).connected());
}

TEST(ListenSocketsTest, NeverRemovesALiveSocket) {
  TempDir dir;
  const auto path = dir.path() / "c.sock";
  ListenError error;
  UnixListener first = UnixListener::Open(path, &error);
  ASSERT_GE(first.fd(), 0) << error.line;
  UnixListener second = UnixListener::Open(path, &error);
  EXPECT_LT(second.fd(), 0);
  EXPECT_FALSE(error.bad_value);
  EXPECT_NE(error.line.find("another collector is listening on " + path.string()),
            std::string::npos)
      << error.line;
  // The first listener still owns the path and accepts.
  RawClient client = RawClient::Unix(path);
  ASSERT_TRUE(client.connected());
  const int accepted = accept4(first.fd(), nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_GE(accepted, 0);
  if (accepted >= 0) close(accepted);
}

TEST(ListenSocketsTest, CloseLeavesAFileThatReplacedTheSocket) {
  TempDir dir;
  const auto path = dir.path() / "c.sock";
  ListenError error;
  UnixListener listener = UnixListener::Open(path, &error);
  ASSERT_GE(listener.fd(), 0) << error.line;
  std::filesystem::remove(path);
  MakeStaleSocket(path);  // a different inode now
  listener.Close();
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::symlink_status(path)));
}

TEST(ListenSocketsTest, TcpListensOnLoopbackWithAnEphemeralPort) {
  ListenError error;
  TcpListener listener = TcpListener::Open(HostPort{"127.0.0.1", 0}, false, "--tcp", &error);
  ASSERT_GE(listener.fd(), 0) << error.line;
  EXPECT_GT(listener.port(), 0);
  EXPECT_TRUE(RawClient::Tcp(listener.port()).connected());
  TcpListener by_name = TcpListener::Open(HostPort{"localhost", 0}, false, "--tcp", &error);
  EXPECT_GE(by_name.fd(), 0) << error.line;
}

TEST(ListenSocketsTest, TcpRefusesANonLoopbackAddressUnlessAllowed) {
  ListenError error;
  TcpListener refused = TcpListener::Open(HostPort{"0.0.0.0", 0}, false, "--tcp", &error);
  EXPECT_LT(refused.fd(), 0);
  EXPECT_TRUE(error.bad_value);
  EXPECT_EQ(error.line,
            "--tcp: 0.0.0.0 is not a loopback address; add --tcp-allow-remote to accept "
            "producers on it");
  TcpListener allowed = TcpListener::Open(HostPort{"0.0.0.0", 0}, true, "--tcp", &error);
  EXPECT_GE(allowed.fd(), 0) << error.line;
}

}  // namespace
}  // namespace cuflight::collector
