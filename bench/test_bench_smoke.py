#!/usr/bin/python3
"""Smoke test of the benchmark (bench/bench.py, what bench/run.sh runs): one
round on the three Cityscapes-like images of data/sample (page cache left
alone: --no-drop), then checks that the
report has every section with numbers, the sizes add up, and the chart is a PNG.
Timings are not checked (benchmarks are not timed tests).

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
fails = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        fails.append(what)


with tempfile.TemporaryDirectory(prefix="l3-bench-smoke.") as out:
    r = subprocess.run([sys.executable, os.path.join(top, "bench", "bench.py"), "--build", build,
                        "--out", out, "--runs", "1", "--jobs", "2", "--no-drop", "--quick", src],
                       capture_output=True, text=True)
    print(r.stdout)
    print(r.stderr[-3000:])
    check(r.returncode == 0, "bench.py exits 0")
    md = open(os.path.join(out, "benchmarks.md")).read() if r.returncode == 0 else ""
    R = json.load(open(os.path.join(out, "results.json"))) if r.returncode == 0 else {}
    for row in ("| libpng", "| PIL", "| L3 CPU, 1 thread", "| L3 CPU, 2 threads",
                "| L3 CPU batch, 2 threads", "| L3 GPU batch", "| PNG |", "| L3 |",
                "| raw pixels |"):
        m = re.search(re.escape(row) + r"[^|]*\| ([^|]+) \|", md)
        check(m is not None and (re.match(r"[\d,.]+$", m.group(1).strip())
                                 or "GPU" in row),
              f"report row {row!r}: {m.group(1).strip() if m else 'missing'}")
    c = R.get("codec", {})
    check(c.get("files") == 3 and c.get("raw_bytes") == 3 * 640 * 320 * 3,
          f"3 images, {c.get('raw_bytes')} bytes of pixels (640x320 RGB each)")
    fs = R.get("fs", {})
    if os.path.exists("/dev/fuse"):
        check(fs.get("stats", {}).get("encodes") == 3 and fs["stats"]["encode_errors"] == 0,
              f"filesystem part: 3 encodes through the mount ({fs.get('stats')})")
        check(fs.get("mount_warm", {}).get("bytes") == c.get("l3_bytes"),
              "bytes read through the mount = L3 bytes of `l3 bench`")
        for k in ("png_cold", "mount_cold", "mount_warm", "objects_warm"):
            check(k in fs and fs[k]["seconds"] > 0, f"filesystem row {k}")
    loader = R.get("loader", {})
    if "skipped" not in loader:
        keys = ["png_pil", "png_pil_u8"]
        if os.path.exists("/dev/fuse"):
            keys += ["mount_l3_cpu", "mount_l3_cpu_u8"]
        for k in keys:
            check("images_per_s" in loader.get(k, {}), f"loader row {k}: {loader.get(k)}")
    png = os.path.join(out, "benchmarks.png")
    check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n",
          "chart written as PNG")
sys.exit(1 if fails else 0)
