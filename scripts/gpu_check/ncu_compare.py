#!/usr/bin/env python3
"""Cross-checks cuflight's occupancy against Nsight Compute's launch metrics (stdlib only).

usage: ncu_compare.py [--summary FILE] NCU_OUTPUT LOG [LOG ...]

NCU_OUTPUT is what `ncu --csv --metrics <METRICS> PROGRAM` printed (NCU_ARGS below: the metrics
and options gpu-check runs it with), run without cuflight's injector, stdout and stderr together:
ncu's CSV (one metric per row: "ID","Process ID",...,"Kernel Name",...,"Block Size","Grid Size",
...,"Metric Name","Metric Unit","Metric Value") among any other line (ncu's ==PROF==, ==WARNING==
and ==ERROR== lines, the program's own output), which are skipped. Several programs' outputs may
follow one another, each after a line `=== <name>`: that section's launches are then matched only
against the LOG whose last path component is <name>. Without such lines every LOG is searched.
A LOG is a cuflight log file or a directory searched for *.jsonl (as compare.py reads them).

Each ncu launch (one ID of one process) is matched to a cuflight kernel event of the same
configuration: demangled name (spelled the same way on both sides: ncu writes `f(const float *)`,
cuflight `f(float const*)`), block, grid and dynamic shared memory; ncu lists launches in order,
so the n-th ncu launch of a configuration takes the n-th event of it. When no event has the
whole name, the name without return type, template arguments and parameters is tried. For each
launch:

- blocks per SM: ncu's min(launch__occupancy_limit_registers, _shared_mem, _warps, _blocks)
  against max_active_blocks;
- limiting resource: the ncu limits equal to that minimum (registers, shared_mem, warps, blocks)
  against limiting_resources, less the names ncu does not split out (barriers, cluster, other);
  not compared when nothing is left. ncu counts shared memory against the carveout the driver
  configured for the launch (launch__shared_mem_config_size), cuflight (as the driver's occupancy
  API) against the SM's whole shared memory when the launch states no carveout (-1): ncu's
  shared_mem beside cuflight's limiter(s) is then noted, not a failure, when that carveout is
  smaller than the SM's shared memory (the device event's smem_per_sm);
- occupancy: sm__maximum_warps_per_active_cycle_pct against occupancy x 100, to 0.1;
- registers per thread: launch__registers_per_thread against num_regs. ncu may report more than
  the function's CU_FUNC_ATTRIBUTE_NUM_REGS (on an H200 it gives 16 for kernels the attribute
  says use 8 to 14), so a difference fails only when registers limit the block count on either
  side; otherwise the row notes it.

A launch cuflight names as limited by `cluster` is cluster-placement bound, which ncu's
per-resource limits ignore: its block count, occupancy and limiting resource are shown but not
held against ncu (the row says so). A launch ncu could not measure (a value "n/a" or missing) is
listed as not profiled and held against nothing; ncu's ==ERROR== lines are printed.

Prints one row per configuration and a summary line; exits 0 when every launch matched, 1 on any
mismatch or an ncu launch without an event (named in the table), 2 on unusable input (no ncu CSV,
no log), with one line on stderr. cuflight events beyond ncu's launches (ncu profiles at most
--launch-count) are counted, not a failure. --summary writes the counts as one JSON object.
"""

import argparse
import collections
import csv
import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import compare  # noqa: E402
from compare import InputError, fmt_dim  # noqa: E402

FAIL_INPUT = 2
METRICS = (
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__block_size",
    "launch__grid_size",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__shared_mem_config_size",
    "launch__occupancy_per_block_size",
)
# ncu's arguments before the program: no clock locking (occupancy needs none), at most 40
# launches per program (what each launch costs under ncu adds up), CSV on stdout.
NCU_ARGS = ("--clock-control", "none", "--launch-count", "40", "--csv", "--metrics",
            ",".join(METRICS))
# ncu's per-resource block limits, by cuflight's name for the resource.
LIMITS = collections.OrderedDict([
    ("registers", "launch__occupancy_limit_registers"),
    ("shared_mem", "launch__occupancy_limit_shared_mem"),
    ("warps", "launch__occupancy_limit_warps"),
    ("blocks", "launch__occupancy_limit_blocks"),
])
PCT = "sm__maximum_warps_per_active_cycle_pct"
REGS = "launch__registers_per_thread"
DYN = "launch__shared_mem_per_block_dynamic"
CONFIG = "launch__shared_mem_config_size"
NEEDED = tuple(LIMITS.values()) + (PCT, DYN)
COLUMNS = ("ID", "Process ID", "Kernel Name", "Block Size", "Grid Size", "Metric Name",
           "Metric Value")
PCT_TOLERANCE = 0.05  # "to 0.1": both sides round to the same tenth of a percent


# ----------------------------------------------------------------------------------------------
# Names


PUNCTUATION = re.compile(r"([(),<>*&\[\]])")


# Nsight Compute's demangler and the one cuflight uses (the C++ ABI's, as c++filt) spell two
# things differently: an anonymous namespace (`<unnamed>` / `(anonymous namespace)`) and a lambda
# (`[lambda(float) (instance 1)]` / `{lambda(float)#1}`).
NCU_LAMBDA = re.compile(r"\[lambda\((.*?)\) \(instance (\d+)\)\]")


def normalise(name):
    """One spelling of a demangled name whatever the demangler wrote: blanks around punctuation
    dropped, the words between two punctuation marks sorted (`const float` and `float const`
    are one type), and ncu's spellings of anonymous namespaces and lambdas as the ABI's."""
    name = (name or "").replace("<unnamed>", "(anonymous namespace)")
    name = NCU_LAMBDA.sub(lambda m: "{lambda(" + m.group(1) + ")#" + m.group(2) + "}", name)
    parts = PUNCTUATION.split(name)
    return "".join(p if PUNCTUATION.fullmatch(p) else " ".join(sorted(p.split())) for p in parts)


def strip_parameters(name):
    """`name` without its trailing parameter list (the balanced (...) it ends with)."""
    name = (name or "").strip()
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i].rstrip()
    return name


def base_name(name):
    """The function's qualified name alone: no return type, template arguments or parameters
    (`void ns::k<float, 4>(float *)` -> `ns::k`)."""
    text, out, depth = strip_parameters(name), [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    words = "".join(out).split()
    return words[-1] if words else ""


def function_name(name):
    """The function's own name, without its namespaces and classes (`at::native::k` -> `k`):
    ncu's demangler leaves out some namespaces (`at::native::` as `at::`) and writes template
    parameters as T1, T2, so longer names of one kernel differ between the two sides."""
    return base_name(name).rsplit("::", 1)[-1]


def display(name):
    return base_name(name) or name or "?"


# ----------------------------------------------------------------------------------------------
# ncu's output


class Launch:
    """One kernel launch ncu profiled: its configuration and metric values (None: "n/a")."""

    def __init__(self, section, name, block, grid):
        self.section = section
        self.name = name
        self.block = block
        self.grid = grid
        self.metrics = {}

    def number(self, metric):
        return self.metrics.get(metric)

    @property
    def dyn(self):
        value = self.number(DYN)
        return int(value) if value is not None else None

    @property
    def profiled(self):
        return all(self.number(m) is not None for m in NEEDED)


def parse_number(text):
    """ncu's value as a number: "1,006" (thousands grouped) -> 1006.0; None for "n/a" or text."""
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def parse_dim(text):
    """"(128, 1, 1)" -> (128, 1, 1); a lone number counts as x."""
    numbers = [int(n) for n in re.findall(r"\d+", text or "")]
    if not numbers:
        return None
    return tuple((numbers + [1, 1])[:3])


def parse_ncu(text):
    """(launches in ncu's order, ==ERROR== lines) from ncu's output. Raises InputError when it
    holds no ncu CSV header."""
    launches = collections.OrderedDict()
    errors = []
    header = None
    section = None
    for line in text.splitlines():
        if line.startswith("=== "):
            section = line[4:].strip()
            continue
        if line.startswith("==ERROR=="):
            errors.append((section, line.strip()))
            continue
        if not line.startswith('"'):
            continue
        try:
            cells = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            continue
        if cells and cells[0] == "ID":
            index = {c: i for i, c in enumerate(cells)}
            missing = [c for c in COLUMNS if c not in index]
            if missing:
                raise InputError("ncu CSV header lacks " + ", ".join(missing))
            header = index
            continue
        if header is None or len(cells) < len(header):
            continue

        def cell(column):
            return cells[header[column]]

        key = (section, cell("Process ID"), cell("ID"))
        launch = launches.get(key)
        if launch is None:
            launch = launches[key] = Launch(section, cell("Kernel Name"),
                                            parse_dim(cell("Block Size")),
                                            parse_dim(cell("Grid Size")))
        launch.metrics[cell("Metric Name")] = parse_number(cell("Metric Value"))
    if header is None:
        raise InputError("no ncu CSV in the input (no \"ID\",\"Process ID\",... header line)")
    return list(launches.values()), errors


# ----------------------------------------------------------------------------------------------
# Matching


class EventPool:
    """cuflight kernel events of one log group, handed out in order per configuration."""

    def __init__(self, events, devices=()):
        # Device events by (pid, device): the SM's shared memory for the carveout note.
        self.devices = {(d.get("pid"), d.get("device")): d for d in devices}
        self.full = collections.defaultdict(collections.deque)
        self.base = collections.defaultdict(collections.deque)
        self.function = collections.defaultdict(collections.deque)
        self.taken = set()
        self.count = len(events)
        for i, e in enumerate(events):
            config = (compare.dim(e.get("block")), compare.dim(e.get("grid")),
                      int(e.get("dyn_shared_bytes") or 0))
            names = {normalise(e.get("demangled")), e.get("name") or ""} - {""}
            for n in names:
                self.full[(n,) + config].append((i, e))
            b = base_name(e.get("demangled") or "")
            if b:
                self.base[(b,) + config].append((i, e))
            f = function_name(e.get("demangled") or "")
            if f:
                self.function[(f,) + config].append((i, e))

    def take(self, launch):
        """(event, how) for `launch`, or (None, None); how is "name", "base name" or "function
        name" (the n-th launch of a configuration on each side: both ran the same program)."""
        config = (launch.block, launch.grid, launch.dyn)
        # A name ncu could not demangle is the mangled one, which the full index also holds.
        for how, index, key in (("name", self.full, (normalise(launch.name),) + config),
                                ("base name", self.base, (base_name(launch.name),) + config),
                                ("function name", self.function,
                                 (function_name(launch.name),) + config)):
            queue = index.get(key)
            while queue:
                i, e = queue.popleft()
                if i not in self.taken:
                    self.taken.add(i)
                    return e, how
        return None, None

    def device_of(self, event):
        return self.devices.get((event.get("pid"), event.get("device")), {})


def driver_carveout_tie(launch, event, device, ncu_limiters, cf_limiters):
    """True when ncu names shared_mem beside cuflight's limiters only because of the carveout the
    driver picked at this launch: with no carveout preference (-1) cuflight, as
    cudaOccupancyMaxActiveBlocksPerMultiprocessor and cuda_occupancy.h
    (cudaOccSMemPreferenceVoltaPlus: SHAREDMEM_CARVEOUT_DEFAULT -> sharedMemPerMultiprocessor),
    counts blocks against the SM's whole shared memory; ncu counts them against the shared memory
    the SM was configured with for the launch (launch__shared_mem_config_size), which the driver
    may size to just fit the block count the other limits allow."""
    config = launch.number(CONFIG)
    smem_per_sm = device.get("smem_per_sm")
    return (bool(cf_limiters) and set(ncu_limiters) == set(cf_limiters) | {"shared_mem"}
            and "shared_mem" not in cf_limiters and event.get("carveout") == -1
            and config is not None and smem_per_sm is not None and config < smem_per_sm)


def judge(launch, event, device):
    """The comparison of one matched launch: (values, failures, notes)."""
    limits = {r: int(launch.number(m)) for r, m in LIMITS.items()}
    ncu_blocks = min(limits.values())
    ncu_limiters = [r for r in LIMITS if limits[r] == ncu_blocks]
    ncu_pct = launch.number(PCT)
    ncu_regs = launch.number(REGS)
    ncu_regs = int(ncu_regs) if ncu_regs is not None else None

    cf_blocks = event.get("max_active_blocks")
    limiter = event.get("limiting_resource")
    cf_limiters = list(event.get("limiting_resources") or [limiter])
    occupancy = event.get("occupancy")
    cf_pct = round(float(occupancy) * 100, 2) if occupancy is not None else None
    cf_regs = event.get("num_regs")

    values = {"blocks": (ncu_blocks, cf_blocks),
              "limiter": ("+".join(ncu_limiters), "+".join(cf_limiters)),
              "pct": (f"{ncu_pct:g}", "-" if cf_pct is None else f"{cf_pct:g}"),
              "regs": (ncu_regs if ncu_regs is not None else "-",
                       cf_regs if cf_regs is not None else "-")}
    failures, notes = [], []
    if limiter == "cluster":
        agree = cf_blocks is not None and int(cf_blocks) == ncu_blocks
        notes.append("cluster-limited: not held against ncu (blocks/SM "
                     + ("agree)" if agree else "differ)"))
    else:
        if cf_blocks is None or int(cf_blocks) != ncu_blocks:
            failures.append("blocks")
        if cf_pct is None or abs(ncu_pct - cf_pct) > PCT_TOLERANCE + 1e-9:
            failures.append("occupancy")
        comparable = [r for r in cf_limiters if r in LIMITS]
        unsplit = sorted(set(cf_limiters) - set(LIMITS))
        if not comparable:
            notes.append(f"limiter {'+'.join(unsplit)} not compared (ncu does not split it out)")
        elif driver_carveout_tie(launch, event, device, ncu_limiters, comparable):
            notes.append(f"ncu's shared_mem tie is at the {int(launch.number(CONFIG)) // 1024} "
                         f"KiB carveout the driver chose (cuflight: the SM's "
                         f"{int(device['smem_per_sm']) // 1024} KiB, carveout -1)")
        elif set(comparable) != set(ncu_limiters):
            failures.append("limiter")
    if ncu_regs is not None and cf_regs is not None and int(cf_regs) != ncu_regs:
        if limits["registers"] == ncu_blocks or "registers" in cf_limiters:
            failures.append("registers")
        else:
            notes.append("registers differ; registers limit neither side")
    return values, failures, notes


class Row:
    """One configuration: the ncu launches of it and what their events said."""

    def __init__(self, launch):
        self.section = launch.section
        self.name = launch.name
        self.block, self.grid, self.dyn = launch.block, launch.grid, launch.dyn
        self.launches = 0
        self.matched = 0
        self.unprofiled = 0
        self.without_event = 0
        self.values = collections.defaultdict(lambda: ([], []))
        self.failures = []
        self.notes = []

    def add_note(self, note):
        if note not in self.notes:
            self.notes.append(note)

    def status(self):
        if self.failures:
            return "MISMATCH"
        if self.without_event:
            return "NO EVENT"
        if self.unprofiled and not self.matched:
            return "NOT PROF"
        return "ok"

    def pair(self, what):
        ncu, cf = self.values[what]
        return f"{compare.distinct(ncu)}/{compare.distinct(cf)}"


def compare_launches(launches, events_by_section):
    """Matches and judges every launch. `events_by_section` maps a section name (None: launches
    outside any section) to that group's (kernel events, device events). Returns (rows, events
    not taken)."""
    pools = {s: EventPool(*group) for s, group in events_by_section.items()}
    rows = collections.OrderedDict()
    for launch in launches:
        key = (launch.section, normalise(launch.name), launch.block, launch.grid, launch.dyn)
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(launch)
        row.launches += 1
        if not launch.profiled:
            row.unprofiled += 1
            row.add_note("not profiled by ncu (values n/a)")
            if launch.dyn is not None:
                pools[launch.section].take(launch)  # keeps the n-th launch on the n-th event
            continue
        event, how = pools[launch.section].take(launch)
        if event is None:
            row.without_event += 1
            continue
        row.matched += 1
        if how != "name":
            row.add_note("matched on the " + how)
        pool = pools[launch.section]
        values, failures, notes = judge(launch, event, pool.device_of(event))
        for what, (ncu, cf) in values.items():
            row.values[what][0].append(ncu)
            row.values[what][1].append(cf)
        for f in failures:
            if f not in row.failures:
                row.failures.append(f)
        for n in notes:
            row.add_note(n)
    left = sum(p.count - len(p.taken) for p in pools.values())
    return list(rows.values()), left


# ----------------------------------------------------------------------------------------------
# Output


HEADER = ["status", "program", "kernel", "block", "grid", "dyn", "n", "blocks/SM",
          "limiter ncu/cuflight", "occ% ncu/cf", "regs", "note"]
WIDTHS = [8, 18, 24, 11, 11, 7, 7, 9, 24, 11, 7, 0]


def table_rows(rows):
    table = []
    for row in rows:
        note = list(row.notes)
        if row.failures:
            note.insert(0, "differs: " + ", ".join(row.failures))
        if row.without_event:
            note.insert(0, f"{row.without_event} ncu launch(es) of {row.name} "
                           f"without a cuflight event")
        table.append([row.status(), compare.short(row.section or "-", 18),
                      compare.short(display(row.name), 24), fmt_dim(row.block),
                      fmt_dim(row.grid), "-" if row.dyn is None else row.dyn,
                      f"{row.matched}/{row.launches}", row.pair("blocks"), row.pair("limiter"),
                      row.pair("pct"), row.pair("regs"), "; ".join(note)])
    return table


def print_table(table, out):
    def emit(cells):
        out.write("  ".join(str(c).ljust(w) for c, w in zip(cells, WIDTHS)).rstrip() + "\n")

    emit(HEADER)
    for cells in table:
        emit(cells)


def summarise(rows, launches, left, errors):
    summary = {
        "configurations": len(rows),
        "mismatched": sum(1 for r in rows if r.failures or r.without_event),
        "launches": len(launches),
        "matched": sum(r.matched for r in rows),
        "without_event": sum(r.without_event for r in rows),
        "not_profiled": sum(r.unprofiled for r in rows),
        "events_beyond_ncu": left,
        "ncu_errors": len(errors),
    }
    summary["ok"] = summary["mismatched"] == 0
    return summary


def compare_text(text, logs, out):
    """Compares ncu's output `text` with the cuflight logs `logs` (paths), printing the table.
    Returns the summary dict (summary["ok"] is the verdict). Raises InputError on unusable
    input."""
    launches, errors = parse_ncu(text)
    if not launches:
        raise InputError("ncu's CSV lists no launch")
    logs = [pathlib.Path(p) for p in logs]
    sections = list(collections.OrderedDict.fromkeys(l.section for l in launches))
    events_by_section = {}
    for section in sections:
        if section is None:
            paths = logs
        else:
            paths = [p for p in logs if p.name == section or p.stem == section]
            if not paths:
                raise InputError(f"no LOG named {section} for ncu's section '=== {section}'")
        events_by_section[section] = (compare.read_events(paths),
                                      compare.read_events(paths, "device"))
    rows, left = compare_launches(launches, events_by_section)
    print_table(table_rows(rows), out)
    for section, line in errors:
        out.write(f"ncu{' (' + section + ')' if section else ''}: {line}\n")
    return summarise(rows, launches, left, errors)


def summary_line(summary):
    return (f"{'OK' if summary['ok'] else 'FAIL'} ncu: {summary['configurations']} configurations, "
            f"{summary['mismatched']} mismatched; {summary['launches']} ncu launches: "
            f"{summary['matched']} matched, {summary['without_event']} without an event, "
            f"{summary['not_profiled']} not profiled; {summary['events_beyond_ncu']} cuflight "
            f"events beyond ncu's launches")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ncu_compare.py", description=__doc__.split("\n")[0])
    parser.add_argument("ncu_output", help="what ncu --csv printed (NCU_ARGS)")
    parser.add_argument("logs", nargs="+", help="cuflight log files or directories")
    parser.add_argument("--summary", help="write the counts as JSON here")
    args = parser.parse_args(argv)
    try:
        try:
            text = pathlib.Path(args.ncu_output).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise InputError(f"{args.ncu_output}: {e.strerror}") from e
        summary = compare_text(text, args.logs, sys.stdout)
    except InputError as e:
        sys.stderr.write(f"ncu_compare.py: {e}\n")
        return FAIL_INPUT
    if args.summary:
        pathlib.Path(args.summary).write_text(json.dumps(summary) + "\n", encoding="utf-8")
    sys.stdout.write(summary_line(summary) + "\n")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
