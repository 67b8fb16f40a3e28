#!/usr/bin/env python3
"""Runs every example program once, without cuflight, and checks what it says about itself.

usage: examples_test.py EXAMPLES_DIR

Without a CUDA device each program must print exactly "no CUDA device" on stderr, nothing on
stdout, and exit 69. With one, each must exit 0 (illegal_address: 3, having faulted on purpose)
and print only ground-truth lines (the fields examples/common/ground_truth.h names), notes, and
(hang) the line naming the kernel it stalls on.
"""

import json
import pathlib
import subprocess
import sys
import unittest

NO_DEVICE = 69
FAULTED = 3
PROGRAMS = ["block_reduce", "cluster", "cooperative", "driver_launch_ex", "graph_replay", "hang",
            "illegal_address", "large_dynamic_smem", "multi_stream", "register_pressure",
            "tiny_blocks"]
# Arguments each program runs with (hang: released after 1 s instead of 3).
ARGS = {"hang": ["1"]}
FIELDS = {"kernel": str, "grid": list, "block": list, "dyn_smem": int, "launches": int,
          "max_active_blocks": int, "reference_max_active_blocks": int,
          "limiting_resource": str, "limiting_resources": list, "carveout": int}
RESOURCES = {"registers", "shared_mem", "warps", "blocks", "barriers", "cluster"}
EXAMPLES = None


class ExamplesTest(unittest.TestCase):
    def test_every_program_is_built(self):
        for name in PROGRAMS:
            self.assertTrue((EXAMPLES / name).is_file(), name)

    def test_each_program_reports_itself(self):
        for name in PROGRAMS:
            with self.subTest(program=name):
                r = subprocess.run([str(EXAMPLES / name), *ARGS.get(name, [])],
                                   capture_output=True, text=True, timeout=120)
                if r.returncode == NO_DEVICE:
                    self.assertEqual((r.stdout, r.stderr), ("", "no CUDA device\n"))
                    continue
                expected = FAULTED if name == "illegal_address" else 0
                self.assertEqual(r.returncode, expected, r.stderr)
                lines = r.stdout.splitlines()
                self.assertTrue(lines, "no ground truth")
                for line in lines:
                    obj = json.loads(line)
                    if "note" in obj:
                        continue
                    if "stall_kernel" in obj:  # hang: the kernel a stall report must name
                        self.assertIsInstance(obj["stall_kernel"], str, line)
                        self.assertTrue(obj["stall_kernel"], line)
                        self.assertEqual(obj.get("release_after_s"), 1, line)
                        continue
                    for field, kind in FIELDS.items():
                        self.assertIsInstance(obj.get(field), kind, f"{field} in {line}")
                    self.assertIn(obj["limiting_resource"], RESOURCES, line)
                    self.assertGreater(obj["launches"], 0, line)


if __name__ == "__main__":
    EXAMPLES = pathlib.Path(sys.argv.pop(1))
    unittest.main()
