#!/usr/bin/env python3
"""Compares cuflight's kernel events with a program's own ground truth (stdlib only).

usage:
  compare.py kernels --truth FILE --log PATH [--log PATH ...] [--summary FILE]
  compare.py fault-review --truth FILE --report FILE --log PATH [--log PATH ...] [--summary FILE]
  compare.py names --profiler FILE --log PATH [--log PATH ...] [--summary FILE]
  compare.py stall --truth FILE --log PATH [--log PATH ...] [--summary FILE]

kernels: FILE holds the program's stdout; its ground-truth lines (JSON objects with a "kernel"
key, format in examples/common/ground_truth.h) are read and every other line is ignored. A
configuration is (kernel, grid, block, dyn_smem, cluster, graph); an event belongs to it when its
`name` (mangled) equals the ground truth's kernel, or its `demangled` name does (whole, or up to
the parameter list), and the rest of the key is equal ("graph" means the event has a graph_id).
Each configuration must have exactly `launches` events, each with the ground truth's
max_active_blocks and limiting_resource (and cooperative=true where the ground truth says so).
Prints one table row per ground-truth line, then one per kind of event nothing expected, and
exits 0 when everything matched, 1 on any mismatch, missed launch (fewer events than launches)
or extra event (more events than launches, or an event no line expects). A program that faults
on purpose is held to the same: its launches were recorded before the fault.

fault-review: FILE (--report) is `cuflight report --json` of a faulting program's logs; its
review section (processes that crashed, were lost or ended in a failed CUDA call) must name a
ground-truth kernel among a stream's last launches. Exits 0 when it does, 1 when not.

stall: FILE holds the stdout of a program that stalls on purpose (examples/hang.cu): its line
{"stall_kernel": NAME, ...} names the kernel it stalls on. Among the logs' stall events (docs/
protocol.md, "Stalls"), one with state stalled must name NAME (mangled, or its demangled name up
to the parameter list) as the oldest unfinished launch of its longest-waiting stream, and a
resolved event must follow it. Exits 0 when both hold, 1 when not.

names: FILE is torch_layers.py's profiler listing ({"kernels": {name: count}}, the kernels
torch.profiler saw). Every such kernel must appear among cuflight's kernel events at least as
many times (matched on the demangled name, whitespace ignored, or the mangled name); exits 1
when one is missing. Kernels cuflight saw more often are listed but are not a failure.

A log PATH is a log file or a directory searched recursively for *.jsonl and *.jsonl.zst
(decompressed with the zstd command). --summary writes the counts as one JSON object.
Exit status 2: bad usage or unreadable input, with one line on stderr.
"""

import argparse
import collections
import json
import pathlib
import subprocess
import sys

FAIL_INPUT = 2
# The review's "finished": true, false, or null when the log cannot tell (docs/report.md).
FINISHED_WORDS = {True: "yes", False: "no"}


class InputError(Exception):
    """Input that cannot be read: reported as one line, exit 2."""


# ----------------------------------------------------------------------------------------------
# Reading


def log_files(paths):
    """The log files named by `paths` (files as given, directories searched), sorted."""
    files = []
    for p in paths:
        path = pathlib.Path(p)
        if path.is_dir():
            found = sorted(
                q for q in path.rglob("*")
                if q.is_file() and (q.name.endswith(".jsonl") or q.name.endswith(".jsonl.zst")))
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(f"{p}: no such file or directory")
    if not files:
        raise InputError("no log file (*.jsonl, *.jsonl.zst) in " + ", ".join(map(str, paths)))
    return files


def read_text(path):
    if path.name.endswith(".zst"):
        try:
            out = subprocess.run(["zstd", "-dc", str(path)], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as e:
            raise InputError(f"{path}: cannot decompress with zstd: {e}") from e
        return out.stdout.decode("utf-8", errors="replace")
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from e


# The header members of a kernel_config, which its launches' own replace (docs/protocol.md,
# "Interned configurations").
CONFIG_OWN = ("type", "version", "ts_ns", "pid", "seq", "config")


def expand_launch(config, launch):
    """The kernel event a launch line stands for: its configuration's members, then its own
    (schema::Expand, schema/include/cuflight/schema/config_expander.h)."""
    event = {k: v for k, v in config.items() if k not in CONFIG_OWN}
    event.update({k: v for k, v in launch.items() if k not in ("type", "config")})
    event["type"] = "kernel"
    return event


def read_events(paths, event_type="kernel"):
    """Events of `event_type` in the logs, in file order. Torn or non-JSON lines are skipped.
    Each file is read as a sequence of interned configurations (docs/protocol.md): its
    kernel_config lines are remembered and each launch line is read as the kernel event it stands
    for (a launch whose description the file lacks is skipped, as every reader refuses it)."""
    events = []
    for path in log_files(paths):
        configs = {}
        for line in read_text(path).splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            kind = obj.get("type")
            if kind == "kernel_config":
                configs.setdefault((obj.get("pid"), obj.get("config")), obj)
                continue
            if kind == "launch" and event_type == "kernel":
                config = configs.get((obj.get("pid"), obj.get("config")))
                if config is None:
                    continue
                obj, kind = expand_launch(config, obj), "kernel"
            if kind == event_type:
                events.append(obj)
    return events


def read_truth(path):
    """(ground-truth lines, notes) from a program's stdout."""
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from e
    return parse_truth(text)


def parse_truth(text):
    truths, notes = [], []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if "kernel" in obj:
            for field in ("grid", "block", "launches", "max_active_blocks", "limiting_resource"):
                if field not in obj:
                    raise InputError(f"{path_hint(obj)}: ground-truth line lacks '{field}'")
            truths.append(obj)
        elif "note" in obj:
            notes.append(str(obj["note"]))
    return truths, notes


def path_hint(obj):
    return str(obj.get("kernel", "?"))


# ----------------------------------------------------------------------------------------------
# Matching


def dim(value):
    return tuple(int(v) for v in value) if value is not None else None


def truth_key(t):
    return (dim(t["grid"]), dim(t["block"]), int(t.get("dyn_smem", 0)), dim(t.get("cluster")),
            bool(t.get("graph", False)))


def event_key(e):
    return (dim(e.get("grid")), dim(e.get("block")), int(e.get("dyn_shared_bytes", 0)),
            dim(e.get("cluster")), e.get("graph_id") is not None)


def name_matches(kernel, event):
    if event.get("name") == kernel:
        return True
    demangled = event.get("demangled") or ""
    return demangled == kernel or demangled.split("(", 1)[0] == kernel


def value_of(e):
    return (e.get("max_active_blocks"), e.get("limiting_resource"), bool(e.get("cooperative")))


def expected_value(t):
    return (int(t["max_active_blocks"]), t["limiting_resource"], bool(t.get("cooperative", False)))


class Row:
    """One ground-truth line and the events assigned to it."""

    def __init__(self, truth):
        self.truth = truth
        self.matched = []     # events with the expected values
        self.mismatched = []  # events of this configuration with other values
        self.extra = 0        # events of this configuration beyond its launches

    @property
    def launches(self):
        return int(self.truth["launches"])

    @property
    def seen(self):
        return len(self.matched) + len(self.mismatched)

    @property
    def missed(self):
        return max(0, self.launches - self.seen)

    def status(self):
        if self.mismatched:
            return "MISMATCH"
        if self.missed:
            return "MISSED"
        if self.extra:
            return "EXTRA"
        return "ok"


def match_kernels(truths, events):
    """Assigns events to ground-truth lines. Returns (rows, unexpected events)."""
    rows = [Row(t) for t in truths]
    groups = collections.OrderedDict()  # (kernel, key) -> rows
    for row in rows:
        groups.setdefault((row.truth["kernel"], truth_key(row.truth)), []).append(row)
    by_group = collections.OrderedDict((g, []) for g in groups)
    unexpected = []
    for e in events:
        key = event_key(e)
        for (kernel, gkey) in groups:
            if gkey == key and name_matches(kernel, e):
                by_group[(kernel, gkey)].append(e)
                break
        else:
            unexpected.append(e)
    for group, group_events in by_group.items():
        group_rows = groups[group]
        pending = []
        # Events with the values a line expects fill that line first (a configuration may recur
        # with different answers, e.g. after a carveout change), then the rest fill what is left.
        for e in group_events:
            for row in group_rows:
                if len(row.matched) < row.launches and value_of(e) == expected_value(row.truth):
                    row.matched.append(e)
                    break
            else:
                pending.append(e)
        for e in pending:
            for row in group_rows:
                if row.seen < row.launches:
                    row.mismatched.append(e)
                    break
            else:
                group_rows[-1].extra += 1
    return rows, unexpected


# ----------------------------------------------------------------------------------------------
# Output


def short(name, width=44):
    return name if len(name) <= width else name[:width - 3] + "..."


def fmt_dim(d):
    return "x".join(str(v) for v in d) if d else "-"


def distinct(values):
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return ",".join(str(v) for v in out) if out else "-"


def display_name(truth, events):
    for e in events:
        if e.get("demangled"):
            return e["demangled"].split("(", 1)[0]
    return truth["kernel"]


def print_table(rows, out):
    widths = [8, 44, 10, 10, 7, 9, 13, 22]
    header = ["status", "kernel", "grid", "block", "dyn", "launches", "max_blocks", "limiting"]

    def emit(cells):
        out.write("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip() + "\n")

    emit(header)
    for cells in rows:
        emit(cells)


def kernel_rows(rows, unexpected):
    table = []
    for row in rows:
        t, events = row.truth, row.matched + row.mismatched
        exp_mab, exp_lr = t["max_active_blocks"], t["limiting_resource"]
        seen_mab = distinct(e.get("max_active_blocks") for e in events)
        seen_lr = distinct(e.get("limiting_resource") for e in events)
        kernel = display_name(t, events)
        if t.get("cluster"):
            kernel += " [cluster " + fmt_dim(dim(t["cluster"])) + "]"
        if t.get("graph"):
            kernel += " [graph]"
        if t.get("cooperative"):
            kernel += " [coop]"
        launches = f"{row.seen + row.extra}/{row.launches}"
        table.append([row.status(), short(kernel), fmt_dim(dim(t["grid"])),
                      fmt_dim(dim(t["block"])), t.get("dyn_smem", 0), launches,
                      f"{seen_mab}/{exp_mab}", f"{seen_lr}/{exp_lr}"])
    extra = collections.Counter()
    names = {}
    for e in unexpected:
        key = (e.get("name"),) + event_key(e)
        extra[key] += 1
        names[key] = (e.get("demangled") or e.get("name") or "?").split("(", 1)[0]
    for key, count in extra.items():
        grid, block, dyn = key[1], key[2], key[3]
        table.append(["EXTRA", short(names[key]), fmt_dim(grid), fmt_dim(block), dyn,
                      f"{count}/0", "-", "-"])
    return table


def compare_kernels(truths, events, out):
    """Prints the comparison and returns its summary dict (summary["ok"] is the verdict)."""
    rows, unexpected = match_kernels(truths, events)
    print_table(kernel_rows(rows, unexpected), out)
    for row in rows:
        t = row.truth
        ref = t.get("reference_max_active_blocks")
        if ref is not None and int(ref) != int(t["max_active_blocks"]):
            out.write(f"note: for {t['kernel']} block {fmt_dim(dim(t['block']))} the reference "
                      f"calculator says {ref} blocks/SM and the driver {t['max_active_blocks']}\n")
    summary = {
        "configurations": len(rows),
        "launches": sum(r.launches for r in rows),
        "events": len(events),
        "matched": sum(len(r.matched) for r in rows),
        "mismatched": sum(len(r.mismatched) for r in rows),
        "missed": sum(r.missed for r in rows),
        "extra": sum(r.extra for r in rows) + len(unexpected),
    }
    summary["ok"] = bool(rows) and summary["mismatched"] == 0 and summary["missed"] == 0 and \
        summary["extra"] == 0
    return summary


def normalise(name):
    return "".join(name.split())


def compare_names(profiler_counts, events, out):
    """Every kernel the profiler saw must be among cuflight's events, as often. Returns summary."""
    seen = collections.Counter()
    by_mangled = collections.Counter()
    for e in events:
        seen[normalise(e.get("demangled") or e.get("name") or "")] += 1
        by_mangled[e.get("name") or ""] += 1
    missing, more = [], []
    for name, count in sorted(profiler_counts.items()):
        have = seen.get(normalise(name), 0) or by_mangled.get(name, 0)
        if have < count:
            missing.append((name, count, have))
        elif have > count:
            more.append((name, count, have))
    out.write(f"torch.profiler: {len(profiler_counts)} kernels, "
              f"{sum(profiler_counts.values())} launches; cuflight: {len(events)} kernel events\n")
    for name, want, have in missing:
        out.write(f"MISSING  {have}/{want}  {short(name, 100)}\n")
    for name, want, have in more:
        out.write(f"more     {have}/{want}  {short(name, 100)}\n")
    return {"profiler_kernels": len(profiler_counts),
            "profiler_launches": sum(profiler_counts.values()),
            "events": len(events), "missing": len(missing), "more": len(more),
            "ok": bool(profiler_counts) and not missing}


# The first CUPTI that lets several subscribers trace one process (libinject's
# kCuptiVersionMultiSubscriber, CUPTI docs "Recommended Initialization Workflow (CUDA 13.3+)").
CUPTI_MULTI_SUBSCRIBER = 130300


def judge_shared_cupti(profiler_counts, kernels, kernel_times, ends, stderr, out, starts=()):
    """torch.profiler inside a run cuflight records (two CUPTI clients in one process). The
    application must behave as without cuflight (the caller checks its exit status) and the
    profiler must list kernels. cuflight then either traced alongside it (every recorded launch
    timed: the subscriber-scoped activity API, CUDA 13.3+ with driver r610+), or said what it
    could not do: one stderr line that another tool holds CUPTI, or `timing_stopped` with its
    reason in process_end. Kernel events without timing and nothing said is the failure this
    looks for. One known limit passes as "profiler-refused": with a CUPTI older than 13.3 a
    process has one subscriber, cuflight (injected at cuInit) holds it, and the profiler's own
    subscription fails with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED on the application's
    stderr (PyTorch then records no CUDA activity); `starts` are the run's process_start events
    (their cupti_version). Returns (ok, outcome word, one line)."""
    if not profiler_counts:
        versions = [s.get("cupti_version", 0) for s in starts if s.get("cupti_version")]
        if (kernels and versions and max(versions) < CUPTI_MULTI_SUBSCRIBER
                and "MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in stderr):
            v = max(versions)
            line = (f"torch.profiler got no CUDA activity: CUPTI {v // 10000}.{v // 100 % 100} "
                    f"allows one subscriber per process and cuflight holds it ({len(kernels)} "
                    "launches recorded; the profiler's subscription failed with "
                    "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)")
            out.write(line + "\n")
            return True, "profiler-refused", line
        return False, "FAILED", "torch.profiler listed no kernel"
    timed = {t.get("correlation_id") for t in kernel_times}
    untimed = sum(1 for k in kernels if k.get("correlation_id") not in timed)
    stopped = [e for e in ends if e.get("timing_stopped_reason")]
    held = "already holds the CUPTI subscriber" in stderr
    if held and not kernels:
        line = "cuflight said another CUPTI tool holds the subscriber and recorded nothing"
        out.write(line + "\n")
        return True, "refused", line
    if not kernels:
        return False, "FAILED", "cuflight recorded no launch and said nothing"
    if untimed == 0:
        line = f"both traced: {len(kernels)} launches recorded, all timed"
        out.write(line + "\n")
        return True, "both", line
    if stopped:
        e = stopped[-1]
        line = (f"{len(kernels)} launches recorded, {untimed} untimed; process_end says "
                f"timing_stopped {e.get('timing_stopped')} ({e.get('timing_stopped_reason')})")
        out.write(line + "\n")
        return True, "timing-stopped", line
    line = f"{untimed} of {len(kernels)} launches untimed and nothing said (no timing_stopped)"
    out.write("FAIL " + line + "\n")
    return False, "FAILED", line


def check_fault_review(report, events, truths, out):
    """The post-mortem view of a faulting program: `report` is `cuflight report --json` of its
    logs. Its review section (processes that crashed, were lost or ended in a failed CUDA call)
    must list the process, and among its streams' last launches the faulting kernel, i.e. a
    kernel event whose name is a ground-truth kernel, matched by correlation id. Returns
    (ok, one line)."""
    wanted = {t["kernel"] for t in truths}
    faulting_ids = {e.get("correlation_id") for e in events
                    if e.get("name") in wanted or e.get("demangled") in wanted}
    review = report.get("review") if isinstance(report, dict) else None
    if not review:
        return False, "the report's review section lists no process"
    for process in review:
        if process.get("ending") not in ("crash", "lost", "api_error"):
            continue
        for stream in process.get("streams", []):
            for launch in stream.get("last_launches", []):
                if launch.get("correlation_id") in faulting_ids:
                    line = (f"review: pid {process.get('pid')} {process.get('ending')} "
                            f"({process.get('ending_detail', '')}); last kernels on device "
                            f"{stream.get('device')} stream {stream.get('stream')} include "
                            f"{launch.get('name')} (finished: "
                            f"{FINISHED_WORDS.get(launch.get('finished'), 'unknown')})")
                    out.write(line + "\n")
                    return True, line
    return False, "the review section does not name the faulting kernel among any stream's " \
                  "last launches"


def parse_stall_expectation(text):
    """The kernel names of the {"stall_kernel": ...} lines of a program's stdout."""
    names = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("stall_kernel"), str):
            names.append(obj["stall_kernel"])
    return names


def launch_is(launch, name):
    """Whether a stall event's launch is the kernel `name` (mangled, or demangled whole or up to
    its parameter list)."""
    if launch.get("name") == name:
        return True
    demangled = launch.get("demangled") or ""
    return demangled == name or demangled.split("(")[0] == name


def check_stall(expected, stalls, out):
    """A program that stalls on `expected` (a kernel name): `stalls` are its stall events in the
    logs. Some stalled event must name the kernel as the oldest unfinished launch of its
    longest-waiting stream (streams[0].launches[0]), and a resolved event must come after it (by
    seq). Returns (ok, one line)."""
    stalls = sorted(stalls, key=lambda e: e.get("seq", 0))
    stalled = [e for e in stalls if e.get("state") == "stalled"]
    if not stalled:
        return False, f"no stall event (state stalled) in the logs; expected one naming {expected}"
    first = stalled[0]

    def head(event):
        streams = event.get("streams") or []
        launches = streams[0].get("launches") or [] if streams else []
        return launches[0] if launches else {}

    naming = [e for e in stalled if launch_is(head(e), expected)]
    if not naming:
        got = head(first)
        return False, (f"the stall events name {got.get('demangled') or got.get('name') or 'no launch'} "
                       f"(corr {got.get('correlation_id')}) as the oldest unfinished launch, not "
                       f"{expected}")
    named = naming[0]
    resolved = [e for e in stalls if e.get("state") == "resolved" and e.get("seq", 0) > named["seq"]]
    launch = head(named)
    line = (f"stall: {len(stalled)} stalled event(s); the first naming {expected} after "
            f"{named.get('stalled_ms', 0) / 1000:.1f} s: {launch.get('demangled') or launch.get('name')} "
            f"(corr {launch.get('correlation_id')}, launched {launch.get('age_ms', 0) / 1000:.1f} s "
            f"before), {named.get('streams_stalled')} stream(s) stalled; ")
    if not resolved:
        line += "no resolved event after it"
        out.write(line + "\n")
        return False, line
    line += f"resolved after {resolved[0].get('stalled_ms', 0) / 1000:.1f} s"
    out.write(line + "\n")
    return True, line


# ----------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = argparse.ArgumentParser(prog="compare.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    k = sub.add_parser("kernels", help="kernel events against a program's ground truth")
    k.add_argument("--truth", required=True)
    k.add_argument("--log", action="append", required=True)
    k.add_argument("--summary")
    f = sub.add_parser("fault-review",
                       help="cuflight report --json of a faulting program names its kernel")
    f.add_argument("--truth", required=True)
    f.add_argument("--report", required=True)
    f.add_argument("--log", action="append", required=True)
    f.add_argument("--summary")
    st = sub.add_parser("stall", help="the stall events of a program that stalls on purpose")
    st.add_argument("--truth", required=True)
    st.add_argument("--log", action="append", required=True)
    st.add_argument("--summary")
    n = sub.add_parser("names", help="kernel names against torch.profiler's")
    n.add_argument("--profiler", required=True)
    n.add_argument("--log", action="append", required=True)
    n.add_argument("--summary")
    args = parser.parse_args(argv)
    try:
        events = read_events(args.log)
        if args.command == "stall":
            try:
                text = pathlib.Path(args.truth).read_text(encoding="utf-8", errors="replace")
            except OSError as e:
                raise InputError(f"{args.truth}: {e.strerror}") from e
            expected = parse_stall_expectation(text)
            if not expected:
                raise InputError(f"{args.truth}: no stall_kernel line")
            ok, line = check_stall(expected[0], read_events(args.log, "stall"), sys.stdout)
            summary = {"ok": ok, "detail": line}
        elif args.command == "kernels":
            truths, notes = read_truth(args.truth)
            for note in notes:
                sys.stdout.write(f"note: {note}\n")
            if not truths and notes:
                summary = {"configurations": 0, "launches": 0, "events": len(events),
                           "matched": 0, "mismatched": 0, "missed": 0, "extra": len(events),
                           "ok": not events, "skipped": True}
            elif not truths:
                raise InputError(f"{args.truth}: no ground-truth line")
            else:
                summary = compare_kernels(truths, events, sys.stdout)
        elif args.command == "fault-review":
            truths, _ = read_truth(args.truth)
            try:
                report = json.loads(pathlib.Path(args.report).read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise InputError(f"{args.report}: not a cuflight report --json document ({e})") \
                    from e
            ok, line = check_fault_review(report, events, truths, sys.stdout)
            summary = {"ok": ok, "detail": line}
        else:
            try:
                listing = json.loads(pathlib.Path(args.profiler).read_text(encoding="utf-8"))
                counts = {str(k): int(v) for k, v in listing["kernels"].items()}
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                raise InputError(f"{args.profiler}: not a profiler listing ({e})") from e
            summary = compare_names(counts, events, sys.stdout)
    except InputError as e:
        sys.stderr.write(f"compare.py: {e}\n")
        return FAIL_INPUT
    if args.summary:
        pathlib.Path(args.summary).write_text(json.dumps(summary) + "\n", encoding="utf-8")
    sys.stdout.write(("OK" if summary["ok"] else "FAIL") + " " +
                     ", ".join(f"{k} {v}" for k, v in summary.items() if k != "ok") + "\n")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
