#!/usr/bin/env python3
"""Overhead of cuflight on a real GPU: a launch storm and a PyTorch training loop, each plain and
under the injector, interleaved, R repetitions (stdlib only; see bench/overhead/README.md).

usage: bench/overhead/run.py [--build DIR] [--out DIR] [--reps R] [--launches N]
                             [--torch-steps N] [--skip-storm] [--skip-torch]
                             [--baseline-inject SO]

Launch storm (BUILD/bin/launch_storm N): plain; under the injector with CUFLIGHT_TIMING=1 (the
default: CUPTI activity records for kernel_time events); with CUFLIGHT_TIMING=0. Target: timing
off >= 0.97x plain launches/s.
PyTorch (bench/overhead/torch_train.py): plain; under the injector (timing on, the default);
under the injector with CUFLIGHT_TIMING=0; under torch.profiler with CUDA activities (no
injector: one CUPTI client per process). Targets: injector >= 0.99x plain
steps/s, and cheaper than torch.profiler.
With --baseline-inject SO (another build's libcuflight_inject.so, e.g. of the last release), every
injector mode also runs with that library, labelled "baseline ...", interleaved with the rest:
a change's cost is told from a machine's noise only within one run.

The injector sends to a private cuflight-collector (CUDA_INJECTION64_PATH and CUFLIGHT_COLLECTOR
set here), whose logs go to OUT/logs and are capped with --retain-bytes. Within a repetition the
order of the modes rotates, so no mode always runs first. Prints, per benchmark, the median,
the spread (min..max) and the ratio of medians to plain, as a Markdown table for
docs/performance.md, and writes every sample to OUT/overhead.json. Exit 0 when every run worked
(the targets are reported, not enforced), 1 when a run failed, 2 when it cannot start.
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "scripts" / "gpu_check"))

import recording  # noqa: E402


class RunFailed(Exception):
    pass


def run_json(argv, env, timeout=1200):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env,
                       timeout=timeout)
    if r.returncode != 0:
        raise RunFailed(f"{' '.join(map(str, argv))} exited {r.returncode}: "
                        f"{r.stderr.strip()[-600:]}")
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RunFailed(f"{argv[0]} printed no result line")


def interleaved(modes, reps, measure):
    """{mode: [samples]}, running measure(mode) reps times per mode, rotating the order."""
    samples = {m: [] for m in modes}
    for rep in range(reps):
        k = rep % len(modes)
        for mode in modes[k:] + modes[:k]:
            value = measure(mode)
            samples[mode].append(value)
            print(f"  rep {rep + 1}/{reps} {mode}: {value:,.1f}", flush=True)
    return samples


def table(title, unit, samples, baseline, targets):
    base = statistics.median(samples[baseline])
    lines = [f"**{title}** ({unit}, median of {len(samples[baseline])}, spread min..max)", "",
             f"| mode | median | spread | ratio to {baseline} | target |", "|---|---|---|---|---|"]
    for mode, values in samples.items():
        med = statistics.median(values)
        lines.append(f"| {mode} | {med:,.1f} | {min(values):,.1f} .. {max(values):,.1f} | "
                     f"{med / base:.3f}x | {targets.get(mode, '')} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=str(REPO / "build" / "release"))
    parser.add_argument("--out", help="results and logs (default: a new temp dir)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--launches", type=int, default=1000000)
    parser.add_argument("--torch-steps", type=int, default=300)
    parser.add_argument("--skip-storm", action="store_true")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--baseline-inject", metavar="SO",
                        help="another build's libcuflight_inject.so, measured beside this one")
    args = parser.parse_args()

    build = recording.Build(args.build)
    if not build.collector.exists() or not build.inject.exists():
        print(f"run.py: {args.build} lacks bin/cuflight-collector or lib/libcuflight_inject.so",
              file=sys.stderr)
        return 2
    if not args.skip_storm and not build.launch_storm.exists():
        print(f"run.py: {args.build} lacks bin/launch_storm (built with the examples)",
              file=sys.stderr)
        return 2
    baseline = None
    if args.baseline_inject:
        baseline = pathlib.Path(args.baseline_inject).resolve()
        if not baseline.is_file():
            print(f"run.py: --baseline-inject {args.baseline_inject}: no such file",
                  file=sys.stderr)
            return 2
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="overhead."))
    out.mkdir(parents=True, exist_ok=True)
    plain_env = dict(os.environ)
    for name in ("CUDA_INJECTION64_PATH", "CUFLIGHT_COLLECTOR"):
        plain_env.pop(name, None)
    results = {"host": platform.node(), "reps": args.reps}
    tables = []

    def with_baseline(modes, injected):
        """modes, plus a "baseline ..." copy of each injected mode when --baseline-inject."""
        if baseline is None:
            return modes
        more = {}
        for mode in injected:
            argv, env = modes[mode]
            more["baseline " + mode] = (argv, dict(env, CUDA_INJECTION64_PATH=str(baseline)))
        return {**modes, **more}

    try:
        with recording.PrivateCollector(build, out / "logs", env=plain_env,
                                        extra_args=["--retain-bytes", "4G"]) as collector:
            if not args.skip_storm:
                print(f"launch storm: {args.launches:,} launches x {args.reps} reps", flush=True)
                argv = [build.launch_storm, args.launches]
                runs = with_baseline(
                    {"plain": (argv, plain_env),
                     "injector, timing on": (argv, collector.env({"CUFLIGHT_TIMING": "1"})),
                     "injector, timing off": (argv, collector.env({"CUFLIGHT_TIMING": "0"}))},
                    ["injector, timing on", "injector, timing off"])
                storm = interleaved(list(runs), args.reps, lambda m: run_json(
                    runs[m][0], runs[m][1])["launches_per_s"])
                results["launch_storm"] = {"launches": args.launches, "launches_per_s": storm}
                tables.append(table("Launch storm", "launches/s", storm, "plain",
                                    {"injector, timing off": ">= 0.97x"}))
            if not args.skip_torch:
                print(f"PyTorch training loop: {args.torch_steps} steps x {args.reps} reps",
                      flush=True)
                script = REPO / "bench" / "overhead" / "torch_train.py"
                base = [sys.executable, script, "--steps", args.torch_steps]
                runs = with_baseline(
                    {"plain": (base, plain_env),
                     "injector": (base, collector.env()),
                     "injector, timing off": (base, collector.env({"CUFLIGHT_TIMING": "0"})),
                     "torch.profiler": (base + ["--profiler"], plain_env)},
                    ["injector", "injector, timing off"])
                steps = interleaved(list(runs), args.reps, lambda m: run_json(
                    runs[m][0], runs[m][1])["steps_per_s"])
                results["torch"] = {"steps": args.torch_steps, "steps_per_s": steps}
                tables.append(table("PyTorch training loop", "steps/s", steps, "plain",
                                    {"injector": ">= 0.99x, above torch.profiler"}))
    except (RunFailed, RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 1
    (out / "overhead.json").write_text(json.dumps(results, indent=1) + "\n")
    print("\n" + "\n\n".join(tables) + "\n")
    print(f"samples: {out / 'overhead.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
