#!/usr/bin/env python3
"""scripts/gpu-check from end to end on a machine without a GPU, with stand-ins for the GPU.

gpu-check runs on a lent GPU machine with little time on it, so everything around the GPU is
exercised here first: scripts/gpu_check/pack makes the folder that is carried there, from this
build; its example programs are replaced by stand-ins that print ground truth and fire launches
through the injection tests' fake driver and CUPTI (tests/inject/fakes); a fake nvidia-smi names
the GPU. gpu-check then runs for real: the packed gpu tests from gpu-tests.txt, every example
under the packed `cuflight run`, the comparison, the fault review through `cuflight report`, the
stall check of the hang example (its stand-in's launches stay unfinished past gpu-check's
CUFLIGHT_STALL_MS), the summary, its exit status and the row it appends to (a copy of)
docs/gpu-verification.md.

The stand-in device is the fake driver's H100 (tests/inject/fakes/fake_libcuda.cc) and every
launch the fake CUPTI fires is cuLaunchKernel of _Z6vecaddPKfS0_Pfi with grid 132, block 256 and
no dynamic shared memory; the function uses 64 registers per thread and 8 KiB of static shared
memory. Its occupancy, worked out by hand:
  registers:  64 regs x 32 threads = 2048 per warp (already a multiple of the 256-register
              allocation unit); 8 warps per block = 16384; 65536 / 16384 = 4 blocks
  shared mem: 8192 static + 1024 reserved = 9216 per block; 233472 / 9216 = 25 blocks
  warps:      64 warps per SM / 8 = 8 blocks
  blocks:     32 per SM
so 4 blocks per SM, limited by registers; occupancy 4 x 8 / 64 warps = 50 %. A stand-in ncu
(for --ncu) prints those numbers as ncu's CSV would, for each of the stand-in's launches.

usage: gpu_check_dry_run_test.py   (environment: CUFLIGHT_SOURCE_DIR, CUFLIGHT_BUILD_DIR,
       CUFLIGHT_FAKE_APP, CUFLIGHT_FAKE_LIBCUDA_DIR, CUFLIGHT_FAKE_LIBCUPTI)
"""

import datetime
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

SOURCE = pathlib.Path(os.environ.get("CUFLIGHT_SOURCE_DIR",
                                     pathlib.Path(__file__).resolve().parent.parent.parent))
BUILD = pathlib.Path(os.environ.get("CUFLIGHT_BUILD_DIR", SOURCE / "build" / "release"))
# Only a release build is what gets carried; debug and sanitizer builds are larger.
CARRIED_BUILD = os.environ.get("CUFLIGHT_BUILD_KIND", "Release") == "Release"

KERNEL = "_Z6vecaddPKfS0_Pfi"
LAUNCHES = 10  # each stand-in fires this many
MAX_ACTIVE_BLOCKS = 4  # worked out in the docstring
LIMITER = "registers"
FAKE_GPU = "Fake H100, 580.00"


def truth(launches=LAUNCHES, max_active_blocks=MAX_ACTIVE_BLOCKS, limiter=LIMITER):
    return json.dumps({"kernel": KERNEL, "grid": [132, 1, 1], "block": [256, 1, 1],
                       "dyn_smem": 0, "launches": launches,
                       "max_active_blocks": max_active_blocks,
                       "reference_max_active_blocks": max_active_blocks,
                       "limiting_resource": limiter, "limiting_resources": [limiter],
                       "carveout": -1})


def stall_stand_in(path, stall_kernel=KERNEL):
    """hang's stand-in: its ground truth and the kernel it stalls on, then launches that the fake
    CUPTI runs for 1.5 s (FAKE_CUPTI_TIMING's fourth field), while it sleeps 2 s: they stay
    unfinished past gpu-check's CUFLIGHT_STALL_MS (the forced flush that confirms the stall hands
    their records over incomplete), then a context synchronize returns and resolves it."""
    write_script(path, "#!/bin/sh\n"
                       f"echo '{truth()}'\n"
                       f"echo '{{\"stall_kernel\":\"{stall_kernel}\",\"release_after_s\":2}}'\n"
                       "FAKE_CUPTI_TIMING=0,0,0,1500 "
                       f'exec "$CUFLIGHT_FAKE_APP" "$CUDA_INJECTION64_PATH" {LAUNCHES} sleep 2000 '
                       ">&2\n")


def write_script(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def stand_in(path, truth_line, mode=""):
    """An example program: its ground truth on stdout, then launches through the fakes (the
    injector is the one `cuflight run` names in CUDA_INJECTION64_PATH), the fake app's own
    output on stderr."""
    write_script(path, "#!/bin/sh\n"
                       f"echo '{truth_line}'\n"
                       f'exec "$CUFLIGHT_FAKE_APP" "$CUDA_INJECTION64_PATH" {LAUNCHES} {mode} >&2\n')


NCU_VALUES = (("launch__occupancy_limit_registers", "4"),
              ("launch__occupancy_limit_shared_mem", "25"),
              ("launch__occupancy_limit_warps", "8"), ("launch__occupancy_limit_blocks", "32"),
              ("sm__maximum_warps_per_active_cycle_pct", "50"),
              ("launch__registers_per_thread", "64"),
              ("launch__shared_mem_per_block_dynamic", "0"),
              ("launch__shared_mem_config_size", "233,472"))


def fake_ncu(path):
    """ncu for the stand-ins: ncu's ==PROF== line and CSV for LAUNCHES launches of vecadd, as
    ncu spells its name, with the numbers worked out in the docstring."""
    rows = "".join(
        f'echo \'"\'$i\'","1","vecadd","127.0.0.1","vecadd(const float *, const float *, '
        f'float *, int)","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler '
        f'metrics","{metric}","","{value}"\'\n' for metric, value in NCU_VALUES)
    write_script(path, "#!/bin/sh\n"
                       "echo '==PROF== Connected to process 1 (stand-in)'\n"
                       'echo \'"ID","Process ID","Process Name","Host Name","Kernel Name",'
                       '"Context","Stream","Block Size","Grid Size","Device","CC","Section Name",'
                       '"Metric Name","Metric Unit","Metric Value"\'\n'
                       f"i=0\nwhile [ $i -lt {LAUNCHES} ]; do\n{rows}i=$((i + 1))\ndone\n")


def doc_rows(repo):
    lines = (repo / "docs" / "gpu-verification.md").read_text().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("| date | GPU | driver | CUDA"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def overhead_rows(stdout):
    """{mode: [median, spread, ratio, target]} from the tables bench/overhead/run.py prints."""
    return {cells[0]: cells[1:] for cells in
            ([c.strip() for c in l.strip("|").split("|")] for l in stdout.splitlines()
             if l.startswith("| ") and not l.startswith("| mode"))}


def kernel_events(log_dir):
    """How many launches the collector wrote under log_dir: `launch` lines (interned
    configurations, the library's default: docs/protocol.md) and whole `kernel` lines."""
    return sum(sum(1 for line in path.read_text().splitlines()
                   if json.loads(line)["type"] in ("launch", "kernel"))
               for path in log_dir.rglob("*.jsonl"))


class GpuCheckDryRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = pathlib.Path(tempfile.mkdtemp(prefix="gpu_check_dry_run."))
        # The scripts and the doc they append to, copied, so the checkout stays untouched.
        cls.repo = cls.tmp / "repo"
        (cls.repo / "scripts").mkdir(parents=True)
        shutil.copy2(SOURCE / "scripts" / "gpu-check", cls.repo / "scripts")
        shutil.copytree(SOURCE / "scripts" / "gpu_check", cls.repo / "scripts" / "gpu_check",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(SOURCE / "bench" / "overhead", cls.repo / "bench" / "overhead",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (cls.repo / "docs").mkdir()
        shutil.copy2(SOURCE / "docs" / "gpu-verification.md", cls.repo / "docs")
        cls.rows_before = len(doc_rows(cls.repo))

        # The folder the device tool would carry, made from this build as docs say.
        cls.pack = cls.repo / "build" / "gpu"
        env = dict(os.environ)
        if not CARRIED_BUILD:
            env["CUFLIGHT_PACK_LIMIT_MIB"] = "100000"
        r = subprocess.run([str(SOURCE / "scripts" / "gpu_check" / "pack"), str(BUILD),
                            str(cls.pack)], capture_output=True, text=True, timeout=300, env=env)
        if r.returncode != 0:
            raise AssertionError(f"pack exited {r.returncode}: {r.stdout}{r.stderr}")
        cls.pack_output = r.stdout

        # Stand-ins for what needs a GPU: the examples, the gpu tests, nvidia-smi.
        examples = cls.pack / "bin" / "examples"
        shutil.rmtree(examples, ignore_errors=True)
        examples.mkdir()
        stand_in(examples / "vecadd", truth())
        stand_in(examples / "illegal_address", truth(), mode="sticky-exit")
        stand_in(examples / "wrong_truth", truth(launches=LAUNCHES + 2, max_active_blocks=5))
        stall_stand_in(examples / "hang")
        # launch_storm: with the injector named, its launches go through the fakes; the rates it
        # prints are made up, 1,000,000/s plain, 900,000/s under the injector and 800,000/s under
        # an injector in a folder named baseline (run.py --baseline-inject).
        write_script(cls.pack / "bin" / "launch_storm",
                     '#!/bin/sh\nrate=1000000.0\n'
                     'if [ -n "$CUDA_INJECTION64_PATH" ]; then\n'
                     '  "$CUFLIGHT_FAKE_APP" "$CUDA_INJECTION64_PATH" "$1" >&2 || exit 1\n'
                     '  rate=900000.0\nfi\n'
                     'case "$CUDA_INJECTION64_PATH" in */baseline/*) rate=800000.0;; esac\n'
                     'echo "{\\"launches\\":$1,\\"seconds\\":1.0,\\"launches_per_s\\":$rate}"\n')
        # poll_heavy: the same, 100,000 queries/s plain and 97,000/s with any library injected.
        write_script(cls.pack / "bin" / "poll_heavy",
                     '#!/bin/sh\nrate=100000.0\n'
                     'if [ -n "$CUDA_INJECTION64_PATH" ]; then\n'
                     '  "$CUFLIGHT_FAKE_APP" "$CUDA_INJECTION64_PATH" 5 >&2 || exit 1\n'
                     '  rate=97000.0\nfi\n'
                     'echo "{\\"seconds\\":$2,\\"queries_per_s\\":$rate,\\"launches_per_s\\":1.0}"\n')
        write_script(cls.pack / "bin" / "stub_gpu_test",
                     '#!/bin/sh\n[ -x "$CUFLIGHT_TEST_CLI" ] && '
                     '"$CUFLIGHT_TEST_CLI" occupancy --help > /dev/null\n')
        (cls.pack / "gpu-tests.txt").write_text("bin/stub_gpu_test CUFLIGHT_TEST_CLI=bin/cuflight\n")
        cls.smi_dir = cls.tmp / "smi"
        cls.smi_dir.mkdir()
        write_script(cls.smi_dir / "nvidia-smi",
                     '#!/bin/sh\ncase "$1" in\n'
                     f'  --query-gpu=*) echo "{FAKE_GPU}" ;;\n'
                     '  *) echo "| NVIDIA-SMI 580.00   Driver Version: 580.00   CUDA Version: 13.0 |" ;;\n'
                     "esac\n")
        cls.no_smi_dir = cls.tmp / "no-smi"
        cls.no_smi_dir.mkdir()
        write_script(cls.no_smi_dir / "nvidia-smi",
                     "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate "
                     "with the NVIDIA driver.' >&2\nexit 9\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def env(self, smi=None, tools=None):
        env = dict(os.environ)
        env["PATH"] = f"{smi or self.smi_dir}:{env.get('PATH', '/usr/bin:/bin')}"
        if tools:
            env["PATH"] = f"{tools}:{env['PATH']}"
        env["LD_LIBRARY_PATH"] = os.environ["CUFLIGHT_FAKE_LIBCUDA_DIR"]
        env["CUFLIGHT_CUPTI_PATH"] = os.environ["CUFLIGHT_FAKE_LIBCUPTI"]
        return env

    def gpu_check(self, *args, smi=None, tools=None):
        out = pathlib.Path(tempfile.mkdtemp(prefix="out.", dir=self.tmp))
        r = subprocess.run([sys.executable, str(self.repo / "scripts" / "gpu-check"),
                            "--build", "build/gpu", "--out", str(out), "--skip-torch", *args],
                           capture_output=True, text=True, timeout=600,
                           env=self.env(smi, tools), cwd=self.repo)
        return r, out

    def summary_line(self, stdout, prefix):
        lines = [l for l in stdout.splitlines() if l.startswith(prefix)]
        self.assertEqual(len(lines), 1, stdout)
        return lines[0]

    def test_pack_fits_the_carry_limit(self):
        for f in ("bin/cuflight", "bin/cuflight-collector", "lib/libcuflight_inject.so"):
            self.assertTrue((self.pack / f).is_file(), f)
        if not CARRIED_BUILD:
            self.skipTest("a debug or sanitizer build is not what gets carried")
        size = sum(p.stat().st_size for p in self.pack.rglob("*") if p.is_file())
        self.assertLess(size, 64 << 20)

    def test_matching_events_pass_and_are_recorded(self):
        r, out = self.gpu_check("--only", "vecadd,illegal_address")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"GPU: Fake H100, driver 580.00, CUDA 13.0", r.stdout)
        self.assertEqual(self.summary_line(r.stdout, "ctest -L gpu:"), "ctest -L gpu: passed")
        self.assertEqual(
            self.summary_line(r.stdout, "examples:"),
            f"examples: 2 configurations, {2 * LAUNCHES} launches, {2 * LAUNCHES} kernel events; "
            "0 mismatched, 0 missed, 0 extra")
        self.assertIn("ok vecadd", r.stdout)
        self.assertIn("ok illegal_address", r.stdout)
        # The post-mortem check went through the real `cuflight report --json`.
        review = self.summary_line(r.stdout, "review: ")
        self.assertIn("api_error", review)
        self.assertIn("vecadd", review)
        self.assertEqual(self.summary_line(r.stdout, "RESULT:"), "RESULT: PASS")
        # The logs of each program are where --out says.
        self.assertTrue(list((out / "vecadd").rglob("*.jsonl*")))
        row = doc_rows(self.repo)[-1]
        self.assertEqual(row[0], datetime.date.today().isoformat())
        self.assertEqual(row[1:4], ["Fake H100", "580.00", "13.0"])
        self.assertEqual(row[4:], ["passed", f"2 / {2 * LAUNCHES} / {2 * LAUNCHES}", "0 / 0 / 0",
                                   "skipped", "skipped", "pass"])

    def test_ncu_is_compared_and_its_counts_end_the_result_cell(self):
        tools = self.tmp / "ncu-bin"
        tools.mkdir(exist_ok=True)
        fake_ncu(tools / "ncu")
        r, out = self.gpu_check("--only", "vecadd,illegal_address", "--ncu", tools=tools)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.summary_line(r.stdout, "ncu: "),
                         "ncu: 1 configurations, 0 mismatched")
        self.assertIn(f"OK ncu: 1 configurations, 0 mismatched; {LAUNCHES} ncu launches: "
                      f"{LAUNCHES} matched", r.stdout)
        # vecadd ran under ncu; illegal_address, which faults on purpose, did not.
        self.assertTrue((out / "ncu" / "vecadd.csv").is_file())
        self.assertFalse((out / "ncu" / "illegal_address.csv").exists())
        self.assertEqual(doc_rows(self.repo)[-1][-1], "pass; ncu: 1 configurations, 0 mismatched")

    def test_ncu_is_skipped_with_a_note_when_there_is_none(self):
        if shutil.which("ncu") or os.path.exists("/usr/local/cuda/bin/ncu") or \
                list(pathlib.Path("/").glob("opt/nvidia/nsight-compute/*/ncu")):
            self.skipTest("this machine has an ncu")
        r, _ = self.gpu_check("--only", "vecadd", "--ncu")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.summary_line(r.stdout, "ncu: "),
                         "ncu: skipped: no ncu on PATH, in /usr/local/cuda/bin or "
                         "/opt/nvidia/nsight-compute")
        self.assertEqual(doc_rows(self.repo)[-1][-1], "pass")

    def test_a_hang_is_named_while_it_lasts_and_then_resolved(self):
        r, out = self.gpu_check("--only", "hang")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ok hang", r.stdout)
        self.assertEqual(self.summary_line(r.stdout, "stall (hang):"), "stall (hang): yes / yes")
        # What compare.py found in the logs: the stall named the oldest of the stand-in's
        # launches, with all of them stalled behind it, then resolved by the synchronize.
        line = self.summary_line(r.stdout, "stall: ")
        self.assertIn(f"the first naming {KERNEL} after ", line)
        self.assertIn("vecadd(float const*, float const*, float*, int) (corr ", line)
        self.assertIn("resolved after ", line)
        stalls = []
        for path in (out / "hang").rglob("*.jsonl"):
            stalls += [json.loads(l) for l in path.read_text().splitlines()
                       if json.loads(l)["type"] == "stall"]
        self.assertEqual([s["state"] for s in stalls][-1], "resolved")
        self.assertEqual(stalls[0]["streams"][0]["unfinished"], LAUNCHES)
        self.assertEqual(stalls[0]["stall_ms"], 1000)  # gpu-check's CUFLIGHT_STALL_MS
        self.assertEqual(self.summary_line(r.stdout, "RESULT:"), "RESULT: PASS")
        self.assertEqual(doc_rows(self.repo)[-1][7], "yes / yes")

    def test_a_hang_naming_another_kernel_fails(self):
        hang = self.pack / "bin" / "examples" / "hang"
        stall_stand_in(hang, stall_kernel="_Z4spinPVi")
        try:
            r, _ = self.gpu_check("--only", "hang", "--no-doc")
        finally:
            stall_stand_in(hang)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("FAIL hang: the stall events name vecadd(float const*, float const*, float*, "
                      "int) (corr ", r.stdout)
        self.assertTrue(self.summary_line(r.stdout, "stall (hang):").startswith(
            "stall (hang): FAILED: the stall events name vecadd"))
        self.assertEqual(self.summary_line(r.stdout, "RESULT:"), "RESULT: FAIL")

    def test_wrong_values_and_missed_launches_fail(self):
        r, _ = self.gpu_check("--only", "wrong_truth", "--no-doc")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(
            self.summary_line(r.stdout, "examples:"),
            f"examples: 1 configurations, {LAUNCHES + 2} launches, {LAUNCHES} kernel events; "
            f"{LAUNCHES} mismatched, 2 missed, 0 extra; failed: wrong_truth")
        self.assertEqual(self.summary_line(r.stdout, "RESULT:"), "RESULT: FAIL")

    def test_a_failing_gpu_test_fails_the_run(self):
        tests = self.pack / "gpu-tests.txt"
        saved = tests.read_text()
        write_script(self.pack / "bin" / "failing_gpu_test", "#!/bin/sh\nexit 1\n")
        tests.write_text(saved + "bin/failing_gpu_test\n")
        try:
            r, _ = self.gpu_check("--only", "vecadd", "--no-doc")
        finally:
            tests.write_text(saved)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(self.summary_line(r.stdout, "ctest -L gpu:"), "ctest -L gpu: FAILED")

    def test_overhead_runs_every_storm_mode_and_tabulates_the_ratios(self):
        out = pathlib.Path(tempfile.mkdtemp(prefix="overhead.", dir=self.tmp))
        launches, reps = 50, 2
        r = subprocess.run([sys.executable, str(self.repo / "bench" / "overhead" / "run.py"),
                            "--build", str(self.pack), "--out", str(out), "--reps", str(reps),
                            "--launches", str(launches), "--only", "storm",
                            "--modes", "all,off"],
                           capture_output=True, text=True, timeout=300, env=self.env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = overhead_rows(r.stdout)
        self.assertEqual(rows["plain"][0], "1,000,000.0")
        self.assertEqual(rows["plain"][2], "1.000x")
        self.assertEqual(rows["timing all"][2], "0.900x")
        self.assertEqual(rows["timing off"][2], "0.900x")
        samples = json.loads((out / "overhead.json").read_text())["launch_storm"]
        self.assertEqual({m: len(v) for m, v in samples["launches_per_s"].items()},
                         {"plain": reps, "timing all": reps, "timing off": reps})
        # Every injected launch reached the benchmark's collector: 2 modes x reps runs.
        events = kernel_events(out / "logs")
        self.assertEqual(events, 2 * reps * launches)

    def test_overhead_measures_a_baseline_injector_beside_this_one(self):
        out = pathlib.Path(tempfile.mkdtemp(prefix="overhead.", dir=self.tmp))
        baseline = out / "baseline" / "libcuflight_inject.so"
        baseline.parent.mkdir()
        shutil.copy2(self.pack / "lib" / "libcuflight_inject.so", baseline)
        launches, reps = 40, 2
        argv = [sys.executable, str(self.repo / "bench" / "overhead" / "run.py"),
                "--build", str(self.pack), "--out", str(out), "--reps", str(reps),
                "--launches", str(launches), "--only", "storm", "--modes", "all,off",
                "--baseline-inject"]
        r = subprocess.run(argv + [str(baseline)], capture_output=True, text=True, timeout=300,
                           env=self.env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = overhead_rows(r.stdout)
        # Each injected mode ran with both libraries: the stand-in's rates tell them apart.
        self.assertEqual(rows["timing off"][2], "0.900x")
        self.assertEqual(rows["baseline timing all"][2], "0.800x")
        self.assertEqual(rows["baseline timing off"][2], "0.800x")
        samples = json.loads((out / "overhead.json").read_text())["launch_storm"]
        self.assertEqual({m: len(v) for m, v in samples["launches_per_s"].items()},
                         {"plain": reps, "timing all": reps, "timing off": reps,
                          "baseline timing all": reps, "baseline timing off": reps})
        # Both libraries' launches reached the collector: 4 injected modes x reps runs.
        events = kernel_events(out / "logs")
        self.assertEqual(events, 4 * reps * launches)

        r = subprocess.run(argv + [str(out / "missing.so")], capture_output=True, text=True,
                           timeout=60, env=self.env())
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("missing.so: no such file", r.stderr)

    def test_overhead_matrix_runs_every_mode_of_storm_and_poll(self):
        if not (self.pack / "lib" / "libcuflight_null_subscriber.so").exists():
            self.skipTest("no libcuflight_null_subscriber.so (built with the examples, needs nvcc)")
        out = pathlib.Path(tempfile.mkdtemp(prefix="overhead.", dir=self.tmp))
        launches = 30
        r = subprocess.run([sys.executable, str(self.repo / "bench" / "overhead" / "run.py"),
                            "--build", str(self.pack), "--out", str(out), "--reps", "1",
                            "--launches", str(launches), "--only", "storm,poll",
                            "--poll-seconds", "1"],
                           capture_output=True, text=True, timeout=300, env=self.env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        results = json.loads((out / "overhead.json").read_text())
        modes = ["plain", "null none", "null launches", "null default", "null all",
                 "timing all", "timing sampled", "timing off", "sampled, stall off",
                 "activity on then off"]
        self.assertEqual(list(results["launch_storm"]["launches_per_s"]), modes)
        self.assertEqual(list(results["poll_heavy"]["queries_per_s"]), modes)
        # The stand-ins' rates: every injected mode 0.900x (storm) and 0.970x (poll) of plain,
        # so sampled - null default = 0.900 - 0.900 = 0 and the poll goal (0.98x) is missed.
        self.assertIn("- goal: timing sampled within 0.02 of null default (same callback ids): "
                      "+0.000, met", r.stdout)
        self.assertIn("- goal: query rate with timing sampled >= 0.98x: 0.970x, NOT met",
                      r.stdout)
        # Only cuflight's modes send: 5 of them, the storm's launches plus the poll stand-in's 5.
        self.assertEqual(kernel_events(out / "logs"), 5 * (launches + 5))

    def test_without_a_gpu_it_says_so_in_one_line(self):
        rows = len(doc_rows(self.repo))
        r, _ = self.gpu_check(smi=self.no_smi_dir)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.splitlines(),
                         ["gpu-check: no GPU: nvidia-smi is missing or lists no device"])
        self.assertEqual(len(doc_rows(self.repo)), rows)


if __name__ == "__main__":
    for var in ("CUFLIGHT_FAKE_APP", "CUFLIGHT_FAKE_LIBCUDA_DIR", "CUFLIGHT_FAKE_LIBCUPTI"):
        if var not in os.environ:
            sys.exit(f"{var} is not set (run through ctest)")
    unittest.main()
