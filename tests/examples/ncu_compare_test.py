#!/usr/bin/env python3
"""Tests of scripts/gpu_check/ncu_compare.py and gpu-check's --ncu step, on excerpts of a real
H200 run.

data/ncu/ncu.csv is what `ncu --csv --metrics ...` printed for three examples (each after a
`=== <example>` line, with ncu's ==PROF==/==WARNING== lines and one of the program's own JSON
lines left in), cut to five launches and the metrics the comparison reads (and one it does not):
register_pressure's unbounded and bounded kernels at 128 threads, one tiny_blocks launch, and the
cluster example's pair_exchange and cluster_tiles. data/ncu/<example>/log.jsonl are cuflight's
device event and kernel events of the same launches from the same machine, unchanged.

What both sides should say, worked out by hand from the H200's limits (65536 registers, 64 warps,
32 blocks, 233472 bytes of shared memory per SM, 1024 reserved per block, registers allocated
per warp in units of 256; cuda_occupancy.h):
  unbounded, 128 threads, 80 regs: 80 x 32 = 2560 per warp, x 4 warps = 10240 per block;
      65536 / 10240 = 6 blocks (warps allow 64 / 4 = 16, blocks 32): 6, registers;
      6 x 4 / 64 = 37.5 %
  bounded, 128 threads, 64 regs: 2048 x 4 = 8192 per block; 65536 / 8192 = 8 blocks: 8,
      registers; 8 x 4 / 64 = 50 %
  scale (tiny_blocks), 16 threads = 1 warp: blocks 32, warps 64, registers and the SM's whole
      shared memory (233472 / 1024 = 228) more: 32, blocks; 32 / 64 = 50 %. ncu counts shared
      memory against the 32 KiB carveout the driver configured (32768 / 1024 = 32 blocks), so it
      names shared_mem too: a tie only, the count is the same.
  cluster_tiles, 256 threads, 98304 dynamic: 98304 + 1024 = 99328 per block;
      233472 / 99328 = 2 blocks: 2; 2 x 8 / 64 = 25 %; cuflight names `cluster` (placement).
  pair_exchange, 128 threads: warps 64 / 4 = 16 blocks: 16; 100 %; cuflight names `cluster`.
"""

import contextlib
import importlib.machinery
import importlib.util
import io
import json
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = pathlib.Path(os.environ.get("CUFLIGHT_SOURCE_DIR", HERE.parent.parent))
SCRIPT = SOURCE / "scripts" / "gpu_check" / "ncu_compare.py"
DATA = HERE / "data" / "ncu"
EXAMPLES = ("register_pressure", "tiny_blocks", "cluster")

sys.path.insert(0, str(SOURCE / "scripts" / "gpu_check"))
import ncu_compare  # noqa: E402


def load_gpu_check():
    """scripts/gpu-check as a module (it has no .py suffix)."""
    path = str(SOURCE / "scripts" / "gpu-check")
    loader = importlib.machinery.SourceFileLoader("gpu_check_script", path)
    spec = importlib.util.spec_from_loader("gpu_check_script", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def section_text(name):
    """The lines of data/ncu/ncu.csv under `=== name`, without that line."""
    out, inside = [], False
    for line in (DATA / "ncu.csv").read_text().splitlines():
        if line.startswith("=== "):
            inside = line[4:] == name
            continue
        if inside:
            out.append(line)
    return "\n".join(out) + "\n"


def write_script(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


class NcuCompareTest(unittest.TestCase):
    def setUp(self):
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="ncu_compare_test."))
        self.csv = self.tmp / "ncu.csv"
        self.csv.write_text((DATA / "ncu.csv").read_text())
        for name in EXAMPLES:
            (self.tmp / name).mkdir()
            shutil.copy2(DATA / name / "log.jsonl", self.tmp / name / "log.jsonl")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    # -- helpers

    def events(self, name):
        return [json.loads(l) for l in (self.tmp / name / "log.jsonl").read_text().splitlines()]

    def write_events(self, name, events):
        (self.tmp / name / "log.jsonl").write_text(
            "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))

    def edit_event(self, name, demangled_prefix, **fields):
        """Changes the kernel event of `name`'s log whose demangled name starts with
        `demangled_prefix`."""
        events = self.events(name)
        for e in events:
            if e["type"] == "kernel" and e["demangled"].startswith(demangled_prefix):
                e.update(fields)
        self.write_events(name, events)

    def drop_event(self, name, demangled_prefix):
        self.write_events(name, [e for e in self.events(name) if not (
            e["type"] == "kernel" and e["demangled"].startswith(demangled_prefix))])

    def run_compare(self, csv=None, logs=None):
        summary = self.tmp / "summary.json"
        if summary.exists():
            summary.unlink()
        logs = logs if logs is not None else [self.tmp / n for n in EXAMPLES]
        r = subprocess.run([sys.executable, str(SCRIPT), "--summary", str(summary),
                            str(csv or self.csv), *map(str, logs)],
                           capture_output=True, text=True, timeout=60)
        result = json.loads(summary.read_text()) if summary.exists() else None
        return r, result

    def rows(self, stdout):
        """Table rows as {(kernel, block): cells}, split on the two-blank column gaps."""
        lines = stdout.splitlines()
        self.assertTrue(lines and lines[0].startswith("status"), stdout)
        rows = {}
        for line in lines[1:]:
            cells = re.split(r" {2,}", line.strip())
            if len(cells) < 11:
                continue
            rows[(cells[2], cells[3])] = cells
        return rows

    # -- the comparison

    def test_the_real_excerpt_matches(self):
        r, s = self.run_compare()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(s, {"configurations": 5, "mismatched": 0, "launches": 5, "matched": 5,
                             "without_event": 0, "not_profiled": 0, "events_beyond_ncu": 0,
                             "ncu_errors": 0, "ok": True})
        rows = self.rows(r.stdout)
        # status, program, kernel, block, grid, dyn, n, blocks, limiter, occ%, regs, note
        self.assertEqual(rows[("unbounded", "128x1x1")][:11],
                         ["ok", "register_pressure", "unbounded", "128x1x1", "512x1x1", "0", "1/1",
                          "6/6", "registers/registers", "37.5/37.5", "80/80"])
        self.assertEqual(rows[("bounded", "128x1x1")][7:11],
                         ["8/8", "registers/registers", "50/50", "64/64"])
        scale = rows[("scale", "16x1x1")]
        self.assertEqual(scale[:11], ["ok", "tiny_blocks", "scale", "16x1x1", "65536x1x1", "0",
                                      "1/1", "32/32", "shared_mem+blocks/blocks", "50/50", "16/8"])
        self.assertIn("ncu's shared_mem tie is at the 32 KiB carveout the driver chose "
                      "(cuflight: the SM's 228 KiB, carveout -1)", scale[11])
        self.assertIn("registers differ; registers limit neither side", scale[11])
        tiles = rows[("cluster_tiles", "256x1x1")]
        self.assertEqual(tiles[:11], ["ok", "cluster", "cluster_tiles", "256x1x1", "64x1x1",
                                      "98304", "1/1", "2/2", "shared_mem/cluster", "25/25",
                                      "16/10"])
        self.assertIn("cluster-limited: not held against ncu (blocks/SM agree)", tiles[11])
        self.assertEqual(rows[("pair_exchange", "128x1x1")][7:10],
                         ["16/16", "warps/cluster", "100/100"])
        self.assertIn("OK ncu: 5 configurations, 0 mismatched; 5 ncu launches: 5 matched",
                      r.stdout)

    def test_a_wrong_block_count_fails(self):
        self.edit_event("register_pressure", "bounded", max_active_blocks=7)
        r, s = self.run_compare()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual((s["mismatched"], s["matched"]), (1, 5))
        row = self.rows(r.stdout)[("bounded", "128x1x1")]
        self.assertEqual(row[0], "MISMATCH")
        self.assertEqual(row[7], "8/7")
        self.assertTrue(row[11].startswith("differs: blocks"), row)
        self.assertEqual(self.rows(r.stdout)[("unbounded", "128x1x1")][0], "ok")

    def test_a_wrong_occupancy_or_limiter_fails(self):
        self.edit_event("register_pressure", "unbounded", occupancy=0.5)
        self.edit_event("register_pressure", "bounded", limiting_resource="warps",
                        limiting_resources=["warps"])
        r, s = self.run_compare()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        rows = self.rows(r.stdout)
        self.assertEqual(rows[("unbounded", "128x1x1")][9], "37.5/50")
        self.assertIn("differs: occupancy", rows[("unbounded", "128x1x1")][11])
        self.assertEqual(rows[("bounded", "128x1x1")][8], "registers/warps")
        self.assertIn("differs: limiter", rows[("bounded", "128x1x1")][11])
        self.assertEqual(s["mismatched"], 2)

    def test_a_launch_without_an_event_fails_and_is_named(self):
        self.drop_event("register_pressure", "bounded")
        r, s = self.run_compare()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual((s["without_event"], s["matched"], s["mismatched"]), (1, 4, 1))
        row = self.rows(r.stdout)[("bounded", "128x1x1")]
        self.assertEqual(row[:7], ["NO EVENT", "register_pressure", "bounded", "128x1x1",
                                   "512x1x1", "0", "0/1"])
        self.assertIn("1 ncu launch(es) of bounded(const float *, float *, int) without a "
                      "cuflight event", row[-1])

    def test_a_cluster_limited_count_is_shown_not_held(self):
        # cuflight's count differs, but it names cluster placement, which ncu's limits ignore.
        self.edit_event("cluster", "cluster_tiles", max_active_blocks=1, occupancy=0.125)
        r, s = self.run_compare()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        row = self.rows(r.stdout)[("cluster_tiles", "256x1x1")]
        self.assertEqual((row[0], row[7], row[9]), ("ok", "2/1", "25/12.5"))
        self.assertIn("cluster-limited: not held against ncu (blocks/SM differ)", row[11])
        # The same numbers with a per-SM limiter are a mismatch.
        self.edit_event("cluster", "cluster_tiles", limiting_resource="shared_mem",
                        limiting_resources=["shared_mem"])
        r, s = self.run_compare()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("differs: blocks, occupancy",
                      self.rows(r.stdout)[("cluster_tiles", "256x1x1")][11])

    def test_the_carveout_tie_is_excused_only_without_a_carveout_preference(self):
        # With a preference, cuflight counts against that carveout too: a tie must then match.
        self.edit_event("tiny_blocks", "scale", carveout=50)
        r, _ = self.run_compare()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        row = self.rows(r.stdout)[("scale", "16x1x1")]
        self.assertEqual((row[0], row[8]), ("MISMATCH", "shared_mem+blocks/blocks"))

    def test_a_register_difference_fails_only_where_registers_limit(self):
        # unbounded is register-limited: ncu's 80 against 72 is a mismatch (the counts agree).
        self.edit_event("register_pressure", "unbounded", num_regs=72)
        r, s = self.run_compare()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        row = self.rows(r.stdout)[("unbounded", "128x1x1")]
        self.assertEqual((row[0], row[7], row[10]), ("MISMATCH", "6/6", "80/72"))
        self.assertIn("differs: registers", row[11])
        self.assertEqual(s["mismatched"], 1)  # scale's 16/8 (not limiting) is only a note

    def test_a_launch_ncu_could_not_measure_is_listed_not_held(self):
        text = self.csv.read_text().splitlines()
        out = []
        for line in text:
            if line.startswith('"0","1567"'):  # the tiny_blocks launch
                line = re.sub(r'"[^"]*"$', '"n/a"', line)
            out.append(line)
        self.csv.write_text("\n".join(out) + "\n")
        r, s = self.run_compare()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((s["not_profiled"], s["matched"]), (1, 4))
        row = self.rows(r.stdout)[("scale", "16x1x1")]
        self.assertEqual(row[0], "NOT PROF")
        self.assertIn("not profiled by ncu (values n/a)", row[-1])

    def test_events_beyond_ncus_launches_are_counted_not_held(self):
        events = self.events("register_pressure")
        extra = dict(next(e for e in events if e.get("demangled", "").startswith("bounded")))
        extra["seq"] = 99
        with open(self.tmp / "register_pressure" / "log.jsonl", "a") as f:
            f.write(json.dumps(extra) + "\n")
        r, s = self.run_compare()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(s["events_beyond_ncu"], 1)

    def test_one_programs_output_without_sections(self):
        csv = self.tmp / "tiny.csv"
        csv.write_text(section_text("tiny_blocks"))
        r, s = self.run_compare(csv=csv, logs=[self.tmp / "tiny_blocks"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((s["configurations"], s["matched"]), (1, 1))
        self.assertEqual(self.rows(r.stdout)[("scale", "16x1x1")][1], "-")

    def test_a_template_spelled_differently_matches_on_the_base_name(self):
        csv = self.tmp / "tiny.csv"
        csv.write_text(section_text("tiny_blocks").replace(
            "scale(float *, float, int)", "void scale<(int)1>(float *, float, int)"))
        self.edit_event("tiny_blocks", "scale", demangled="void scale<1>(float*, float, int)")
        r, s = self.run_compare(csv=csv, logs=[self.tmp / "tiny_blocks"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("matched on the base name", self.rows(r.stdout)[("scale", "16x1x1")][-1])

    def test_unusable_input_exits_2_with_one_line(self):
        noise = self.tmp / "noise.csv"
        noise.write_text("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")
        r, _ = self.run_compare(csv=noise)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("no ncu CSV", r.stderr)
        # A section with no log of its name.
        r, _ = self.run_compare(logs=[self.tmp / "register_pressure", self.tmp / "cluster"])
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip(), "ncu_compare.py: no LOG named tiny_blocks for ncu's "
                                            "section '=== tiny_blocks'")

    def test_names_are_spelled_one_way(self):
        n = ncu_compare.normalise
        self.assertEqual(n("unbounded(const float *, float *, int)"),
                         n("unbounded(float const*, float*, int)"))
        self.assertEqual(n("void ns::k<float, 4>(const float *__restrict__, unsigned int)"),
                         n("void ns::k<float, 4>(float const* __restrict__, unsigned int)"))
        self.assertNotEqual(n("k(float *)"), n("k(double *)"))
        self.assertEqual(ncu_compare.base_name("void ns::k<float, (int)4>(float *)"), "ns::k")
        self.assertEqual(ncu_compare.base_name("scale(float *, float, int)"), "scale")
        # ncu's demangler and the ABI's (c++filt, cuflight's) on one PyTorch kernel of an H200
        # run: ncu leaves out `native::`, writes T3 for a parameter, `<unnamed>` and
        # `[lambda(...) (instance N)]`.
        ncu = ("void at::reduce_kernel<512, 1, at::ReduceOp<float, at::func_wrapper_t<float, "
               "at::sum_functor<float, float, float>::operator ()(at::TensorIterator &)::"
               "[lambda(float, float) (instance 1)]>, unsigned int, float, 4, 4>>(T3)")
        abi = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
               "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::"
               "operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, "
               "4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
               "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::"
               "{lambda(float, float)#1}>, unsigned int, float, 4, 4>)")
        self.assertNotEqual(ncu_compare.base_name(ncu), ncu_compare.base_name(abi))
        self.assertEqual(ncu_compare.function_name(ncu), "reduce_kernel")
        self.assertEqual(ncu_compare.function_name(abi), "reduce_kernel")
        self.assertEqual(ncu_compare.function_name("void <unnamed>::softmax_warp_forward<float>"
                                                   "(T2 *, const T1 *, int)"),
                         "softmax_warp_forward")
        self.assertEqual(n("x::[lambda(float) (instance 2)]"), n("x::{lambda(float)#2}"))
        self.assertEqual(n("void at::<unnamed>::k()"), n("void at::(anonymous namespace)::k()"))
        self.assertEqual(ncu_compare.parse_number("232,448"), 232448)
        self.assertIsNone(ncu_compare.parse_number("n/a"))
        self.assertEqual(ncu_compare.parse_dim("(256, 1, 1)"), (256, 1, 1))


@unittest.skipIf(subprocess.run([sys.executable, "-c", "import jsonschema"],
                                 capture_output=True).returncode != 0, "no python3-jsonschema")
class DataTest(unittest.TestCase):
    def test_event_logs_are_valid_schema_v1(self):
        for name in EXAMPLES:
            r = subprocess.run([sys.executable, str(SOURCE / "tests" / "schema" / "validate.py"),
                                str(SOURCE / "schema" / "v1"), str(DATA / name / "log.jsonl")],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, name + ": " + r.stdout + r.stderr)


class GpuCheckNcuStepTest(unittest.TestCase):
    """gpu-check's --ncu step with a stand-in ncu that prints the recorded output."""

    def setUp(self):
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="ncu_step_test."))
        self.gpu_check = load_gpu_check()
        # A build folder's examples: two that ncu runs, two it must not.
        self.build = self.gpu_check.recording.Build(self.tmp / "build")
        self.build.examples.mkdir(parents=True)
        for name in ("register_pressure", "tiny_blocks", "hang", "illegal_address"):
            write_script(self.build.examples / name, "#!/bin/sh\nexit 0\n")
        # What step 2 left: each example's cuflight logs under OUT/<example>.
        self.out = self.tmp / "out"
        for name in ("register_pressure", "tiny_blocks"):
            (self.out / name).mkdir(parents=True)
            shutil.copy2(DATA / name / "log.jsonl", self.out / name / "log.jsonl")
        for name in ("hang", "illegal_address"):
            (self.out / name).mkdir()
        # The stand-in ncu: records its arguments, prints the recorded output of the program
        # its last argument names.
        self.recorded = self.tmp / "recorded"
        self.recorded.mkdir()
        for name in ("register_pressure", "tiny_blocks"):
            (self.recorded / name).write_text(section_text(name))
        self.calls = self.tmp / "calls"
        self.ncu = self.tmp / "bin" / "ncu"
        self.ncu.parent.mkdir()
        write_script(self.ncu, '#!/bin/sh\necho "$@" >> "$FAKE_NCU_CALLS"\n'
                               'for last; do :; done\n'
                               'cat "$FAKE_NCU_RECORDED/$(basename "$last")"\n')
        self.env = dict(os.environ, FAKE_NCU_CALLS=str(self.calls),
                        FAKE_NCU_RECORDED=str(self.recorded))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_step(self, only=None, timeout=60):
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            totals = self.gpu_check.run_ncu(self.build, self.out, self.env, only, str(self.ncu),
                                            timeout)
        return totals, stdout.getvalue()

    def test_runs_ncu_on_each_example_but_hang_and_illegal_address(self):
        totals, stdout = self.run_step()
        self.assertEqual(totals, {"configurations": 3, "mismatched": 0, "failed": []}, stdout)
        calls = self.calls.read_text().splitlines()
        expected = " ".join(ncu_compare.NCU_ARGS)
        self.assertEqual(calls, [f"{expected} {self.build.examples / 'register_pressure'}",
                                 f"{expected} {self.build.examples / 'tiny_blocks'}"])
        self.assertIn("--metrics launch__occupancy_limit_registers,launch__occupancy_limit_"
                      "shared_mem,launch__occupancy_limit_warps,launch__occupancy_limit_blocks,"
                      "sm__maximum_warps_per_active_cycle_pct,launch__block_size,"
                      "launch__grid_size,launch__registers_per_thread,"
                      "launch__shared_mem_per_block_static,launch__shared_mem_per_block_dynamic,"
                      "launch__shared_mem_config_size,launch__occupancy_per_block_size", calls[0])
        self.assertTrue(calls[0].startswith("--clock-control none --launch-count 40 --csv "))
        self.assertEqual((self.out / "ncu" / "tiny_blocks.csv").read_text(),
                         section_text("tiny_blocks"))
        self.assertIn("OK ncu: 2 configurations, 0 mismatched", stdout)
        self.assertEqual(self.gpu_check.ncu_result(totals), "3 configurations, 0 mismatched")
        self.assertEqual(self.gpu_check.result_cell(True, [], totals),
                         "pass; ncu: 3 configurations, 0 mismatched")

    def test_a_mismatch_fails_the_example(self):
        log = self.out / "register_pressure" / "log.jsonl"
        log.write_text(log.read_text().replace('"max_active_blocks":8', '"max_active_blocks":9'))
        totals, stdout = self.run_step()
        self.assertEqual(totals, {"configurations": 3, "mismatched": 1,
                                  "failed": ["register_pressure"]}, stdout)
        self.assertEqual(self.gpu_check.ncu_result(totals),
                         "3 configurations, 1 mismatched; failed: register_pressure")
        self.assertEqual(self.gpu_check.result_cell(False, [], totals),
                         "FAIL; ncu: 3 configurations, 1 mismatched")

    def test_a_program_that_outlasts_the_timeout_fails(self):
        write_script(self.ncu, "#!/bin/sh\nsleep 30\n")
        totals, stdout = self.run_step(only={"tiny_blocks"}, timeout=1)
        self.assertEqual(totals["failed"], ["tiny_blocks"])
        self.assertIn("FAIL tiny_blocks: ncu did not finish in 1 s", stdout)

    def test_ncu_failing_fails_the_example(self):
        write_script(self.ncu, "#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM'\nexit 1\n")
        totals, stdout = self.run_step(only={"tiny_blocks"})
        self.assertEqual(totals["failed"], ["tiny_blocks"])
        self.assertIn("FAIL tiny_blocks: ncu exited 1: ==ERROR== ERR_NVGPUCTRPERM", stdout)

    def test_a_program_with_no_kernel_on_either_side_is_skipped(self):
        write_script(self.ncu, "#!/bin/sh\necho '==WARNING== No kernels were profiled.'\n")
        (self.out / "tiny_blocks" / "log.jsonl").write_text("")
        totals, stdout = self.run_step(only={"tiny_blocks"})
        self.assertEqual(totals, {"configurations": 0, "mismatched": 0, "failed": []}, stdout)
        self.assertIn("skipped: neither ncu nor cuflight saw a kernel of tiny_blocks", stdout)
        # cuflight saw kernels that ncu did not list: a failure.
        totals, stdout = self.run_step(only={"register_pressure"})
        self.assertEqual(totals["failed"], ["register_pressure"], stdout)
        self.assertIn("FAIL register_pressure: no ncu CSV in the input", stdout)

    def test_finding_ncu(self):
        other = self.tmp / "opt" / "nvidia" / "nsight-compute"
        for version in ("2024.1.0", "2025.3.1"):
            (other / version).mkdir(parents=True)
            write_script(other / version / "ncu", "#!/bin/sh\n")
        old_path = os.environ.get("PATH", "")
        os.environ["PATH"] = str(self.tmp / "empty")
        try:
            find = self.gpu_check.find_ncu
            self.assertEqual(find((str(self.tmp / "none" / "ncu"), str(other / "*" / "ncu"))),
                             str(other / "2025.3.1" / "ncu"))
            self.assertIsNone(find((str(self.tmp / "none" / "ncu"),)))
            os.environ["PATH"] = str(self.ncu.parent)
            self.assertEqual(find((str(other / "*" / "ncu"),)), str(self.ncu))
        finally:
            os.environ["PATH"] = old_path
        self.assertEqual(self.gpu_check.ncu_result(None), "skipped")
        self.assertEqual(self.gpu_check.result_cell(True, [], None), "pass")


if __name__ == "__main__":
    unittest.main()
