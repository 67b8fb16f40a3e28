#!/usr/bin/env python3
"""Instructions cuflight executes per launch, without a GPU: callgrind's count, steady on a shared machine.

usage: bench/overhead/ir_run.py [--build DIR] [--launches N] [--intern V] [--on-full MODE]
                                [--baseline-inject SO] [--top K]

The set-up of cpu_run.py (BUILD/bin/fake_app firing N cuLaunchKernel exit callbacks through the
fake CUPTI into BUILD/lib/libcuflight_inject.so, timing off, a real cuflight-collector started
here receiving), run under `valgrind --tool=callgrind`: instructions executed (Ir) by every
thread of the process, less the same run with 0 launches, divided by N. Instructions are not
time (cache misses and the kernel's side of system calls are not in them, and valgrind runs the
threads one at a time, which changes how lines batch), but they do not move with the machine's
load, so a change too small for cpu_run.py's noise shows here. With --baseline-inject, another
build's library is counted the same way beside this one; --top K lists the K functions of the
injected library with the most instructions per launch. Needs valgrind. Exit 0 when every run
worked, 1 when a run failed, 2 when something is missing.
"""

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "scripts" / "gpu_check"))

import recording  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import cpu_run  # noqa: E402


def count(fake_app, library, launches, env, out):
    """(total Ir, callgrind output file) of one fake_app run under callgrind."""
    cg = out / f"callgrind.{os.getpid()}.{abs(hash((str(library), launches)))}.out"
    proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}",
                           str(fake_app), str(library), str(launches)],
                          env=env, capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or m is None:
        raise RuntimeError(f"fake_app {library} {launches} under callgrind exited "
                           f"{proc.returncode}: {proc.stderr[-600:]}")
    return int(m.group(1)), cg


def strip_arguments(name):
    """A demangled function name without its argument list (the last balanced parentheses)."""
    end = name.rstrip()
    if end.endswith(" const"):
        end = end[:-6]
    if not end.endswith(")"):
        return name
    depth = 0
    for i in range(len(end) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(end[i], 0)
        if depth == 0:
            return end[:i]
    return name


def top_functions(cg, library, launches, k):
    """The k functions of `library` with the most instructions, per launch."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", str(cg)],
                          capture_output=True, text=True).stdout
    rows = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+\?\?\?:(.*) \[(.*)\]$", line)
        if m and pathlib.Path(m.group(3)).name == pathlib.Path(library).name:
            name = strip_arguments(m.group(2))
            rows.append((int(m.group(1).replace(",", "")) / launches, name))
    return sorted(rows, reverse=True)[:k]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=str(REPO / "build" / "release"))
    parser.add_argument("--launches", type=int, default=100000)
    parser.add_argument("--intern", default="1", help="CUFLIGHT_INTERN_CONFIGS (default 1)")
    parser.add_argument("--on-full", default="block", metavar="MODE",
                        help="CUFLIGHT_ON_FULL (default block: every launch is sent)")
    parser.add_argument("--baseline-inject", metavar="SO",
                        help="another build's libcuflight_inject.so, counted beside this one")
    parser.add_argument("--top", type=int, default=0, metavar="K")
    args = parser.parse_args()

    build = recording.Build(args.build)
    fake_app = build.root / "bin" / "fake_app"
    fake_dir = build.root / "fake-driver"
    needed = [build.collector, build.inject, fake_app, fake_dir / "libfake_cupti.so",
              fake_dir / "libcuda.so.1"]
    missing = [str(p) for p in needed if not p.exists()]
    if missing or shutil.which("valgrind") is None:
        print("ir_run.py: missing " + ", ".join(missing or ["valgrind"]) +
              " (targets cuflight-collector cuflight_inject fake_app fake_cupti fake_cuda_driver)",
              file=sys.stderr)
        return 2
    libraries = {"cuflight": build.inject}
    if args.baseline_inject:
        baseline = pathlib.Path(args.baseline_inject).resolve()
        if not baseline.is_file():
            print(f"ir_run.py: --baseline-inject {args.baseline_inject}: no such file",
                  file=sys.stderr)
            return 2
        libraries["baseline"] = baseline
    env = cpu_run.fake_env(fake_dir, fake_dir / "libfake_cupti.so")
    out = pathlib.Path(tempfile.mkdtemp(prefix="ir_run."))
    try:
        with recording.PrivateCollector(build, out / "logs", env=env,
                                        extra_args=["--retain-bytes", "1G"]) as collector:
            mode_env = collector.env({"CUFLIGHT_TIMING": "off",
                                      "CUFLIGHT_INTERN_CONFIGS": args.intern,
                                      "CUFLIGHT_ON_FULL": args.on_full})
            mode_env.pop("CUDA_INJECTION64_PATH")  # fake_app loads the library itself
            print(f"{args.launches:,} launches, timing off, intern {args.intern}, on full "
                  f"{args.on_full}: instructions per launch (callgrind Ir, every thread)", flush=True)
            for label, library in libraries.items():
                fixed, _ = count(fake_app, library, 0, mode_env, out)
                total, cg = count(fake_app, library, args.launches, mode_env, out)
                print(f"  {label}: {(total - fixed) / args.launches:,.1f}", flush=True)
                for ir, name in top_functions(cg, library, args.launches, args.top):
                    print(f"      {ir:8,.1f}  {name}")
    except RuntimeError as e:
        print(f"ir_run.py: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
