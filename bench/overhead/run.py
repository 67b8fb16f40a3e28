#!/usr/bin/env python3
"""Overhead of cuflight on a real GPU: a launch storm, a poll-heavy program and a PyTorch training
loop, each plain, under a CUPTI subscriber that does nothing and under cuflight in each setting,
interleaved, R repetitions (stdlib only; see bench/overhead/README.md).

usage: bench/overhead/run.py [--build DIR] [--out DIR] [--reps R] [--launches N]
                             [--torch-steps N] [--poll-seconds S] [--only storm,poll,torch]
                             [--modes KEY,...] [--skip-storm] [--skip-torch]
                             [--baseline-inject SO] [--dry-run]

The matrix (docs: issue "Measured on a GPU"), the same modes for every benchmark:
  plain            no injection library
  null-none        BUILD/lib/libcuflight_null_subscriber.so with CUFLIGHT_NULL_CALLBACKS=none
  null-launches    ... =launches (the injector's subscription with CUFLIGHT_API_ERRORS=launches)
  null-default     ... =default (the injector's default subscription: the same callback ids as
                   the cuflight modes below)
  null-all         ... =all (the whole driver domain)
  all, sampled, off  cuflight with CUFLIGHT_TIMING=all / sampled / off
  stall-off        cuflight, sampled, CUFLIGHT_STALL_MS=0
  activity-off     cuflight, sampled with only the start window: CUFLIGHT_TIMING_NEW_CONFIGS=0
                   and CUFLIGHT_TIMING_PERIOD_MS=86400000 (a periodic window once a day), so
                   kernel activity is enabled for the first 100 ms and then disabled: what
                   remains after it is disabled
  profiler         torch.profiler with CUDA activities (PyTorch loop only; no injector: CUPTI
                   takes one client per process)
Launch storm: BUILD/bin/launch_storm N, launches/s. Poll-heavy: BUILD/bin/poll_heavy --seconds S,
cudaStreamQuery calls/s of its polling thread (launches/s of its 12 launching threads kept in
the samples). PyTorch: bench/overhead/torch_train.py, steps/s.
Goals, ratios to plain in one run (reported, not enforced): PyTorch loop >= 0.99x with sampled
and >= 0.90x with all; launch storm with sampled within 0.02 of null-default (the same callback
ids); poll-heavy >= 0.98x of its query rate with sampled.
With --baseline-inject SO (another build's libcuflight_inject.so, e.g. of the last release), every
cuflight mode also runs with that library, labelled "baseline ...", interleaved with the rest:
a change's cost is told from a machine's noise only within one run.
--dry-run prints the modes and commands (the environment each adds) and runs nothing.

cuflight sends to a private cuflight-collector (CUDA_INJECTION64_PATH and CUFLIGHT_COLLECTOR
set here), whose logs go to OUT/logs and are capped with --retain-bytes. Within a repetition the
order of the modes rotates, so no mode always runs first. Prints, per benchmark, the median,
the spread (min..max) and the ratio of medians to plain, as a Markdown table for
docs/performance.md, and the goals with their measured values, and writes every sample to
OUT/overhead.json. Exit 0 when every run worked (the targets are reported, not enforced), 1 when
a run failed, 2 when it cannot start.
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


# The matrix: key -> (label, kind, environment). kind: plain (nothing injected), null (the null
# subscriber), cuflight (this build's injector, sending to the private collector), profiler.
SAMPLED = {"CUFLIGHT_TIMING": "sampled"}
MODES = {
    "plain": ("plain", "plain", {}),
    "null-none": ("null none", "null", {"CUFLIGHT_NULL_CALLBACKS": "none"}),
    "null-launches": ("null launches", "null", {"CUFLIGHT_NULL_CALLBACKS": "launches"}),
    "null-default": ("null default", "null", {"CUFLIGHT_NULL_CALLBACKS": "default"}),
    "null-all": ("null all", "null", {"CUFLIGHT_NULL_CALLBACKS": "all"}),
    "all": ("timing all", "cuflight", {"CUFLIGHT_TIMING": "all"}),
    "sampled": ("timing sampled", "cuflight", SAMPLED),
    "off": ("timing off", "cuflight", {"CUFLIGHT_TIMING": "off"}),
    "stall-off": ("sampled, stall off", "cuflight", dict(SAMPLED, CUFLIGHT_STALL_MS="0")),
    # schema/env/README.md: CUFLIGHT_TIMING_PERIOD_MS in [100, 86400000]; with no new-config
    # windows only the start window (CUFLIGHT_TIMING_WINDOW_MS, 100 ms) opens and closes.
    "activity-off": ("activity on then off", "cuflight",
                     dict(SAMPLED, CUFLIGHT_TIMING_NEW_CONFIGS="0",
                          CUFLIGHT_TIMING_PERIOD_MS="86400000")),
    "profiler": ("torch.profiler", "profiler", {}),
}
BENCHMARKS = ("storm", "poll", "torch")


def goals(bench):
    """[(description, mode key, function of {key: ratio to plain} -> (value text, met))]."""
    def at_least(key, floor):
        return lambda r: (f"{r[key]:.3f}x", r[key] >= floor)
    if bench == "storm":
        return [("timing sampled within 0.02 of null default (same callback ids)", "sampled",
                 lambda r: (f"{r['sampled'] - r['null-default']:+.3f}",
                            r["sampled"] - r["null-default"] >= -0.02))]
    if bench == "poll":
        return [("query rate with timing sampled >= 0.98x", "sampled", at_least("sampled", 0.98))]
    return [("timing sampled >= 0.99x", "sampled", at_least("sampled", 0.99)),
            ("timing all >= 0.90x", "all", at_least("all", 0.90)),
            ("timing sampled above torch.profiler", "profiler",
             lambda r: (f"{r['sampled']:.3f}x vs {r['profiler']:.3f}x",
                        r["sampled"] > r["profiler"]))]


def goal_lines(bench, medians):
    """The goals whose modes ran, each with its measured value: Markdown list lines."""
    ratios = {k: v / medians["plain"] for k, v in medians.items()}
    lines = []
    for text, key, check in goals(bench):
        needed = {key, "plain"} | ({"null-default"} if bench == "storm" else set()) | \
            ({"sampled"} if key == "profiler" else set())
        if not needed <= set(ratios):
            lines.append(f"- goal: {text}: not measured (a mode it needs was left out)")
            continue
        value, met = check(ratios)
        lines.append(f"- goal: {text}: {value}, {'met' if met else 'NOT met'}")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=str(REPO / "build" / "release"))
    parser.add_argument("--out", help="results and logs (default: a new temp dir)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--launches", type=int, default=1000000)
    parser.add_argument("--torch-steps", type=int, default=300)
    parser.add_argument("--poll-seconds", type=float, default=5)
    parser.add_argument("--only", default=",".join(BENCHMARKS),
                        help="benchmarks to run, of storm,poll,torch (default all)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="mode keys to run (default all; plain always runs): "
                        + ",".join(MODES))
    parser.add_argument("--skip-storm", action="store_true")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--baseline-inject", metavar="SO",
                        help="another build's libcuflight_inject.so, measured beside this one")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the modes and commands, run nothing")
    args = parser.parse_args()

    benches = [b.strip() for b in args.only.split(",") if b.strip()]
    keys = [k.strip() for k in args.modes.split(",") if k.strip()]
    bad = [b for b in benches if b not in BENCHMARKS] + [k for k in keys if k not in MODES]
    if bad:
        print(f"run.py: unknown benchmark or mode: {', '.join(bad)} (benchmarks: "
              f"{','.join(BENCHMARKS)}; modes: {','.join(MODES)})", file=sys.stderr)
        return 2
    if args.skip_storm and "storm" in benches:
        benches.remove("storm")
    if args.skip_torch and "torch" in benches:
        benches.remove("torch")
    keys = ["plain"] + [k for k in MODES if k in keys and k != "plain"]
    build = recording.Build(args.build)
    programs = {"storm": build.launch_storm, "poll": build.poll_heavy}
    needs = [build.collector, build.inject] + [programs[b] for b in benches if b in programs]
    if any(MODES[k][1] == "null" for k in keys):
        needs.append(build.null_subscriber)
    missing = [str(p) for p in needs if not p.exists()]
    if missing and not args.dry_run:
        print(f"run.py: missing {', '.join(missing)} (build the examples, launch_storm, "
              "poll_heavy and cuflight_null_subscriber; or leave them out with --only/--modes)",
              file=sys.stderr)
        return 2
    baseline = None
    if args.baseline_inject:
        baseline = pathlib.Path(args.baseline_inject).resolve()
        if not baseline.is_file() and not args.dry_run:
            print(f"run.py: --baseline-inject {args.baseline_inject}: no such file",
                  file=sys.stderr)
            return 2
    plain_env = dict(os.environ)
    for name in ("CUDA_INJECTION64_PATH", "CUFLIGHT_COLLECTOR"):
        plain_env.pop(name, None)

    def runs_for(bench, collector_env):
        """{label: (key, argv, env)} for one benchmark, in matrix order."""
        if bench == "storm":
            argv = [build.launch_storm, args.launches]
        elif bench == "poll":
            argv = [build.poll_heavy, "--seconds", args.poll_seconds]
        else:
            argv = [sys.executable, REPO / "bench" / "overhead" / "torch_train.py", "--steps",
                    args.torch_steps]
        runs, copies = {}, {}
        for key in keys:
            label, kind, extra = MODES[key]
            if kind == "profiler":
                if bench == "torch":
                    runs[label] = (key, argv + ["--profiler"], plain_env)
            elif kind == "plain":
                runs[label] = (key, argv, plain_env)
            elif kind == "null":
                runs[label] = (key, argv, dict(plain_env, CUDA_INJECTION64_PATH=str(
                    build.null_subscriber), **extra))
            else:
                runs[label] = (key, argv, collector_env(extra))
                if baseline is not None:
                    copies["baseline " + label] = (
                        "baseline " + key, argv,
                        dict(collector_env(extra), CUDA_INJECTION64_PATH=str(baseline)))
        return {**runs, **copies}

    if args.dry_run:
        def placeholder_env(extra):
            return dict(plain_env, CUDA_INJECTION64_PATH=str(build.inject),
                        CUFLIGHT_COLLECTOR="<private collector socket>", **extra)
        for bench in benches:
            print(f"{bench}:")
            for label, (key, argv, env) in runs_for(bench, placeholder_env).items():
                added = " ".join(f"{k}={v}" for k, v in sorted(env.items())
                                 if plain_env.get(k) != v)
                print(f"  {key} [{label}]: {added + ' ' if added else ''}"
                      f"{' '.join(map(str, argv))}")
            for text, _, _ in goals(bench):
                print(f"  goal: {text}")
        if missing:
            print(f"missing here: {', '.join(missing)}")
        return 0

    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="overhead."))
    out.mkdir(parents=True, exist_ok=True)
    results = {"host": platform.node(), "reps": args.reps}
    tables = []
    # name in overhead.json and the table, unit, the JSON member measured
    about = {"storm": ("launch_storm", "Launch storm", "launches/s", "launches_per_s"),
             "poll": ("poll_heavy", "Poll-heavy program", "cudaStreamQuery/s", "queries_per_s"),
             "torch": ("torch", "PyTorch training loop", "steps/s", "steps_per_s")}
    try:
        with recording.PrivateCollector(build, out / "logs", env=plain_env,
                                        extra_args=["--retain-bytes", "4G"]) as collector:
            for bench in benches:
                name, title, unit, member = about[bench]
                runs = runs_for(bench, collector.env)
                print(f"{title}: {len(runs)} modes x {args.reps} reps", flush=True)
                lines = {}

                def measure(label):
                    line = run_json(runs[label][1], runs[label][2])
                    lines.setdefault(label, []).append(line)
                    return line[member]
                samples = interleaved(list(runs), args.reps, measure)
                results[name] = {"modes": {label: runs[label][0] for label in runs},
                                 member: samples, "lines": lines}
                if bench == "storm":
                    results[name]["launches"] = args.launches
                elif bench == "torch":
                    results[name]["steps"] = args.torch_steps
                else:
                    results[name]["seconds"] = args.poll_seconds
                medians = {runs[label][0]: statistics.median(v) for label, v in samples.items()}
                targets = {}
                for text, key, _ in goals(bench):
                    label = MODES[key][0]
                    targets[label] = "; ".join(filter(None, [targets.get(label), text]))
                tables.append(table(title, unit, samples, "plain", targets) + "\n\n" +
                              "\n".join(goal_lines(bench, medians)))
    except (RunFailed, RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 1
    (out / "overhead.json").write_text(json.dumps(results, indent=1) + "\n")
    print("\n" + "\n\n".join(tables) + "\n")
    print(f"samples: {out / 'overhead.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
