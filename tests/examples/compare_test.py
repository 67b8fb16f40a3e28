#!/usr/bin/env python3
"""Tests of scripts/gpu_check/compare.py on hand-made ground truth and event logs.

The data files in data/ are what an example program prints (*.truth) and what the collector
would log for it (*.jsonl: valid schema-v1 events, checked below when python3-jsonschema is
installed). Each test starts from such a pair, changes the log the way a broken recorder would,
and runs compare.py as gpu-check does, checking its exit status and its summary.
"""

import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = pathlib.Path(os.environ.get("CUFLIGHT_SOURCE_DIR", HERE.parent.parent))
COMPARE = SOURCE / "scripts" / "gpu_check" / "compare.py"
DATA = HERE / "data"


def read_lines(name):
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line]


def kernels(events):
    return [e for e in events if e["type"] == "kernel"]


# A launch line's own members (docs/protocol.md, "Interned configurations"); the rest of a kernel
# event is its configuration's.
LAUNCH_OWN = ("version", "ts_ns", "pid", "seq", "tid", "correlation_id", "grid", "waves",
              "tail_utilization", "graph_id", "graph_node_id", "recovered", "timing_window")


def interned(events):
    """`events` as the library sends them by default: a kernel_config (ids 1, 2, ... in order
    of first use) before the first launch of each configuration, then a launch line per launch."""
    out, ids = [], {}
    for e in events:
        if e["type"] != "kernel":
            out.append(e)
            continue
        config = {k: v for k, v in e.items() if k not in LAUNCH_OWN and k != "type"}
        key = json.dumps(config, sort_keys=True)
        if key not in ids:
            ids[key] = len(ids) + 1
            out.append({"type": "kernel_config", "version": 1, "ts_ns": e["ts_ns"],
                        "pid": e["pid"], "seq": e["seq"], "config": ids[key], **config})
        launch = {k: v for k, v in e.items() if k in LAUNCH_OWN}
        out.append({"type": "launch", **launch, "config": ids[key]})
    return out


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="compare_test."))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write_log(self, events, name="log/2026-11-21/gpu-host-app-4242-1.jsonl"):
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
        return path

    def write_truth(self, lines):
        path = self.tmp / "truth.txt"
        path.write_text("".join(json.dumps(t) + "\n" if isinstance(t, dict) else t + "\n"
                                for t in lines))
        return path

    def run_compare(self, *args):
        summary = self.tmp / "summary.json"
        r = subprocess.run([sys.executable, str(COMPARE), *args, "--summary", str(summary)],
                           capture_output=True, text=True, timeout=60)
        result = json.loads(summary.read_text()) if summary.exists() else None
        if summary.exists():
            summary.unlink()
        return r, result

    def kernels_case(self, truth_name, events, truth=None):
        truth_path = self.write_truth(truth) if truth is not None else DATA / truth_name
        self.write_log(events)
        return self.run_compare("kernels", "--truth", str(truth_path), "--log",
                                str(self.tmp / "log"))

    # -- matches ---------------------------------------------------------------------------------

    def test_every_launch_matches(self):
        r, s = self.kernels_case("block_reduce.truth", read_lines("block_reduce.jsonl"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((s["configurations"], s["launches"], s["matched"]), (2, 6, 6))
        self.assertEqual((s["mismatched"], s["missed"], s["extra"]), (0, 0, 0))
        self.assertIn("reduce_static", r.stdout)

    def test_interned_launches_are_read_as_their_kernel_events(self):
        # The injected library's default (docs/protocol.md, "Interned configurations"): each
        # configuration described once by a kernel_config, each launch a launch line naming it.
        r, s = self.kernels_case("block_reduce.truth", interned(read_lines("block_reduce.jsonl")))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((s["configurations"], s["launches"], s["matched"]), (2, 6, 6))
        self.assertEqual((s["mismatched"], s["missed"], s["extra"]), (0, 0, 0))
        # A launch whose description the file lacks is refused, as by every reader: missed.
        events = [e for e in interned(read_lines("block_reduce.jsonl"))
                  if not (e["type"] == "kernel_config" and e["config"] == 1)]
        r, s = self.kernels_case("block_reduce.truth", events)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual((s["matched"], s["missed"]), (3, 3))

    def test_truth_lines_among_other_output_and_log_file_given_directly(self):
        truth = ["DEVICE banner line", "cuflight run: summary", "{not json"] + \
            (DATA / "block_reduce.truth").read_text().splitlines()
        path = self.write_log(read_lines("block_reduce.jsonl"))
        r, s = self.run_compare("kernels", "--truth", str(self.write_truth(truth)), "--log",
                                str(path))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(s["matched"], 6)

    def test_ground_truth_may_name_the_demangled_kernel(self):
        truth = [json.loads(t) for t in (DATA / "block_reduce.truth").read_text().splitlines()]
        truth[0]["kernel"] = "reduce_static"
        r, s = self.kernels_case(None, read_lines("block_reduce.jsonl"), truth=truth)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(s["matched"], 6)

    # -- failures --------------------------------------------------------------------------------

    def test_wrong_max_active_blocks_is_a_mismatch(self):
        events = read_lines("block_reduce.jsonl")
        kernels(events)[1]["max_active_blocks"] = 4
        r, s = self.kernels_case("block_reduce.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["matched"], s["mismatched"], s["missed"]), (5, 1, 0))
        self.assertIn("MISMATCH", r.stdout)
        self.assertIn("4,5/5", r.stdout.replace("5,4", "4,5"))

    def test_wrong_limiting_resource_is_a_mismatch(self):
        events = read_lines("block_reduce.jsonl")
        kernels(events)[4]["limiting_resource"] = "warps"
        r, s = self.kernels_case("block_reduce.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(s["mismatched"], 1)

    def test_a_missing_launch_is_missed(self):
        events = read_lines("block_reduce.jsonl")
        events.remove(kernels(events)[2])
        r, s = self.kernels_case("block_reduce.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["matched"], s["missed"], s["extra"]), (5, 1, 0))
        self.assertIn("MISSED", r.stdout)

    def test_no_events_at_all_misses_everything(self):
        events = [e for e in read_lines("block_reduce.jsonl") if e["type"] != "kernel"]
        r, s = self.kernels_case("block_reduce.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["events"], s["missed"]), (0, 6))

    def test_a_duplicated_launch_is_extra(self):
        events = read_lines("block_reduce.jsonl")
        events.insert(3, dict(kernels(events)[0], seq=99))
        r, s = self.kernels_case("block_reduce.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["matched"], s["extra"], s["missed"]), (6, 1, 0))
        self.assertIn("EXTRA", r.stdout)

    def test_an_event_no_line_expects_is_extra(self):
        events = read_lines("block_reduce.jsonl")
        stranger = dict(kernels(events)[0], name="_Z8strangerv", demangled="stranger()")
        events.append(stranger)
        r, s = self.kernels_case("block_reduce.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["matched"], s["extra"]), (6, 1))
        self.assertIn("stranger", r.stdout)

    def test_another_grid_is_another_configuration(self):
        events = read_lines("block_reduce.jsonl")
        kernels(events)[0]["grid"] = [132, 1, 1]
        r, s = self.kernels_case("block_reduce.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["missed"], s["extra"]), (1, 1))

    # -- clusters --------------------------------------------------------------------------------

    def test_cluster_launches_match(self):
        r, s = self.kernels_case("cluster.truth", read_lines("cluster.jsonl"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(s["matched"], 3)
        self.assertIn("cluster/cluster", r.stdout)

    def test_cluster_limit_reported_as_per_sm_limit_is_a_mismatch(self):
        events = read_lines("cluster.jsonl")
        kernels(events)[1]["limiting_resource"] = "shared_mem"
        r, s = self.kernels_case("cluster.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(s["mismatched"], 1)

    def test_cluster_launch_recorded_without_its_cluster_is_missed_and_extra(self):
        events = read_lines("cluster.jsonl")
        del kernels(events)[0]["cluster"]
        r, s = self.kernels_case("cluster.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["missed"], s["extra"]), (1, 1))

    def test_cluster_example_skipped_on_an_older_gpu(self):
        truth = [{"note": "cluster launches need sm_90 or later; this device is sm_86: skipped"}]
        events = [e for e in read_lines("cluster.jsonl") if e["type"] != "kernel"]
        r, s = self.kernels_case(None, events, truth=truth)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(s["skipped"])
        self.assertIn("sm_86", r.stdout)

    # -- graphs ----------------------------------------------------------------------------------

    def test_graph_replays_match(self):
        r, s = self.kernels_case("graph_replay.truth", read_lines("graph_replay.jsonl"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((s["configurations"], s["launches"], s["matched"]), (3, 14, 14))

    def test_a_lost_replay_is_missed(self):
        events = read_lines("graph_replay.jsonl")
        for e in kernels(events)[-1:]:
            events.remove(e)
        r, s = self.kernels_case("graph_replay.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["matched"], s["missed"]), (13, 1))

    def test_captured_launches_reported_as_executions_are_extra(self):
        events = read_lines("graph_replay.jsonl")
        captured = [dict(k, api="cudaLaunchKernel") for k in kernels(events)[:2]]
        for k in captured:
            del k["graph_id"], k["graph_node_id"]
        events[2:2] = captured
        r, s = self.kernels_case("graph_replay.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["matched"], s["extra"]), (14, 2))

    def test_graph_nodes_without_graph_ids_do_not_count(self):
        events = read_lines("graph_replay.jsonl")
        for k in kernels(events):
            k.pop("graph_id"), k.pop("graph_node_id")
        r, s = self.kernels_case("graph_replay.truth", events)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((s["matched"], s["missed"], s["extra"]), (0, 14, 14))

    # -- the faulting example --------------------------------------------------------------------

    def test_a_faulting_programs_launch_is_held_to_its_ground_truth(self):
        # The launch that faulted was recorded before the fault: its log (the kernel, then the
        # sticky error, no process_end) is compared like any other.
        truth = [{"kernel": "_Z13write_throughPf", "grid": [4, 1, 1], "block": [64, 1, 1],
                  "dyn_smem": 0, "launches": 1, "max_active_blocks": 32,
                  "limiting_resource": "blocks", "limiting_resources": ["blocks"]}]
        event = dict(kernels(read_lines("block_reduce.jsonl"))[0], name="_Z13write_throughPf",
                     demangled="write_through(float*)", grid=[4, 1, 1], block=[64, 1, 1],
                     dyn_shared_bytes=0, max_active_blocks=32, limiting_resource="blocks")
        error = {"type": "api_error", "version": 1, "ts_ns": event["ts_ns"] + 1000,
                 "pid": event["pid"], "seq": event["seq"] + 1, "api": "cuCtxSynchronize",
                 "code": 700}
        r, s = self.kernels_case(None, [event, error], truth=truth)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((s["matched"], s["mismatched"]), (1, 0))
        r, s = self.kernels_case(None, [dict(event, max_active_blocks=7), error], truth=truth)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(s["mismatched"], 1)
        r, s = self.kernels_case(None, [error], truth=truth)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(s["missed"], 1)

    @unittest.skipIf(not os.environ.get("CUFLIGHT_CLI"), "CUFLIGHT_CLI (set by CTest) not given")
    def test_the_reports_review_names_the_faulting_kernel(self):
        # A faulting program's log as the injector writes it: kernels, then the sticky error
        # of the synchronize that found the fault, and no process_end. The real `cuflight
        # report --json` reads it; fault-review must find the kernel in the review section.
        events = read_lines("block_reduce.jsonl")[:-1]  # without process_end
        faulting = dict(events[-1], seq=8, correlation_id=7, name="_Z13write_throughPf",
                        demangled="write_through(float*)")
        error = {"type": "api_error", "version": 1, "ts_ns": faulting["ts_ns"] + 1000,
                 "pid": faulting["pid"], "seq": 9, "api": "cuCtxSynchronize", "code": 700,
                 "error_name": "CUDA_ERROR_ILLEGAL_ADDRESS",
                 "message": "an illegal memory access was encountered", "device": 0,
                 "context": faulting["context"], "stream": 0, "last_correlation_ids": [5, 6, 7]}
        truth = self.write_truth([{"kernel": "_Z13write_throughPf", "grid": [4, 1, 1],
                                   "block": [64, 1, 1], "dyn_smem": 0, "launches": 1,
                                   "max_active_blocks": 32, "limiting_resource": "blocks"}])
        cli = os.environ["CUFLIGHT_CLI"]

        def review(log_events):
            log = self.write_log(log_events)
            report = self.tmp / "report.json"
            rep = subprocess.run([cli, "report", "--json", str(log.parent.parent)],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(rep.returncode, 0, rep.stderr)
            report.write_text(rep.stdout)
            r, s = self.run_compare("fault-review", "--truth", str(truth), "--report",
                                    str(report), "--log", str(self.tmp / "log"))
            return r, s

        r, s = review(events + [faulting, error])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("write_through(float*)", s["detail"])
        self.assertIn("api_error", s["detail"])
        # A log whose last kernels are other ones: the review does not name the faulting kernel.
        innocent = dict(faulting, name="_Z5otherv", demangled="other()")
        r, s = review(events + [innocent, error])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)

    # -- zstd segments and input errors ----------------------------------------------------------

    @unittest.skipIf(shutil.which("zstd") is None, "no zstd command")
    def stall(self, seq, state, launch_name, stalled_ms=1000):
        event = {"type": "stall", "version": 1, "ts_ns": 1763708400000000000 + seq, "pid": 4242,
                 "seq": seq, "state": state, "stall_ms": 1000, "stalled_ms": stalled_ms,
                 "completed": 0, "streams_stalled": 0, "streams": []}
        if state == "stalled":
            event["streams_stalled"] = 1
            event["streams"] = [{"device": 0, "context": 1, "stream": 14,
                                 "waiting_ms": stalled_ms, "unfinished": 3, "launches": [
                                     {"correlation_id": 40 + seq, "name": launch_name,
                                      "demangled": "", "grid": [1, 1, 1], "block": [32, 1, 1],
                                      "occupancy": 0.03125, "age_ms": stalled_ms}]}]
        return event

    def test_a_stall_naming_the_kernel_then_resolved_passes(self):
        truth = self.write_truth(['{"stall_kernel":"_Z4spinPVi","release_after_s":3}'])
        log = self.write_log([self.stall(5, "stalled", "_Z4stepPfi", 1000),
                              self.stall(6, "stalled", "_Z4spinPVi", 2000),
                              self.stall(7, "resolved", "", 3100)])
        r, summary = self.run_compare("stall", "--truth", str(truth), "--log", str(log))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("the first naming _Z4spinPVi after 2.0 s", summary["detail"])
        self.assertIn("resolved after 3.1 s", summary["detail"])

    def test_a_stall_naming_another_kernel_or_never_resolved_fails(self):
        truth = self.write_truth(['{"stall_kernel":"_Z4spinPVi","release_after_s":3}'])
        log = self.write_log([self.stall(5, "stalled", "_Z4stepPfi"),
                              self.stall(6, "resolved", "")])
        r, summary = self.run_compare("stall", "--truth", str(truth), "--log", str(log))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("name _Z4stepPfi (corr 45) as the oldest unfinished launch, not _Z4spinPVi",
                      summary["detail"])
        log = self.write_log([self.stall(5, "stalled", "_Z4spinPVi")])
        r, summary = self.run_compare("stall", "--truth", str(truth), "--log", str(log))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("no resolved event after it", summary["detail"])
        # A resolved event before the one naming the kernel does not count.
        log = self.write_log([self.stall(7, "resolved", ""), self.stall(8, "stalled", "_Z4spinPVi")])
        r, _ = self.run_compare("stall", "--truth", str(truth), "--log", str(log))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)

    def test_a_stall_check_without_the_expectation_is_an_input_error(self):
        truth = self.write_truth(['{"note":"nothing"}'])
        log = self.write_log([self.stall(5, "stalled", "_Z4spinPVi")])
        r, _ = self.run_compare("stall", "--truth", str(truth), "--log", str(log))
        self.assertEqual(r.returncode, 2)
        self.assertIn("no stall_kernel line", r.stderr)

    def test_compressed_segments_are_read(self):
        path = self.write_log(read_lines("block_reduce.jsonl"))
        subprocess.run(["zstd", "-q", "--rm", str(path), "-o",
                        str(path.with_name(path.stem + ".000001.jsonl.zst"))], check=True)
        r, s = self.run_compare("kernels", "--truth", str(DATA / "block_reduce.truth"), "--log",
                                str(self.tmp / "log"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(s["matched"], 6)

    def test_missing_log_is_an_input_error(self):
        r, s = self.run_compare("kernels", "--truth", str(DATA / "block_reduce.truth"), "--log",
                                str(self.tmp / "nowhere"))
        self.assertEqual(r.returncode, 2)
        self.assertIsNone(s)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("nowhere", r.stderr)

    def test_truth_without_a_ground_truth_line_is_an_input_error(self):
        self.write_log(read_lines("block_reduce.jsonl"))
        r, _ = self.run_compare("kernels", "--truth", str(self.write_truth(["no CUDA device"])),
                                "--log", str(self.tmp / "log"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("no ground-truth line", r.stderr)

    # -- PyTorch kernel names --------------------------------------------------------------------

    def names_case(self, listing, events):
        profiler = self.tmp / "profiler.json"
        profiler.write_text(json.dumps({"kernels": listing}))
        self.write_log(events)
        return self.run_compare("names", "--profiler", str(profiler), "--log",
                                str(self.tmp / "log"))

    def torch_events(self):
        base = kernels(read_lines("block_reduce.jsonl"))[0]
        gemm = dict(base, name="_Z4gemmILi128EEvPKfPf",
                    demangled="void gemm<128>(float const*, float*)")
        softmax = dict(base, name="_Z7softmaxPf", demangled="softmax(float*)")
        return [gemm, gemm, gemm, softmax]

    def test_every_profiler_kernel_is_among_the_events(self):
        r, s = self.names_case({"void gemm<128>(float const *, float *)": 3, "softmax(float*)": 1},
                               self.torch_events())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((s["profiler_kernels"], s["profiler_launches"], s["missing"]), (2, 4, 0))

    def test_a_profiler_kernel_cuflight_missed_fails(self):
        r, s = self.names_case({"void gemm<128>(float const*, float*)": 4,
                                "layer_norm(float*)": 2}, self.torch_events())
        self.assertEqual(r.returncode, 1)
        self.assertEqual(s["missing"], 2)
        self.assertIn("MISSING", r.stdout)
        self.assertIn("layer_norm", r.stdout)

    def test_kernels_cuflight_saw_more_often_are_listed_only(self):
        r, s = self.names_case({"void gemm<128>(float const*, float*)": 2,
                                "_Z7softmaxPf": 1}, self.torch_events())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(s["more"], 1)

    # -- torch.profiler and cuflight in one process ------------------------------------------------

    def shared(self, kernels, times, ends, stderr="", profiled=None, starts=()):
        sys.path.insert(0, str(SOURCE / "scripts" / "gpu_check"))
        import compare  # noqa: E402
        out = io.StringIO()
        counts = {"gemm": 2} if profiled is None else profiled
        return compare.judge_shared_cupti(counts, kernels, times, ends, stderr, out, starts)

    # What PyTorch 2.11 printed on an H200 with CUDA 13.0 (docs/gpu-verification.md).
    KINETO = ("WARNING:2026-11-26 02:20:13 659:659 init.cpp:116] function cbapi->getCuptiStatus() "
              "failed with error CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)\n"
              "WARNING:2026-11-26 02:20:13 659:659 init.cpp:117] CUPTI initialization failed - "
              "CUDA profiler activities will be missing\n")

    def test_the_profiler_refused_under_a_single_subscriber_cupti_is_the_known_limit(self):
        launches = [{"correlation_id": 1}, {"correlation_id": 2}]
        ok, word, line = self.shared(launches, launches, [{}], self.KINETO, profiled={},
                                     starts=[{"cupti_version": 130001}])
        self.assertEqual((ok, word), (True, "profiler-refused"))
        self.assertIn("CUPTI 13.0 allows one subscriber", line)

    def test_the_profiler_without_kernels_fails_otherwise(self):
        launches = [{"correlation_id": 1}]
        # CUPTI 13.3 lets both trace: a profiler with nothing is a failure there.
        self.assertEqual(self.shared(launches, launches, [{}], self.KINETO, profiled={},
                                     starts=[{"cupti_version": 130300}])[:2], (False, "FAILED"))
        # Without the profiler's own refusal on stderr, the cause is not known.
        self.assertEqual(self.shared(launches, launches, [{}], "", profiled={},
                                     starts=[{"cupti_version": 130001}])[:2], (False, "FAILED"))

    def test_both_tools_tracing_passes(self):
        ok, word, _ = self.shared([{"correlation_id": 1}, {"correlation_id": 2}],
                                  [{"correlation_id": 1}, {"correlation_id": 2}], [{}])
        self.assertEqual((ok, word), (True, "both"))

    def test_untimed_launches_said_in_process_end_pass(self):
        ok, word, line = self.shared(
            [{"correlation_id": 1}, {"correlation_id": 2}], [{"correlation_id": 1}],
            [{"timing_stopped": 1, "timing_stopped_reason": "records_stopped"}])
        self.assertEqual((ok, word), (True, "timing-stopped"))
        self.assertIn("records_stopped", line)

    def test_untimed_launches_nothing_said_fail(self):
        ok, word, _ = self.shared([{"correlation_id": 1}, {"correlation_id": 2}],
                                  [{"correlation_id": 1}], [{}])
        self.assertEqual((ok, word), (False, "FAILED"))

    def test_a_refused_subscription_said_once_passes(self):
        ok, word, _ = self.shared([], [], [], "cuflight: another CUPTI tool already holds the "
                                  "CUPTI subscriber; the application runs without cuflight")
        self.assertEqual((ok, word), (True, "refused"))

    def test_nothing_recorded_nothing_said_fails(self):
        ok, word, _ = self.shared([], [], [])
        self.assertEqual((ok, word), (False, "FAILED"))


@unittest.skipIf(subprocess.run([sys.executable, "-c", "import jsonschema"],
                                 capture_output=True).returncode != 0, "no python3-jsonschema")
class DataTest(unittest.TestCase):
    def test_event_logs_are_valid_schema_v1(self):
        for name in ("block_reduce.jsonl", "cluster.jsonl", "graph_replay.jsonl"):
            r = subprocess.run([sys.executable, str(SOURCE / "tests" / "schema" / "validate.py"),
                                str(SOURCE / "schema" / "v1"), str(DATA / name)],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, name + ": " + r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
