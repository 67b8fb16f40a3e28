#!/usr/bin/env python3
"""The HTML report in a real browser: headless Chromium loads the page from hand-written logs.

Asserts: no console message or uncaught exception while it loads (the page's own script ran:
it titles every sortable column header), the four charts are in the DOM with SVG content, the
kernel name holding <&"'> arrives as text, the top-kernels chart's labels of four CUTLASS GEMMs
that differ only deep in their template arguments (tile, epilogue functor) are all different as
the browser shows them, and a screenshot of it is non-trivial. The page and
the screenshot stay in --out (report.html, report.png) for a person to look at.

Usage: html_browser_test.py --cuflight PATH/cuflight --out DIR   (runs `cuflight report --html`)
Fails with one line when Chromium (Debian package `chromium`) is not installed.
"""

import argparse
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
        fail("chromium is not installed (Debian package `chromium`; scripts/setup installs it)")
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

    print(f"page: {page}")
    print(f"screenshot: {png} ({width}x{height}, {size} bytes)")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
