#!/usr/bin/python3
"""Smoke test of the benchmark (bench/bench.py, what bench/run.sh runs): one
round on the three Cityscapes-like images of data/sample (page cache left
alone: --no-drop), then checks that the
report has every section with numbers, the sizes add up, and the chart is a PNG.
Timings are not checked (benchmarks are not timed tests). Each check is a TAP
line on stdout (meson's 'tap' protocol); the parts this machine cannot run (no
/dev/fuse, no GPU, no torch) are checked to say so, and are listed as skips
with the reason (scripts/test-totals.py counts them).

Environment (set by meson): L3_SOURCE_ROOT, L3_BUILD_ROOT.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

top = os.environ.get("L3_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), ".."))
build = os.environ["L3_BUILD_ROOT"]
src = os.path.join(top, "data", "sample", "leftImg8bit")
n = 0
fails = []


def check(cond, what):
    global n
    n += 1
    print(("ok" if cond else "not ok") + f" {n} - {what}", flush=True)
    if not cond:
        fails.append(what)


def skip(what, reason):
    global n
    n += 1
    print(f"ok {n} - {what} # SKIP {reason}", flush=True)


def row_cell(md, row):
    """The second cell of the report row starting with `row`, or None."""
    m = re.search(re.escape(row) + r"[^|]*\| ([^|]+) \|", md)
    return m.group(1).strip() if m else None


def is_number(cell):
    return cell is not None and re.match(r"[\d,.]+$", cell) is not None


print("TAP version 13", flush=True)
with tempfile.TemporaryDirectory(prefix="l3-bench-smoke.") as out:
    r = subprocess.run([sys.executable, os.path.join(top, "bench", "bench.py"), "--build", build,
                        "--out", out, "--runs", "1", "--jobs", "2", "--no-drop", "--quick", src],
                       capture_output=True, text=True)
    sys.stderr.write(r.stdout + "\n" + r.stderr[-3000:] + "\n")
    check(r.returncode == 0, "bench.py exits 0")
    md = open(os.path.join(out, "benchmarks.md")).read() if r.returncode == 0 else ""
    R = json.load(open(os.path.join(out, "results.json"))) if r.returncode == 0 else {}
    c = R.get("codec", {})
    for row in ("| libpng", "| PIL", "| L3 CPU, 1 thread", "| L3 CPU, 2 threads",
                "| L3 CPU batch, 2 threads", "| PNG |", "| L3 |", "| raw pixels |"):
        cell = row_cell(md, row)
        check(is_number(cell), f"report row {row!r} holds a number: {cell}")
    # The GPU row: a number when the run found a GPU, else exactly "n/a (no GPU)"
    # with no GPU time recorded.
    cell = row_cell(md, "| L3 GPU batch")
    if c.get("gpu"):
        check(is_number(cell) and (c.get("batch_gpu_s") or 0) > 0,
              f"report row 'L3 GPU batch' ({c['gpu']}) holds a number: {cell}")
    else:
        check(cell == "n/a (no GPU)" and c.get("batch_gpu_s") is None,
              f"report row 'L3 GPU batch' says no GPU: {cell}, batch_gpu_s {c.get('batch_gpu_s')}")
        skip("GPU batch decode timed", "no GPU on this machine")
    check(c.get("files") == 3 and c.get("raw_bytes") == 3 * 640 * 320 * 3,
          f"3 images, {c.get('raw_bytes')} bytes of pixels (640x320 RGB each)")
    fs = R.get("fs", {})
    fs_rows = ("png_cold", "mount_cold", "mount_warm", "objects_warm")
    if os.path.exists("/dev/fuse"):
        st = fs.get("stats", {})
        check(st.get("encodes") == 3 and st.get("encode_errors") == 0,
              f"filesystem part: 3 encodes through the mount ({st})")
        check(fs.get("mount_warm", {}).get("bytes") == c.get("l3_bytes"),
              "bytes read through the mount = L3 bytes of `l3 bench`")
        for k in fs_rows:
            check(fs.get(k, {}).get("seconds", 0) > 0, f"filesystem row {k}")
    else:
        check(fs == {"skipped": "/dev/fuse is absent"},
              f"filesystem part says /dev/fuse is absent: {fs}")
        for k in fs_rows:
            skip(f"filesystem row {k}", "/dev/fuse is absent")
    loader = R.get("loader", {})
    keys = ["png_pil", "png_pil_u8"] + (["mount_l3_cpu", "mount_l3_cpu_u8"]
                                         if os.path.exists("/dev/fuse") else [])
    if "skipped" in loader:
        try:
            import torch  # noqa: F401
            have_torch = True
        except Exception:  # noqa: BLE001 - any import failure means "no torch here"
            have_torch = False
        check(not have_torch, f"loader part skipped only without torch: {loader}")
        for k in keys:
            skip(f"loader row {k}", loader["skipped"])
    else:
        for k in keys:
            check(loader.get(k, {}).get("images_per_s", 0) > 0, f"loader row {k}: {loader.get(k)}")
        if not os.path.exists("/dev/fuse"):
            for k in ("mount_l3_cpu", "mount_l3_cpu_u8"):
                check(loader.get(k) == {"skipped": "no mount"}, f"loader row {k} says no mount")
                skip(f"loader row {k} timed", "/dev/fuse is absent")
        gpu_row = loader.get("mount_l3_gpu")
        if c.get("gpu") and os.path.exists("/dev/fuse"):
            check((gpu_row or {}).get("images_per_s", 0) > 0, f"loader row mount_l3_gpu: {gpu_row}")
        elif not c.get("gpu"):
            check(gpu_row == {"skipped": "no GPU"} or gpu_row == {"skipped": "no mount"},
                  f"loader row mount_l3_gpu says why it did not run: {gpu_row}")
            skip("loader row mount_l3_gpu timed", "no GPU on this machine")
    png = os.path.join(out, "benchmarks.png")
    check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n",
          "chart written as PNG")
print(f"1..{n}", flush=True)
sys.exit(1 if fails else 0)
