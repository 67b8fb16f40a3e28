// Feeds a running collector at least one event of every type a producer sends, so that every
// series of its metrics exists (deploy_test.py scrapes them): one process that launches a
// kernel, times it, fails a CUDA call with a sticky error, reports drops and dropped timing
// records, crashes and ends, with the attribution of a Kubernetes pod of a job (so that the
// workload series have their labels) and a GPU named by UUID and PCI bus id; one that
// disconnects without process_end (the collector writes its process_lost); one connection whose
// first line is not JSON (a rejected line, counted once the collector has read it: the caller
// waits for the counts it needs); and three connections held at once, one more than the
// collector's --max-connections-per-uid 2 admits (a refused connection).
//
// Usage: feed_collector SOCKET. Exit status 0 when the collector acknowledged every event.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "collector_test_util.h"

namespace {

using cuflight::collector::testing::ProducerIdentity;
using cuflight::collector::testing::RawClient;
namespace t = cuflight::collector::testing;

int Fail(const char* what) {
  std::fprintf(stderr, "feed_collector: %s\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return Fail("usage: feed_collector SOCKET");
  const std::string socket = argv[1];

  ProducerIdentity app;
  app.pid = static_cast<int32_t>(getpid());
  app.exe = "/opt/app/bin/train";
  app.instance_id = 0x5eed0001;
  app.attribution = {{"CONTAINER_NAME", "pytorch"}, {"job", "4242"}, {"pod_name", "trainer-0"},
                     {"pod_namespace", "ml"}};
  app.config = {{"timing", "sampled"}};
  std::string stream = t::ProcessStartLine(app, 0) +
                       t::DeviceLine(app, 1, 0, "GPU-7f3e0c1a-2b4d-4e6f-8a9b-0c1d2e3f4a5b",
                                     "00000000:19:00.0") +
                       t::KernelLine(app, 2, 1) + t::KernelTimeLine(app, 3, 1) +
                       t::ApiErrorLine(app, 4, "CUDA_ERROR_ILLEGAL_ADDRESS", 700) +
                       t::StatsLine(app, 5, 6, 2, 1) + t::ProcessCrashLine(app, 6) +
                       t::ProcessEndLine(app, 7, 8, 2, 1);
  RawClient whole = RawClient::Unix(socket);
  if (!whole.Send(stream) || whole.WaitAck(7) != 7u) return Fail("the first process was not acked");
  whole.Close();

  ProducerIdentity gone = app;
  gone.exe = "/opt/app/bin/killed";
  gone.instance_id = 0x5eed0002;
  RawClient killed = RawClient::Unix(socket);
  if (!killed.Send(t::ProcessStartLine(gone, 0) + t::KernelLine(gone, 1, 1)) ||
      killed.WaitAck(1) != 1u) {
    return Fail("the second process was not acked");
  }
  killed.Close();  // no process_end: process_lost after --reconnect-grace

  RawClient garbage = RawClient::Unix(socket);
  if (!garbage.Send("this is not JSON\n")) return Fail("cannot send the line that is not JSON");
  garbage.Close();  // the collector reads what was sent before the close, then counts it

  // Which one is refused depends on whether the collector has seen the last close yet.
  RawClient held[3] = {RawClient::Unix(socket), RawClient::Unix(socket), RawClient::Unix(socket)};
  for (int round = 0; round < 100; ++round) {
    for (RawClient& c : held) {
      if (c.WaitClosedByPeer(std::chrono::milliseconds(70))) return 0;
    }
  }
  return Fail("no connection beyond --max-connections-per-uid was refused");
}
