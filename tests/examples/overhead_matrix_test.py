#!/usr/bin/env python3
"""bench/overhead/run.py's matrix without a GPU: --dry-run lists, for each benchmark, every mode
the overhead issue asks for ("Measured on a GPU": the null subscriber with no callback ids, with
launch ids only and with the whole domain; cuflight with each timing policy; CUFLIGHT_STALL_MS=0;
activity enabled then disabled; torch.profiler beside the PyTorch loop), each with the
environment that makes it that mode; and the goals are worked out from given medians as the
issue states them (ratios to plain in one run).

usage: overhead_matrix_test.py   (environment: CUFLIGHT_SOURCE_DIR)
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import unittest

SOURCE = pathlib.Path(os.environ.get("CUFLIGHT_SOURCE_DIR",
                                     pathlib.Path(__file__).resolve().parent.parent.parent))
RUN = SOURCE / "bench" / "overhead" / "run.py"

# What each mode must set, from the issue and schema/env/README.md (values of CUFLIGHT_TIMING:
# all, sampled, off; CUFLIGHT_STALL_MS 0 is off), and null_subscriber.cc's CUFLIGHT_NULL_CALLBACKS.
EXPECTED = {
    "plain": {},
    "null-none": {"CUFLIGHT_NULL_CALLBACKS": "none"},
    "null-launches": {"CUFLIGHT_NULL_CALLBACKS": "launches"},
    "null-default": {"CUFLIGHT_NULL_CALLBACKS": "default"},
    "null-all": {"CUFLIGHT_NULL_CALLBACKS": "all"},
    "all": {"CUFLIGHT_TIMING": "all"},
    "sampled": {"CUFLIGHT_TIMING": "sampled"},
    "off": {"CUFLIGHT_TIMING": "off"},
    "stall-off": {"CUFLIGHT_TIMING": "sampled", "CUFLIGHT_STALL_MS": "0"},
    "activity-off": {"CUFLIGHT_TIMING": "sampled", "CUFLIGHT_TIMING_NEW_CONFIGS": "0"},
}


def dry_run(*args, build):
    return subprocess.run([sys.executable, str(RUN), "--build", str(build), "--dry-run", *args],
                          capture_output=True, text=True, timeout=60)


def parse(stdout):
    """{bench: {"modes": {key: (env dict, argv text)}, "goals": [text]}} from --dry-run."""
    benches, cur = {}, None
    for line in stdout.splitlines():
        if re.fullmatch(r"\w+:", line):
            cur = benches.setdefault(line[:-1], {"modes": {}, "goals": []})
        elif line.startswith("  goal: "):
            cur["goals"].append(line[len("  goal: "):])
        elif line.startswith("  "):
            key, rest = line.strip().split(" ", 1)
            rest = rest.split("]: ", 1)[1]
            env = dict(w.split("=", 1) for w in rest.split() if re.match(r"[A-Z0-9_]+=", w))
            argv = " ".join(w for w in rest.split() if not re.match(r"[A-Z0-9_]+=", w))
            cur["modes"][key] = (env, argv)
    return benches


def period_range():
    """CUFLIGHT_TIMING_PERIOD_MS's range as schema/env/README.md states it: (low, high)."""
    for line in (SOURCE / "schema" / "env" / "README.md").read_text().splitlines():
        if line.startswith("| `CUFLIGHT_TIMING_PERIOD_MS`"):
            low, high = re.search(r"\[(\d+), (\d+)\]", line).groups()
            return int(low), int(high)
    raise AssertionError("CUFLIGHT_TIMING_PERIOD_MS not in schema/env/README.md")


class OverheadMatrixDryRun(unittest.TestCase):
    def setUp(self):
        self.build = pathlib.Path(tempfile.mkdtemp(prefix="overhead_matrix.")) / "nobuild"

    def test_every_benchmark_has_every_mode_of_the_issue(self):
        r = dry_run(build=self.build)
        self.assertEqual(r.returncode, 0, r.stderr)
        benches = parse(r.stdout)
        self.assertEqual(list(benches), ["storm", "poll", "torch"])
        null_so = str(self.build / "lib" / "libcuflight_null_subscriber.so")
        inject_so = str(self.build / "lib" / "libcuflight_inject.so")
        for bench, found in benches.items():
            modes = found["modes"]
            want = set(EXPECTED) | ({"profiler"} if bench == "torch" else set())
            self.assertEqual(set(modes), want, bench)
            for key, expected in EXPECTED.items():
                env = modes[key][0]
                for name, value in expected.items():
                    self.assertEqual(env.get(name), value, f"{bench} {key} {name}")
                library = env.get("CUDA_INJECTION64_PATH")
                if key == "plain":
                    self.assertIsNone(library)
                elif key.startswith("null-"):
                    self.assertEqual(library, null_so)
                else:
                    self.assertEqual(library, inject_so)
                    self.assertIn("CUFLIGHT_COLLECTOR", env)
            # Enabled then disabled: the start window only, the periodic one at most once a day
            # (the top of the documented range), so no other window opens during a run.
            period = int(modes["activity-off"][0]["CUFLIGHT_TIMING_PERIOD_MS"])
            self.assertEqual(period, period_range()[1])
            self.assertEqual(period, 24 * 3600 * 1000)
        self.assertIsNone(benches["torch"]["modes"]["profiler"][0].get("CUDA_INJECTION64_PATH"))
        self.assertTrue(benches["torch"]["modes"]["profiler"][1].endswith("--profiler"))
        self.assertIn("bin/launch_storm 1000000", benches["storm"]["modes"]["plain"][1])
        self.assertIn("bin/poll_heavy --seconds 5", benches["poll"]["modes"]["plain"][1])
        # The issue's goals, each beside its benchmark.
        self.assertEqual(benches["storm"]["goals"],
                         ["timing sampled within 0.02 of null default (same callback ids)"])
        self.assertEqual(benches["poll"]["goals"], ["query rate with timing sampled >= 0.98x"])
        self.assertEqual(benches["torch"]["goals"][:2],
                         ["timing sampled >= 0.99x", "timing all >= 0.90x"])
        self.assertIn("missing here:", r.stdout)

    def test_only_and_modes_choose_and_plain_always_runs(self):
        r = dry_run("--only", "poll", "--modes", "sampled", "--poll-seconds", "2",
                    build=self.build)
        self.assertEqual(r.returncode, 0, r.stderr)
        benches = parse(r.stdout)
        self.assertEqual(list(benches), ["poll"])
        self.assertEqual(set(benches["poll"]["modes"]), {"plain", "sampled"})
        self.assertIn("--seconds 2", benches["poll"]["modes"]["plain"][1])
        r = dry_run("--skip-storm", "--skip-torch", build=self.build)
        self.assertEqual(list(parse(r.stdout)), ["poll"])

    def test_bad_input_exits_2_with_one_line(self):
        for args in (["--only", "storm,gemm"], ["--modes", "sampled,fast"]):
            r = dry_run(*args, build=self.build)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        # Without --dry-run a build that lacks the programs cannot start.
        r = subprocess.run([sys.executable, str(RUN), "--build", str(self.build)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("missing", r.stderr)

    def test_goals_from_medians(self):
        spec = importlib.util.spec_from_file_location("overhead_run", RUN)
        run = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(run)
        # Storm: sampled 900/1000 = 0.900x, null default 910/1000 = 0.910x: 0.900 - 0.910 =
        # -0.010, within 0.02; null default 930: -0.030, not.
        self.assertEqual(run.goal_lines("storm", {"plain": 1000, "sampled": 900,
                                                  "null-default": 910}),
                         ["- goal: timing sampled within 0.02 of null default (same callback "
                          "ids): -0.010, met"])
        self.assertTrue(run.goal_lines("storm", {"plain": 1000, "sampled": 900,
                                                 "null-default": 930})[0].endswith(
                                                     "-0.030, NOT met"))
        # Poll: 97,000 of 100,000 queries/s is 0.970x, under 0.98x.
        self.assertEqual(run.goal_lines("poll", {"plain": 100000, "sampled": 97000}),
                         ["- goal: query rate with timing sampled >= 0.98x: 0.970x, NOT met"])
        # Torch: 99.5/100 = 0.995x >= 0.99x; 89/100 = 0.890x < 0.90x; profiler 0.700x.
        self.assertEqual(run.goal_lines("torch", {"plain": 100, "sampled": 99.5, "all": 89,
                                                  "profiler": 70}),
                         ["- goal: timing sampled >= 0.99x: 0.995x, met",
                          "- goal: timing all >= 0.90x: 0.890x, NOT met",
                          "- goal: timing sampled above torch.profiler: 0.995x vs 0.700x, met"])
        # A goal whose mode was left out says so.
        self.assertIn("not measured", run.goal_lines("poll", {"plain": 1.0})[0])


if __name__ == "__main__":
    unittest.main()
