#!/usr/bin/env python3
"""CPU cost of cuflight per launch, without a GPU: the injector and the null subscriber driven by
the fake CUPTI, interleaved, R repetitions (stdlib only; see bench/overhead/README.md).

usage: bench/overhead/cpu_run.py [--build DIR] [--out DIR] [--reps R] [--launches N]
                                 [--policies all,off,...] [--intern 0,1] [--on-full block]
                                 [--baseline-inject SO]

The test program (BUILD/bin/fake_app, tests/inject/fakes) loads an injection library as the
driver does and fires N cuLaunchKernel exit callbacks through the fake libcupti
(BUILD/fake-driver), on one thread, as fast as it can. Modes:
  null subscriber   BUILD/lib/libcuflight_null_subscriber.so: subscribes, returns at once (the
                    floor of any CUPTI subscriber; here the fake's dispatch and the loop)
  cuflight, <p>     BUILD/lib/libcuflight_inject.so with CUFLIGHT_TIMING=<p>, for each <p> of
                    --policies (default all,off; add sampled where the library has it), sending
                    to a real cuflight-collector started here; with --intern V1,V2, once for each
                    value of CUFLIGHT_INTERN_CONFIGS (e.g. 0,1: whole kernel events and interned
                    configurations, docs/protocol.md), labelled "cuflight, <p>, intern <v>"
  --on-full MODE    CUFLIGHT_ON_FULL for every cuflight mode (block: every launch is sent, none
                    dropped when the sender falls behind, so the whole process's figure is the
                    cost of delivering each launch)
  baseline, <p>     with --baseline-inject SO: another build's injector, the same way
For each run it measures:
  app ns/launch     CPU time of the launching thread over the launch loop (CLOCK_THREAD_CPUTIME_ID,
                    printed by fake_app), divided by N: what the application's thread pays
  process ns/launch CPU time of the whole process (every thread: the launching thread's callbacks,
                    the sender thread's encoding and socket writes, the exit's flush), from
                    wait4()'s rusage, less the same mode's run with 0 launches (start-up and exit),
                    divided by N
  collector ns/launch  the collector's CPU time over the run (/proc/PID/task/*/schedstat), divided
                    by N
and prints medians, spreads (min..max) and ratios to the null subscriber as Markdown tables.
Every mode runs with the fake CUPTI timing the launches (FAKE_CUPTI_TIMING=0,0,0,1: the fake
keeps each launch's correlation id, under a mutex, in every mode, so that its own cost is the same
in all; once the kernel activity kind is enabled, each flush from 1 ms after the first launch
hands over the records so far, at most one activity buffer's worth per flush, the rest dropped by
the fake), so kernel_time events flow under timing policies other than off. Exit 0
when every run worked, 1 when a run failed, 2 when the build lacks something.
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


def proc_cpu_ns(pid):
    """CPU time of a live process's threads, ns: the sum of /proc/PID/task/*/schedstat's first
    field (time spent on the CPU, ns; threads that ended are not counted: the collector's live)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total


def fake_env(fake_dir, fake_cupti):
    """The environment every mode starts from: the fake driver and CUPTI, none of the variables a
    mode sets, and the fake's timing records off (FAKE_CUPTI_TIMING 0,0,0,1: the fake's own cost
    the same in every mode). ir_run.py uses it too."""
    env = dict(os.environ)
    for name in ("CUDA_INJECTION64_PATH", "CUFLIGHT_COLLECTOR", "FAKE_CUPTI_TIMING",
                 "CUFLIGHT_TIMING", "CUFLIGHT_NULL_CALLBACKS", "CUFLIGHT_INTERN_CONFIGS",
                 "CUFLIGHT_ON_FULL"):
        env.pop(name, None)
    env["LD_LIBRARY_PATH"] = str(fake_dir)
    env["CUFLIGHT_CUPTI_PATH"] = str(fake_cupti)
    env["FAKE_CUPTI_TIMING"] = "0,0,0,1"
    return env


def run_once(fake_app, library, launches, env, collector_pid):
    """(app thread CPU ns, process CPU ns, collector CPU ns) of one fake_app run."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        before = proc_cpu_ns(collector_pid) if collector_pid else 0
        proc = subprocess.Popen([str(fake_app), str(library), str(launches)], stdout=out,
                                stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        after = proc_cpu_ns(collector_pid) if collector_pid else 0
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace")
        if proc.returncode != 0:
            raise RunFailed(f"fake_app {library} exited {proc.returncode}: "
                            f"{err.read().decode(errors='replace')[-600:]}")
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    if int(values.get("fired", -1)) != launches:
        raise RunFailed(f"fake_app {library} fired {values.get('fired')} of {launches}: {text}")
    process_ns = (usage.ru_utime + usage.ru_stime) * 1e9
    return int(values["launch_cpu_ns"]), process_ns, after - before


def table(title, samples, baseline):
    base = statistics.median(samples[baseline])
    n = len(samples[baseline])
    lines = [f"**{title}** (ns per launch, median of {n}, spread min..max)", "",
             f"| mode | median | spread | ratio to {baseline} | added to {baseline} |",
             "|---|---|---|---|---|"]
    for mode, values in samples.items():
        med = statistics.median(values)
        lines.append(f"| {mode} | {med:,.1f} | {min(values):,.1f} .. {max(values):,.1f} | "
                     f"{med / base:.2f}x | {med - base:+,.1f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=str(REPO / "build" / "release"))
    parser.add_argument("--out", help="collector logs (default: a new temp dir)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--launches", type=int, default=200000)
    parser.add_argument("--policies", default="all,off",
                        help="CUFLIGHT_TIMING values, comma-separated (default all,off)")
    parser.add_argument("--intern", metavar="V1,V2",
                        help="CUFLIGHT_INTERN_CONFIGS values, comma-separated: one cuflight mode "
                             "each (default: the variable unset, the library's default)")
    parser.add_argument("--on-full", metavar="MODE",
                        help="CUFLIGHT_ON_FULL for the cuflight modes (default: unset)")
    parser.add_argument("--baseline-inject", metavar="SO",
                        help="another build's libcuflight_inject.so, measured beside this one")
    args = parser.parse_args()

    build = recording.Build(args.build)
    fake_app = build.root / "bin" / "fake_app"
    fake_dir = build.root / "fake-driver"
    fake_cupti = fake_dir / "libfake_cupti.so"
    null = build.root / "lib" / "libcuflight_null_subscriber.so"
    needed = [build.collector, build.inject, fake_app, fake_cupti, fake_dir / "libcuda.so.1", null]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        print("cpu_run.py: the build lacks " + ", ".join(missing) +
              " (targets cuflight-collector cuflight_inject fake_app fake_cupti fake_cuda_driver "
              "cuflight_null_subscriber)", file=sys.stderr)
        return 2
    baseline = pathlib.Path(args.baseline_inject).resolve() if args.baseline_inject else None
    if baseline is not None and not baseline.is_file():
        print(f"cpu_run.py: --baseline-inject {args.baseline_inject}: no such file",
              file=sys.stderr)
        return 2
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="cpu_run."))
    env = fake_env(fake_dir, fake_cupti)

    try:
        with recording.PrivateCollector(build, out / "logs", env=env,
                                        extra_args=["--retain-bytes", "1G"]) as collector:
            modes = {"null subscriber": (null, env, None)}
            interns = [v.strip() for v in (args.intern or "").split(",") if v.strip()] or [None]
            for p in policies:
                for intern in interns:
                    extra = {"CUFLIGHT_TIMING": p}
                    label = f"timing {p}"
                    if intern is not None:
                        extra["CUFLIGHT_INTERN_CONFIGS"] = intern
                        label += f", intern {intern}"
                    if args.on_full:
                        extra["CUFLIGHT_ON_FULL"] = args.on_full
                    mode_env = collector.env(extra)
                    mode_env.pop("CUDA_INJECTION64_PATH")  # fake_app loads the library itself
                    modes[f"cuflight, {label}"] = (build.inject, mode_env, collector.proc.pid)
                    if baseline is not None:
                        modes[f"baseline, {label}"] = (baseline, mode_env, collector.proc.pid)
            names = list(modes)
            app = {m: [] for m in names}
            process = {m: [] for m in names}
            coll = {m: [] for m in names if modes[m][2]}
            print(f"{args.launches:,} launches x {args.reps} reps, modes: {', '.join(names)}",
                  flush=True)
            for rep in range(args.reps):
                k = rep % len(names)
                for mode in names[k:] + names[:k]:
                    library, mode_env, pid = modes[mode]
                    _, fixed, _ = run_once(fake_app, library, 0, mode_env, None)
                    a, p, c = run_once(fake_app, library, args.launches, mode_env, pid)
                    app[mode].append(a / args.launches)
                    process[mode].append(max(0.0, p - fixed) / args.launches)
                    if pid:
                        coll[mode].append(c / args.launches)
                    print(f"  rep {rep + 1}/{args.reps} {mode}: app {app[mode][-1]:,.1f}, "
                          f"process {process[mode][-1]:,.1f}"
                          + (f", collector {coll[mode][-1]:,.1f}" if pid else "")
                          + " ns/launch", flush=True)
    except (RunFailed, RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"cpu_run.py: {e}", file=sys.stderr)
        return 1

    print()
    print(table("Application thread, CPU", app, "null subscriber"))
    print()
    print(table("Whole process, CPU (every thread)", process, "null subscriber"))
    if coll:
        print()
        first = next(iter(coll))
        print(table("cuflight-collector, CPU", coll, first))
    print()
    print(f"host {platform.node()}, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; logs in {out / 'logs'}")
    (out / "cpu_run.json").write_text(json.dumps(
        {"launches": args.launches, "reps": args.reps, "app_ns": app, "process_ns": process,
         "collector_ns": coll}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
