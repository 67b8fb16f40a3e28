#!/usr/bin/env python3
"""The HTML report in a real browser: headless Chromium loads the page from hand-written logs.

Asserts: no console message or uncaught exception while it loads (the page's own script ran:
it titles every sortable column header), the four charts are in the DOM with SVG content, the
kernel name holding <&"'> arrives as text, the top-kernels chart's labels of four CUTLASS GEMMs
that differ only deep in their template arguments (tile, epilogue functor) are all different as
the browser shows them, and a screenshot of it is non-trivial. Then the page
of 32 ranks that crashed alike in half a second, laid out at 1024 and 1280 px (a script added to
a copy of it measures the layout): the header's span to the millisecond, the processes table's
last column (ENDING) inside the window, no value broken across lines, the findings above the
summary, the ranks in one block, and the stall and stream tables naming the hung launch by both
CORR and SEQ. The pages and the screenshot stay in --out (report.html, report.png, crash32.html)
for a person to look at.

Usage: html_browser_test.py --cuflight PATH/cuflight --out DIR   (runs `cuflight report --html`)
Fails with one line when Chromium (Debian package `chromium`) is not installed.
"""

import argparse
import html
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

START = 1763708400000000000  # 2025-11-21T07:00:00Z
SECOND = 1000000000
NASTY = "evil<&\"'>(char const*)"
CHART_IDS = ["chart-occupancy", "chart-limiters", "chart-top-kernels", "chart-timeline"]
CHROMIUM_TIMEOUT_S = 60


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def event(kind, ts, pid, seq, **fields):
    e = {"type": kind, "version": 1, "ts_ns": ts, "pid": pid, "seq": seq}
    e.update(fields)
    return json.dumps(e, separators=(",", ":")) + "\n"


def kernel(ts, pid, seq, corr, name, demangled, block, regs, limiter, blocks, stream=0):
    warps = block // 32
    occupancy = min(1.0, blocks * warps / 64)
    per = {r: 1.0 for r in ["reg", "smem", "warp", "block", "barrier"]}
    per[{"registers": "reg", "shared_mem": "smem", "warps": "warp", "blocks": "block"}[limiter]] = (
        occupancy)
    return event(
        "kernel", ts, pid, seq, tid=pid, device=0, context=4096, stream=stream,
        correlation_id=corr, api="cuLaunchKernel", name=name, demangled=demangled,
        grid=[1024, 1, 1], block=[block, 1, 1], num_regs=regs, static_shared_bytes=0,
        dyn_shared_bytes=0, local_bytes=0, const_bytes=0, max_threads_per_block=1024,
        carveout=-1, cooperative=False, max_active_blocks=blocks, active_warps=blocks * warps,
        max_warps=64, occupancy=occupancy, reg_occupancy=per["reg"],
        smem_occupancy=per["smem"], warp_occupancy=per["warp"], block_occupancy=per["block"],
        barrier_occupancy=per["barrier"], limiting_resource=limiter,
        limiting_resources=[limiter], allocated_regs_per_block=regs * block,
        allocated_smem_per_block=0, waves=2.0, tail_utilization=1.0,
        regs_for_next_block=None, smem_for_next_block=None, best_block_size=1024)


def cutlass_gemm(tile_m, functor):
    """A CUTLASS 2.x tensor-op GEMM's demangled name (the shape of cutlass::Kernel<Gemm<...>>)."""
    return ("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::"
            f"MmaPipelined<cutlass::gemm::GemmShape<{tile_m}, 128, 32>, cutlass::half_t, "
            "cutlass::layout::RowMajor, cutlass::half_t, cutlass::layout::ColumnMajor, float, "
            "cutlass::layout::RowMajor, cutlass::arch::OpClassTensorOp>, "
            "cutlass::epilogue::threadblock::Epilogue<cutlass::epilogue::thread::"
            f"{functor}<cutlass::half_t, 8, float, float>, 1>, true>>"
            "(cutlass::gemm::kernel::Gemm::Params)")


CUTLASS = [cutlass_gemm(64, "LinearCombination"), cutlass_gemm(128, "LinearCombination"),
           cutlass_gemm(64, "LinearCombinationRelu"), cutlass_gemm(128, "LinearCombinationRelu")]


def kernel_time(pid, seq, corr, start, duration, stream=0):
    return event("kernel_time", start + duration + 1000, pid, seq, correlation_id=corr,
                 device=0, context=4096, stream=stream, start_ns=start,
                 end_ns=start + duration, duration_ns=duration)


def process_start(pid, start, exe, host):
    return event("process_start", start, pid, 0, exe=exe, argv=[exe], hostname=host,
                 start_ns=start, cuflight_version="0.1.0", cuda_driver_version=13000,
                 cupti_version=28, ppid=1, uid=1000, config={})


def device(pid, seq, ts):
    return event("device", ts, pid, seq, device=0, name="NVIDIA A100", uuid="", cc_major=8,
                 cc_minor=0, sm_count=108, max_threads_per_block=1024, max_threads_per_sm=2048,
                 max_blocks_per_sm=32, regs_per_sm=65536, regs_per_block=65536,
                 smem_per_sm=167936, smem_per_block=49152, smem_per_block_optin=166912,
                 reserved_smem_per_block=1024, warp_size=32, max_cluster_size=0)


def write_logs(directory):
    # pid 100: two streams of gemm/softmax, every launch timed, ended normally.
    lines = [process_start(100, START, "/opt/app/bin/trainer", "node1"),
             device(100, 1, START + 1000)]
    seq, corr = 2, 1
    for i in range(60):
        for stream, (name, dem, block, regs, lim, blocks) in enumerate([
                ("_Z4gemmPf", "gemm(float*)", 256, 64, "registers", 6),
                ("_Z7softmaxPf", "softmax(float*)", 128, 32, "shared_mem", 3)]):
            ts = START + SECOND // 10 + i * 5000000 + stream * 1000000
            lines.append(kernel(ts, 100, seq, corr, name, dem, block, regs, lim, blocks,
                                stream=stream * 16))
            lines.append(kernel_time(100, seq + 1, corr, ts + 20000, 800000 + 10000 * (i % 7),
                                     stream=stream * 16))
            seq, corr = seq + 2, corr + 1
    for i, name in enumerate(CUTLASS):
        ts = START + SECOND // 2 + i * 1000000
        lines.append(kernel(ts, 100, seq, corr, f"_ZN7cutlass6KernelI{i}", name, 128, 232,
                            "registers", 1))
        lines.append(kernel_time(100, seq + 1, corr, ts + 20000, 300000 + 1000 * i))
        seq, corr = seq + 2, corr + 1
    lines.append(event("process_end", START + SECOND, 100, seq, exit_code=0, emitted=seq,
                       dropped=0))
    with open(os.path.join(directory, "a.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    # pid 200: one timed gemm, the nasty kernel never finished, then SIGSEGV.
    start = START + SECOND // 5
    lines = [process_start(200, start, "/opt/app/bin/infer", "node2"), device(200, 1, start + 1)]
    lines.append(kernel(start + 1000, 200, 2, 1, "_Z4gemmPf", "gemm(float*)", 256, 64,
                        "registers", 6))
    lines.append(kernel_time(200, 3, 1, start + 5000, 500000))
    lines.append(kernel(start + 100000000, 200, 4, 2, "_Z4evilPKc", NASTY, 64, 32, "blocks", 16))
    lines.append(event("process_crash", start + 200000000, 200, 5, signal=11,
                       signal_name="SIGSEGV", code=1, addr=16, tid=200, app_handler=False,
                       emitted=5, dropped=0))
    with open(os.path.join(directory, "b.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(lines)


def write_crash_logs(directory):
    """32 ranks of one job that crashed alike after two failed launches each, in half a second,
    and a process hung on its spinning kernel (its stall event, at START + 0.5 s, is the last
    event of the logs)."""
    for rank in range(32):
        pid, start = 5000 + rank, START + rank * 1000000
        lines = [process_start(pid, start, "/usr/bin/python3", "node%d" % (rank // 8)),
                 device(pid, 1, start + 1000)]
        lines[0] = lines[0].replace('"config":{}', '"config":{},"attribution":{"job":"j7",'
                                    '"rank":"%d","world_size":"32"}' % rank)
        seq = 2
        for corr in range(1, 4):
            ts = start + corr * 10000000
            lines.append(kernel(ts, pid, seq, corr, "_Z4gemmPf", "gemm(float*)", 256, 64,
                                "registers", 6, stream=7))
            lines.append(kernel_time(pid, seq + 1, corr, ts + 20000, 1000000, stream=7))
            seq += 2
        for k in (1, 2):
            lines.append(event("api_error", start + k * 100000000, pid, seq, api="cuLaunchKernel",
                               code=1, error_name="CUDA_ERROR_INVALID_VALUE",
                               message="invalid argument", device=0, context=4096, stream=7,
                               last_correlation_ids=[3]))
            seq += 1
        lines.append(event("process_crash", START + 400000000 + rank * 1000000, pid, seq,
                           signal=11, signal_name="SIGSEGV", code=1, addr=16, tid=pid + 1,
                           app_handler=False, emitted=seq, dropped=0))
        with open(os.path.join(directory, "rank%d.jsonl" % rank), "w", encoding="utf-8") as f:
            f.writelines(lines)
    lines = [process_start(300, START, "/opt/app/bin/hang", "node9"), device(300, 1, START + 1000),
             kernel(START + 2000, 300, 2, 7, "_Z4spinPVi", "spin(int volatile*)", 32, 16,
                    "blocks", 32, stream=16)]
    launch = {"correlation_id": 7, "name": "_Z4spinPVi", "demangled": "spin(int volatile*)",
              "grid": [1, 1, 1], "block": [32, 1, 1], "occupancy": 0.5, "age_ms": 12000}
    lines.append(event("stall", START + SECOND // 2, 300, 3, state="stalled", stall_ms=10000,
                       stalled_ms=12000, completed=0, streams_stalled=1,
                       streams=[{"device": 0, "context": 4096, "stream": 16, "waiting_ms": 12000,
                                 "unfinished": 1, "launches": [launch]}]))
    with open(os.path.join(directory, "hang.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(lines)


# Appended to a copy of the page: measures the layout and writes what it found, as JSON, into a
# <pre id="probe"> that --dump-dom returns. The page's CSP allows inline scripts.
PROBE = r"""<script>
(function () {
  var out = {viewport: document.documentElement.clientWidth,
             page_width: document.documentElement.scrollWidth};
  var span = document.querySelector('header .meta .span');
  out.span = span ? span.textContent : null;
  var table = document.getElementById('process-table');
  var heads = table ? table.tHead.rows[0].cells : [];
  out.last_head = heads.length ? heads[heads.length - 1].textContent : null;
  out.last_head_right = heads.length ? heads[heads.length - 1].getBoundingClientRect().right : null;
  function headers(t) {
    return Array.prototype.map.call(t.tHead.rows[0].cells, function (c) { return c.textContent; });
  }
  function rows(t) {
    return Array.prototype.map.call(t.tBodies[0].rows, function (r) {
      return Array.prototype.map.call(r.cells, function (c) { return c.textContent; });
    });
  }
  var stall = document.querySelector('table.stall');
  out.stall = stall ? {headers: headers(stall), rows: rows(stall)} : null;
  out.launches = Array.prototype.map.call(document.querySelectorAll('table.launches'),
      function (t) { return {headers: headers(t), rows: rows(t)}; });
  // A value on more than one line: its text's boxes at more than one height.
  var wrapped = [];
  document.querySelectorAll('td.n, .v, .card b, td.time').forEach(function (el) {
    if (!el.getClientRects().length) return;  // inside a closed <details>
    var range = document.createRange();
    range.selectNodeContents(el);
    var tops = {};
    Array.prototype.forEach.call(range.getClientRects(), function (r) {
      if (r.width > 0) tops[Math.round(r.top)] = true;
    });
    if (Object.keys(tops).length > 1) wrapped.push(el.textContent);
  });
  out.wrapped = wrapped;
  out.values_checked = document.querySelectorAll('td.n, .v, .card b, td.time').length;
  function top(id) {
    var e = document.getElementById(id);
    return e ? e.getBoundingClientRect().top : null;
  }
  out.findings_top = top('findings');
  out.summary_top = top('summary');
  var more = document.querySelector('#review details.more-procs > summary');
  out.more = more ? more.textContent : null;
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def probe_layout(chromium, page, tmp, width):
    """Loads `page` with PROBE in a window `width` px wide; returns what PROBE found."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    probed = os.path.join(tmp, "probed.html")
    with open(probed, "w", encoding="utf-8") as f:
        f.write(text.replace("</body>", PROBE + "</body>"))
    run = run_chromium(chromium, os.path.join(tmp, "profile-probe-%d" % width),
                       ["--window-size=%d,900" % width, "--virtual-time-budget=2000",
                        "--dump-dom"], "file://" + probed)
    errors = console_errors(run.stderr)
    if errors:
        fail("console messages while probing the layout:\n" + "\n".join(errors))
    start = run.stdout.find('<pre id="probe">')
    end = run.stdout.find("</pre>", start)
    if start < 0 or end < 0:
        fail(f"the layout probe did not run at {width} px: {run.stderr[-2000:]}")
    return json.loads(html.unescape(run.stdout[start + len('<pre id="probe">'):end]))


def check_crash_page(chromium, cuflight, out_dir, tmp):
    """The review of 32 crashed ranks and a hung process, laid out at 1024 and 1280 px."""
    logs = os.path.join(tmp, "crash-logs")
    os.makedirs(logs)
    write_crash_logs(logs)
    page = os.path.abspath(os.path.join(out_dir, "crash32.html"))
    r = subprocess.run([cuflight, "report", "--html", page, logs], capture_output=True,
                       text=True, timeout=60, check=False)
    if r.returncode != 0:
        fail(f"cuflight report --html (32 ranks) exited {r.returncode}: {r.stderr.strip()}")
    for width in (1024, 1280):
        p = probe_layout(chromium, page, tmp, width)
        where = f"at {width} px"
        # Half a second: the span to the millisecond (the first event at START, the stall event
        # at START + 0.5 s the last).
        if p["span"] != "2025-11-21 07:00:00.000 to 07:00:00.500 UTC (500ms)":
            fail(f"{where}: the header's span is {p['span']!r}")
        if p["page_width"] > p["viewport"]:
            fail(f"{where}: the page is {p['page_width']} px wide in a {p['viewport']} px window")
        if p["last_head"] != "ENDING" or p["last_head_right"] > p["viewport"]:
            fail(f"{where}: the processes table's last column {p['last_head']!r} ends at "
                 f"{p['last_head_right']} px, past the window's {p['viewport']} px")
        if p["wrapped"] or p["values_checked"] < 50:
            fail(f"{where}: values broken across lines: {p['wrapped'][:10]} "
                 f"({p['values_checked']} checked)")
        if p["findings_top"] is None or p["summary_top"] is None or (
                p["findings_top"] > p["summary_top"]):
            fail(f"{where}: the findings are not above the summary: {p['findings_top']}, "
                 f"{p['summary_top']}")
        # Rank 0 crashed first (at START + 0.4 s, rank r r ms later).
        if p["more"] != "\u00d7 31 more, the same: pids 5001-5031 (ranks 1-31)":
            fail(f"{where}: no block of the ranks that crashed alike: {p['more']!r}")
        # The stall table and the stream table name the spinning launch alike: corr 7, seq 2.
        stall = p["stall"]
        if not stall or stall["headers"][:2] != ["CORR", "SEQ"] or stall["rows"][0][:2] != [
                "7", "2"]:
            fail(f"{where}: the stall table has no CORR and SEQ of the hung launch: {stall}")
        hung = [t for t in p["launches"] if t["rows"] and t["rows"][0][:2] == ["2", "7"]]
        if not hung or hung[0]["headers"][:2] != ["SEQ", "CORR"]:
            fail(f"{where}: no stream table with SEQ 2, CORR 7: {p['launches'][:3]}")
    return page


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(chromium, profile, extra, url):
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
               "--v=0", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
               "--disable-dev-shm-usage", "--user-data-dir=" + profile] + extra + [url]
    try:
        return subprocess.run(command, capture_output=True, text=True, errors="replace",
                              timeout=CHROMIUM_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        fail(f"chromium did not finish within {CHROMIUM_TIMEOUT_S} s: {' '.join(command)}")
    return None


def console_errors(stderr):
    return [line for line in stderr.splitlines()
            if "CONSOLE(" in line or "Uncaught" in line or ":CONSOLE:" in line]


class DomCheck(html.parser.HTMLParser):
    """Collects, per chart id, the SVG elements inside it, the text of the page, and the titles
    of the sortable tables' header cells."""

    def __init__(self):
        super().__init__()
        self.chart_children = {}
        self.current_chart = None
        self.depth = 0
        self.text = []
        self.header_titles = []
        self.in_sortable = False
        self.top_labels = []  # the top-kernels chart's kernel labels, as the DOM holds them
        self.in_label = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and a.get("id") in CHART_IDS:
            self.current_chart = a["id"]
            self.chart_children[self.current_chart] = []
            self.depth = 0
            return
        if self.current_chart:
            self.depth += 1
            self.chart_children[self.current_chart].append(tag)
            if (self.current_chart == "chart-top-kernels" and tag == "text"
                    and a.get("class") == "label"):
                self.in_label = True
                self.top_labels.append("")
        if tag == "table":
            self.in_sortable = "sortable" in (a.get("class") or "").split()
        if tag == "th" and self.in_sortable:
            self.header_titles.append(a.get("title"))

    def handle_endtag(self, tag):
        if tag == "text":
            self.in_label = False
        if tag == "table":
            self.in_sortable = False
        if self.current_chart:
            if tag == "svg" and self.depth == 0:
                self.current_chart = None
            else:
                self.depth -= 1

    def handle_data(self, data):
        self.text.append(data)
        if self.in_label:
            self.top_labels[-1] += data


def png_check(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    idat = b""
    pos = 8
    while pos < len(data):
        length = struct.unpack(">I", data[pos:pos + 4])[0]
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    pixels = zlib.decompress(idat)
    return width, height, len(data), len(set(pixels))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuflight", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    chromium = find_chromium()
    if chromium is None:
        fail("chromium is not installed (Debian package `chromium`; scripts/setup --tests installs it)")
    os.makedirs(args.out, exist_ok=True)
    page = os.path.abspath(os.path.join(args.out, "report.html"))
    png = os.path.abspath(os.path.join(args.out, "report.png"))
    for stale in (page, png):
        if os.path.exists(stale):
            os.remove(stale)

    with tempfile.TemporaryDirectory(prefix="cuflight-html-browser-") as tmp:
        logs = os.path.join(tmp, "logs")
        os.makedirs(logs)
        write_logs(logs)
        r = subprocess.run([args.cuflight, "report", "--html", page, logs], capture_output=True,
                           text=True, timeout=60, check=False)
        if r.returncode != 0:
            fail(f"cuflight report --html exited {r.returncode}: {r.stderr.strip()}")

        url = "file://" + page
        dom_run = run_chromium(chromium, os.path.join(tmp, "profile-dom"),
                               ["--virtual-time-budget=2000", "--dump-dom"], url)
        if dom_run.returncode != 0:
            fail(f"chromium --dump-dom exited {dom_run.returncode}: {dom_run.stderr[-2000:]}")
        errors = console_errors(dom_run.stderr)
        if errors:
            fail("console messages while loading the page:\n" + "\n".join(errors))

        dom = DomCheck()
        dom.feed(dom_run.stdout)
        for chart in CHART_IDS:
            children = dom.chart_children.get(chart)
            if children is None:
                fail(f"the DOM has no <svg id=\"{chart}\">")
            if "rect" not in children or "text" not in children:
                fail(f"<svg id=\"{chart}\"> has no drawn content: {children[:10]}")
        text = "".join(dom.text)
        if NASTY not in text:
            fail(f"the kernel name {NASTY!r} is not in the page's text")
        if "crash" not in text or "pid 200 infer on node2" not in text:
            fail("the review section does not show the crashed process")
        cutlass_labels = [t for t in dom.top_labels if "GemmShape" in t]
        if len(cutlass_labels) != len(CUTLASS) or len(set(cutlass_labels)) != len(CUTLASS):
            fail(f"the top-kernels chart does not tell the CUTLASS kernels apart: {dom.top_labels}")
        for tile, functor in [("64", "LinearCombination"), ("128", "LinearCombinationRelu")]:
            if not any(f"GemmShape<{tile}," in t and f"{functor}>" in t for t in cutlass_labels):
                fail(f"no chart label shows GemmShape<{tile}, ...> with {functor}: {cutlass_labels}")
        if not dom.header_titles or any(t != "Sort by this column" for t in dom.header_titles):
            fail("the page's script did not run (the table headers have no sorting title)")

        shot_run = run_chromium(chromium, os.path.join(tmp, "profile-shot"),
                                ["--hide-scrollbars", "--window-size=1400,2000",
                                 "--screenshot=" + png], url)
        if shot_run.returncode != 0 or not os.path.exists(png):
            fail(f"chromium --screenshot exited {shot_run.returncode} without {png}: "
                 f"{shot_run.stderr[-2000:]}")
        errors = console_errors(shot_run.stderr)
        if errors:
            fail("console messages while taking the screenshot:\n" + "\n".join(errors))
        width, height, size, distinct = png_check(png)
        if (width, height) != (1400, 2000):
            fail(f"{png} is {width}x{height}, not 1400x2000")
        if size < 20000 or distinct < 16:
            fail(f"{png} looks blank: {size} bytes, {distinct} distinct byte values")

        crash_page = check_crash_page(chromium, args.cuflight, args.out, tmp)

    print(f"page: {page}")
    print(f"32 crashed ranks: {crash_page} (laid out at 1024 and 1280 px)")
    print(f"screenshot: {png} ({width}x{height}, {size} bytes)")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
