// Running a program as another user in the collector's tests: setpriv(1) (util-linux) with the
// credentials to take, probed first so a test skips, saying why, where it cannot.
#ifndef CUFLIGHT_TESTS_COLLECTOR_RUN_AS_H_
#define CUFLIGHT_TESTS_COLLECTOR_RUN_AS_H_

#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "subprocess.h"

namespace cuflight::collector::testing {

// Who a child process runs as: uid, gid and supplementary groups.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// setpriv(1) arguments that run a program as `who` (the program and its arguments follow them);
// empty when setpriv is missing or not permitted here (*why says which). *setpriv: its path.
inline std::vector<std::string> AsUser(const Credentials& who, std::string* setpriv,
                                       std::string* why) {
  if (::geteuid() != 0) {
    *why = "needs root to run processes as other users";
    return {};
  }
  *setpriv = cuflight::testing::FindProgram("setpriv");
  if (setpriv->empty()) {
    *why = "setpriv is not installed (Debian package util-linux)";
    return {};
  }
  std::vector<std::string> args = {"--reuid=" + std::to_string(who.uid),
                                   "--regid=" + std::to_string(who.gid)};
  if (who.groups.empty()) {
    args.emplace_back("--clear-groups");
  } else {
    std::string list;
    for (const gid_t g : who.groups) list += (list.empty() ? "" : ",") + std::to_string(g);
    args.push_back("--groups=" + list);
  }
  std::vector<std::string> probe = args;
  probe.emplace_back("/bin/true");
  const cuflight::testing::ProcessResult r = cuflight::testing::RunProcess(*setpriv, probe);
  if (r.exit_code != 0) {
    *why = "setpriv is not permitted here: " + r.err;
    return {};
  }
  return args;
}

}  // namespace cuflight::collector::testing

#endif  // CUFLIGHT_TESTS_COLLECTOR_RUN_AS_H_
