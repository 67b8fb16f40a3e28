// Whom the producer sends to over a Unix socket (peer_trust.h): the directory rule on stat
// results, and the Sender against a collector socket of another uid. The uid cases need root (to
// run a listener as another user); they skip, saying so, without it.
#include "cuflight/transport/peer_trust.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuflight/transport/sender.h"
#include "temp_dir.h"
#include "test_lines.h"

namespace cuflight::transport {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A uid no account on a test machine uses (and no other test here).
constexpr uid_t kStranger = 54322;

struct stat DirStat(uid_t owner, mode_t mode) {
  struct stat st {};
  st.st_mode = S_IFDIR | mode;
  st.st_uid = owner;
  return st;
}

TrustedUids Trust(std::initializer_list<uid_t> uids) {
  TrustedUids t;
  for (uid_t u : uids) t.Add(u);
  return t;
}

TEST(PeerTrustTest, ProducerTrustsItselfRootAndTheConfiguredUid) {
  const TrustedUids none = ProducerTrustedUids(-1);
  EXPECT_TRUE(none.Contains(getuid()));
  EXPECT_TRUE(none.Contains(geteuid()));
  EXPECT_TRUE(none.Contains(0));
  EXPECT_EQ(none.Contains(kStranger), getuid() == kStranger);
  EXPECT_TRUE(ProducerTrustedUids(kStranger).Contains(kStranger));
  // (uid_t)-1 is "no uid" to the kernel: never a collector's.
  EXPECT_FALSE(ProducerTrustedUids(4294967295).Contains(static_cast<uid_t>(-1)));
}

TEST(PeerTrustTest, DirectoryRule) {
  const TrustedUids trusted = Trust({1000, 0});
  char why[256];
  EXPECT_TRUE(
      DirectoryTrusted(DirStat(1000, 0700), trusted, "/run/user/1000/cuflight", why, sizeof(why)));
  EXPECT_TRUE(DirectoryTrusted(DirStat(0, 0750), trusted, "/run/cuflight", why, sizeof(why)));
  // /tmp: root's, writable by all, sticky: nobody can replace another's socket there.
  EXPECT_TRUE(DirectoryTrusted(DirStat(0, 01777), trusted, "/tmp", why, sizeof(why)));

  // The squatted default directory: made first by another user.
  ASSERT_FALSE(
      DirectoryTrusted(DirStat(1001, 0700), trusted, "/tmp/cuflight-1000", why, sizeof(why)));
  EXPECT_STREQ(why,
               "directory /tmp/cuflight-1000 is owned by uid 1001, not by uid 1000 or 0 "
               "(another user may have created it to receive these events; set "
               "CUFLIGHT_COLLECTOR_UID to trust a collector of another uid)");
  ASSERT_FALSE(DirectoryTrusted(DirStat(1000, 0770), trusted, "/srv/c", why, sizeof(why)));
  EXPECT_STREQ(why,
               "directory /srv/c is writable by group or others (mode 770) and not sticky: "
               "anyone could replace the socket");
  struct stat file = DirStat(1000, 0600);
  file.st_mode = S_IFREG | 0600;
  EXPECT_FALSE(DirectoryTrusted(file, trusted, "/x", why, sizeof(why)));
  EXPECT_STREQ(why, "/x is not a directory");
}

TEST(PeerTrustTest, AMissingDirectoryIsNoCollectorNotDistrust) {
  char why[256];
  EXPECT_EQ(CheckSocketDirectory("/nonexistent-cuflight-dir/c.sock", ProducerTrustedUids(-1), why,
                                 sizeof(why)),
            SocketDirectory::kMissing);
  EXPECT_EQ(CheckSocketDirectory("/tmp/c.sock", Trust({0}), why, sizeof(why)),
            SocketDirectory::kTrusted);
}

// A listening Unix socket in a child process running as `uid`: counts the bytes it receives and
// reports them when stopped.
class ForeignListener {
 public:
  ForeignListener(const std::string& path, uid_t uid) {
    int ready[2];
    int report[2];
    if (pipe(ready) != 0 || pipe(report) != 0 || pipe(stop_) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(report[0]);
      close(stop_[1]);
      Serve(path, uid, ready[1], report[1], stop_[0]);  // never returns
    }
    close(ready[1]);
    close(report[1]);
    close(stop_[0]);
    report_ = report[0];
    char c = 0;
    listening_ = read(ready[0], &c, 1) == 1 && c == 'y';
    close(ready[0]);
  }
  ~ForeignListener() { Stop(); }

  bool listening() const { return listening_; }

  // Stops the child; the bytes it received, or -1.
  long Stop() {
    if (pid_ <= 0) return -1;
    close(stop_[1]);
    long bytes = -1;
    if (read(report_, &bytes, sizeof(bytes)) != sizeof(bytes)) bytes = -1;
    close(report_);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return bytes;
  }

 private:
  [[noreturn]] static void Serve(const std::string& path, uid_t uid, int ready, int report,
                                 int stop) {
    char no = 'n';
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) {
      (void)!write(ready, &no, 1);
      _exit(1);
    }
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(fd, 16) != 0) {
      (void)!write(ready, &no, 1);
      _exit(1);
    }
    const char yes = 'y';
    (void)!write(ready, &yes, 1);
    long bytes = 0;
    std::vector<pollfd> fds = {{stop, POLLIN, 0}, {fd, POLLIN, 0}};
    while (true) {
      if (poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents != 0) break;
      if (fds[1].revents & POLLIN) {
        const int c = accept(fd, nullptr, nullptr);
        if (c >= 0) fds.push_back({c, POLLIN, 0});
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        char buf[4096];
        const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n > 0) bytes += n;
      }
    }
    (void)!write(report, &bytes, sizeof(bytes));
    _exit(0);
  }

  pid_t pid_ = -1;
  int stop_[2] = {-1, -1};
  int report_ = -1;
  bool listening_ = false;
};

class PeerTrustSenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to run a listener as another uid";
    dir_ = scratch_.path().string();
  }

  SenderOptions Options(const std::string& path) {
    SenderOptions o;
    o.socket_path = path;
    o.flush_interval = milliseconds(1);
    o.backoff_min = milliseconds(1);
    o.backoff_max = milliseconds(5);
    o.warn = [this](std::string_view line) { warnings_.emplace_back(line); };
    return o;
  }

  // Polls for `duration`, or until connected.
  static void PollFor(Sender& sender, milliseconds duration) {
    const auto end = steady_clock::now() + duration;
    while (steady_clock::now() < end && !sender.connected()) {
      sender.Poll(steady_clock::now());
      std::this_thread::sleep_for(milliseconds(1));
    }
  }

  test_support::TempDir scratch_;
  std::string dir_;
  std::vector<std::string> warnings_;
};

// The squatted default path: another user made the directory and listens in it.
TEST_F(PeerTrustSenderTest, ADirectoryOfAnotherUserIsNeverConnectedTo) {
  const std::string squat = dir_ + "/cuflight-1000";
  ASSERT_EQ(mkdir(squat.c_str(), 0700), 0);
  ASSERT_EQ(chown(squat.c_str(), kStranger, kStranger), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  ForeignListener squatter(squat + "/collector.sock", kStranger);
  ASSERT_TRUE(squatter.listening());

  Sender sender(Options(squat + "/collector.sock"));
  ASSERT_TRUE(sender.AddPreamble(0, testing::MakeLine(0, 300)));
  ASSERT_TRUE(sender.Enqueue(1, testing::MakeLine(1, 300)));
  PollFor(sender, milliseconds(300));
  EXPECT_FALSE(sender.connected());
  EXPECT_GE(sender.stats().untrusted_collector, 1u);
  EXPECT_EQ(sender.stats().connects, 0u);
  EXPECT_EQ(squatter.Stop(), 0) << "the squatter received bytes";
  ASSERT_EQ(warnings_.size(), 1u);  // once, however many attempts
  EXPECT_NE(warnings_[0].find("is owned by uid 54322"), std::string::npos) << warnings_[0];
}

// A socket of another user in a directory anyone may use (/tmp-like): the peer's uid decides,
// before a byte is sent; naming that uid in CUFLIGHT_COLLECTOR_UID trusts it.
TEST_F(PeerTrustSenderTest, APeerOfAnotherUidGetsNothingUnlessConfigured) {
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);
  const std::string path = dir_ + "/collector.sock";
  {
    ForeignListener squatter(path, kStranger);
    ASSERT_TRUE(squatter.listening());
    Sender sender(Options(path));
    ASSERT_TRUE(sender.AddPreamble(0, testing::MakeLine(0, 300)));
    PollFor(sender, milliseconds(300));
    EXPECT_FALSE(sender.connected());
    EXPECT_GE(sender.stats().untrusted_collector, 1u);
    EXPECT_EQ(squatter.Stop(), 0) << "the squatter received bytes";
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("runs as uid 54322"), std::string::npos) << warnings_[0];
  }
  unlink(path.c_str());
  warnings_.clear();
  ForeignListener service(path, kStranger);
  ASSERT_TRUE(service.listening());
  SenderOptions o = Options(path);
  o.trusted_collector_uid = kStranger;
  Sender sender(o);
  const std::string line = testing::MakeLine(0, 300);
  ASSERT_TRUE(sender.AddPreamble(0, line));
  PollFor(sender, milliseconds(2000));
  ASSERT_TRUE(sender.connected());
  for (int i = 0; i < 20; ++i) {
    sender.Poll(steady_clock::now());
    std::this_thread::sleep_for(milliseconds(2));
  }
  EXPECT_EQ(sender.stats().untrusted_collector, 0u);
  EXPECT_TRUE(warnings_.empty());
  EXPECT_EQ(service.Stop(), static_cast<long>(line.size()));
}

}  // namespace
}  // namespace cuflight::transport
