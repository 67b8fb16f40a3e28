// The listening sockets: directory and file ownership rules, modes, stale versus live sockets,
// and TCP restricted to loopback.
#include "listen_sockets.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/un.h>
#include <sys/wait.h>
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

gid_t GroupOf(const std::filesystem::path& p) {
  struct stat st {};
  EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
  return st.st_gid;
}

// Without --socket-group nobody but the collector's user (and root) may connect: an owner-only
// socket in an owner-only directory.
TEST(ListenSocketsTest, CreatesAnOwnerOnlyDirectoryAndA0600Socket) {
  TempDir dir;
  const auto path = dir.path() / "a" / "b" / "collector.sock";
  ListenError error;
  UnixListener listener = UnixListener::Open(path, &error);
  ASSERT_GE(listener.fd(), 0) << error.line;
  EXPECT_EQ(ModeOf(dir.path() / "a" / "b"), 0700u);
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_TRUE(RawClient::Unix(path).connected());
  listener.Close();
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path)));
}

// A group any user here may give a file to: root may use any gid, another user its own.
gid_t SomeGroup() { return geteuid() == 0 ? 54350 : getegid(); }

// With a socket group: the socket is 0660 with that group, and the directories made for it let
// the group search them (0710) but not list or write them.
TEST(ListenSocketsTest, ASocketGroupGetsTheSocketAndSearchOnTheDirectoriesMadeForIt) {
  TempDir dir;
  const gid_t group = SomeGroup();
  const auto path = dir.path() / "a" / "b" / "collector.sock";
  ListenError error;
  UnixListener listener = UnixListener::Open(path, &error, group);
  ASSERT_GE(listener.fd(), 0) << error.line;
  for (const auto& made : {dir.path() / "a", dir.path() / "a" / "b"}) {
    EXPECT_EQ(ModeOf(made), 0710u) << made;
    EXPECT_EQ(GroupOf(made), group) << made;
  }
  EXPECT_EQ(ModeOf(path), 0660u);
  EXPECT_EQ(GroupOf(path), group);
  EXPECT_TRUE(RawClient::Unix(path).connected());
}

// An existing directory the group may not search would make the flag a silent no-op: refused
// at start, naming the directory and what to change.
TEST(ListenSocketsTest, ASocketGroupThatCannotSearchAnExistingDirectoryIsRefused) {
  TempDir dir;
  const gid_t group = SomeGroup();
  const auto sub = dir.path() / "run";
  std::filesystem::create_directory(sub);
  ASSERT_EQ(chmod(sub.c_str(), 0700), 0);
  ListenError error;
  UnixListener refused = UnixListener::Open(sub / "c.sock", &error, group);
  EXPECT_LT(refused.fd(), 0);
  EXPECT_FALSE(error.bad_value);
  EXPECT_NE(error.line.find("--socket-group: members of group " + std::to_string(group) +
                            " cannot reach the socket: its directory " + sub.string() +
                            " (mode 0700"),
            std::string::npos)
      << error.line;
  EXPECT_FALSE(std::filesystem::exists(sub / "c.sock"));

  // The directory of that group with g+x (systemd's RuntimeDirectory with Group=): accepted.
  ASSERT_EQ(chown(sub.c_str(), static_cast<uid_t>(-1), group), 0);
  ASSERT_EQ(chmod(sub.c_str(), 0750), 0);
  UnixListener accepted = UnixListener::Open(sub / "c.sock", &error, group);
  EXPECT_GE(accepted.fd(), 0) << error.line;
}

// chown(2) gives a file only to a group its caller is a member of (unless root): the collector
// says so instead of serving a socket nobody in the group can use. As root, the check runs in a
// child with another uid and no supplementary groups.
TEST(ListenSocketsTest, ASocketGroupTheUserIsNotAMemberOfIsRefused) {
  TempDir dir;
  static constexpr uid_t kUser = 54352;
  static constexpr gid_t kNotMine = 54353;
  const auto socket = dir.path() / "run" / "c.sock";
  const auto attempt = [&socket] {
    ListenError error;
    UnixListener listener = UnixListener::Open(socket, &error, kNotMine);
    return listener.fd() < 0 &&
           error.line.find("to group 54353: Operation not permitted (the collector's user must "
                           "be a member of that group, or root)") != std::string::npos;
  };
  if (geteuid() != 0) {
    EXPECT_TRUE(attempt());
    return;
  }
  ASSERT_EQ(chown(dir.path().c_str(), kUser, kUser), 0);
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(kUser) != 0 || setuid(kUser) != 0) _exit(2);
    _exit(attempt() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
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
