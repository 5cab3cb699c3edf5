#!/usr/bin/python3
"""Side-by-side benchmark of PNG vs L3 on one directory of PNGs, in one run.

Run it through bench/run.sh, which builds what it needs and passes the paths:

    bench.py --build BUILD_DIR --out OUT_DIR [--runs R] [--jobs N] PNG_DIR

Measures, on the same files in the same run:
  decode     libpng, L3 CPU 1 thread, L3 CPU N threads (all from `l3 bench`),
             PIL (Image.load, what a PyTorch loader uses today), the Python
             module's CPU batch decode, the GPU batch decode when present;
  size       PNG, L3, raw pixels;
  filesystem cold first read through an l3fs mount (encodes on first access),
             warm read through the mount, direct read of the cache objects,
             plain read of the PNGs (page cache dropped before each where
             permitted, and again with the page cache hot);
  loader     images/s of the PyTorch example (examples/pytorch/train.py
             --loader-only) reading the PNGs with PIL vs reading the mount with
             l3.decode_batch (CPU here; GPU where present).
Writes OUT_DIR/benchmarks.md (Markdown tables), OUT_DIR/benchmarks.png (chart,
gnuplot), OUT_DIR/results.json, and prints the tables.
"""

import argparse
import csv
import datetime
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from PIL import Image
import PIL

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- helpers

DROP = True


def drop_caches():
    """Drops the page cache; False where not permitted (not root, container) or
    not wanted (--no-drop)."""
    if not DROP:
        return False
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def read_files(paths):
    """Reads every file fully (1 MiB reads); returns bytes read."""
    total = 0
    buf = bytearray(1 << 20)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                total += n
    return total


def timed_read(paths, drop, reps=1):
    """Best of `reps` timed reads of every file (page cache dropped before each if `drop`)."""
    best = None
    for _ in range(reps):
        dropped = drop_caches() if drop else False
        t0 = time.perf_counter()
        nbytes = read_files(paths)
        dt = time.perf_counter() - t0
        if best is None or dt < best["seconds"]:
            best = {"seconds": dt, "bytes": nbytes, "files": len(paths),
                    "page_cache_dropped": dropped, "reps": reps}
    return best


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# ---------------------------------------------------------------- parts

def l3_bench_round(l3, files, jobs):
    """One round of `l3 bench --csv -r 1`: per-file seconds for libpng and L3 CPU."""
    r = subprocess.run([l3, "bench", "--csv", "-r", "1", "-j", str(jobs)] + files,
                       capture_output=True, text=True, check=True)
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    if len(rows) != len(files):
        raise RuntimeError(f"l3 bench gave {len(rows)} rows for {len(files)} files: "
                           f"{r.stdout} {r.stderr}")
    return rows


def pil_round(blobs):
    """Per-file seconds of PIL's decode (Image.open + load), from memory."""
    out = []
    for b in blobs:
        t0 = time.perf_counter()
        with Image.open(io.BytesIO(b)) as im:
            im.load()
        out.append(time.perf_counter() - t0)
    return out


def module_round(groups, device, jobs, sync=None):
    """Seconds per group of same-shape images for l3.decode_batch (the loader's call)."""
    import l3
    out = []
    for bufs in groups:
        kw = {"threads": jobs} if device == "cpu" else {}
        t0 = time.perf_counter()
        batch = l3.decode_batch(bufs, device=device, layout="NHWC", dtype="uint8", **kw)
        if sync:
            sync()
        out.append(time.perf_counter() - t0)
        del batch
    return out


def decode_numbers(l3_cli, files, runs, jobs):
    """All decoders, interleaved: each round runs every decoder once over all files;
    the result is the best time of each file (or batch) over the rounds."""
    import l3
    blobs = [open(f, "rb").read() for f in files]
    log("encoding the PNGs for the Python module (l3.encode)")
    l3_blobs = [l3.encode(b) for b in blobs]
    groups = {}
    for b in l3_blobs:
        i = l3.info(b)
        groups.setdefault((i["width"], i["height"], i["channels"], i["bit_depth"]), []).append(b)
    groups = list(groups.values())
    gpu = None
    sync = None
    if l3.cuda_available():
        try:
            import torch
            sync = torch.cuda.synchronize
            gpu = torch.cuda.get_device_name(0)
            module_round(groups, "cuda", jobs, sync)  # warm-up: context, staging buffers
        except ImportError:
            gpu = None
    best = {}

    def keep(key, times):
        best[key] = [min(a, b) for a, b in zip(best[key], times)] if key in best else times

    rows = None
    for r in range(runs):
        log(f"decode round {r + 1}/{runs}: l3 bench (libpng, L3 1 and {jobs} threads), "
            "PIL, l3.decode_batch" + (" (CPU, GPU)" if gpu else " (CPU)"))
        rows = l3_bench_round(l3_cli, files, jobs)
        keep("libpng", [float(x["libpng_decode_s"]) for x in rows])
        keep("l3_1t", [float(x["l3_decode_1t_s"]) for x in rows])
        nt = [k for k in rows[0] if k.startswith("l3_decode_") and k != "l3_decode_1t_s"][0]
        keep("l3_nt", [float(x[nt]) for x in rows])
        keep("pil", pil_round(blobs))
        keep("batch_cpu", module_round(groups, "cpu", jobs))
        if gpu:
            keep("batch_gpu", module_round(groups, "cuda", jobs, sync))
    tot = lambda k: sum(float(x[k]) for x in rows)  # noqa: E731
    return {
        "files": len(rows), "raw_bytes": tot("raw_bytes"), "png_bytes": tot("png_bytes"),
        "l3_bytes": tot("l3_bytes"), "libpng_s": sum(best["libpng"]),
        "l3_1t_s": sum(best["l3_1t"]), "l3_nt_s": sum(best["l3_nt"]),
        "l3_nt_threads": int(nt[len("l3_decode_"):-len("t_s")]),
        "pil_s": sum(best["pil"]), "batch_cpu_s": sum(best["batch_cpu"]),
        "batch_gpu_s": sum(best["batch_gpu"]) if gpu else None, "gpu": gpu,
        "batches": len(groups),
    }


def mount(l3fs, src, mnt, cache):
    subprocess.run([l3fs, src, mnt, "--cache-dir", cache], check=True)
    for _ in range(200):
        if os.path.exists(os.path.join(mnt, ".l3fs", "stats.json")):
            return
        time.sleep(0.05)
    raise RuntimeError(f"l3fs did not come up at {mnt}")


def fs_numbers(l3fs, png_dir, pngs, tmp, cold_rounds=2):
    """Cold / warm reads through a fresh l3fs mount, cache objects, plain PNGs.
    The cold read is measured on `cold_rounds` fresh caches (best one kept)."""
    if not os.path.exists("/dev/fuse"):
        return {"skipped": "/dev/fuse is absent"}
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    res = {"mnt": mnt, "cold_rounds": cold_rounds}
    rel = [os.path.relpath(p, png_dir) for p in pngs]
    l3_paths = [os.path.join(mnt, r[:-4] + ".l3") for r in rel]
    log("filesystem: plain PNG read (page cache dropped)")
    res["png_cold"] = timed_read(pngs, drop=True, reps=3)
    for i in range(cold_rounds):
        cache = os.path.join(tmp, f"cache{i}")
        mount(l3fs, png_dir, mnt, cache)
        try:
            log(f"filesystem: cold first read through a fresh mount (encodes), "
                f"{i + 1}/{cold_rounds}")
            cold = timed_read(l3_paths, drop=True)
            with open(os.path.join(mnt, ".l3fs", "stats.json")) as f:
                cold["encode_time_ms"] = json.load(f)["encode_time_ms"]
            if "mount_cold" not in res or cold["seconds"] < res["mount_cold"]["seconds"]:
                res["mount_cold"] = cold
        except BaseException:
            subprocess.run(["fusermount3", "-u", mnt])
            raise
        if i + 1 < cold_rounds:
            subprocess.run(["fusermount3", "-u", mnt], check=True)
    try:
        log("filesystem: warm read through the mount (page cache dropped)")
        res["mount_warm"] = timed_read(l3_paths, drop=True, reps=3)
        objects = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(cache, "objects"))
                         for f in fs if f.endswith(".l3"))
        log("filesystem: direct read of the cache objects (page cache dropped)")
        res["objects_warm"] = timed_read(objects, drop=True, reps=3)
        # Page cache hot: read once to fill it, then time the second read.
        for key, paths in (("png_hot", pngs), ("mount_hot", l3_paths), ("objects_hot", objects)):
            read_files(paths)
            res[key] = timed_read(paths, drop=False, reps=3)
        with open(os.path.join(mnt, ".l3fs", "stats.json")) as f:
            res["stats"] = json.load(f)["fs"]
    except BaseException:
        subprocess.run(["fusermount3", "-u", mnt])
        raise
    res["unmount"] = lambda: subprocess.run(["fusermount3", "-u", mnt], check=False)
    return res


def loader_numbers(png_dir, mnt, build, jobs, device, rounds=2):
    """The PyTorch example in --loader-only mode: PNG+PIL vs the mount + l3,
    alternating, best of `rounds`."""
    try:
        import torch  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return {"skipped": f"torch not importable ({e})"}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(build, "python") + os.pathsep + env.get("PYTHONPATH", "")
    train = os.path.join(TOP, "examples", "pytorch", "train.py")
    out = {}
    n = sum(1 for d, _, fs in os.walk(png_dir) for f in fs if f.lower().endswith(".png"))
    batch = 4 if n >= 8 else max(1, n // 2)
    steps = max(2, 2 * (n // batch))  # about two epochs, after one warm-up batch
    configs = (("png_pil", png_dir, ".png", "cpu", "float32"),
               ("mount_l3_cpu", mnt, ".l3", "cpu", "float32"),
               ("mount_l3_gpu", mnt, ".l3", "cuda", "float32"),
               ("png_pil_u8", png_dir, ".png", "cpu", "uint8"),
               ("mount_l3_cpu_u8", mnt, ".l3", "cpu", "uint8"))
    for rnd in range(rounds):
        for name, root, ext, dev, dtype in configs:
            if root is None:
                out[name] = {"skipped": "no mount"}
                continue
            if dev == "cuda" and device != "cuda":
                out[name] = {"skipped": "no GPU"}
                continue
            if "skipped" in out.get(name, {}):
                continue
            log(f"loader round {rnd + 1}/{rounds}: {name} (batch {batch}, {steps} steps, "
                f"{jobs} workers)")
            r = subprocess.run([sys.executable, train, root, "--layout", "imagefolder",
                                "--ext", ext, "--loader-only", "--json", "--device", dev,
                                "--batch-size", str(batch), "--steps", str(steps),
                                "--workers", str(jobs), "--dtype", dtype],
                               capture_output=True, text=True, env=env)
            if r.returncode != 0:
                msg = (r.stderr.strip().splitlines() or ["failed"])[-1]
                out[name] = {"skipped": f"failed: {msg}"}
                continue
            res = json.loads(r.stdout.strip().splitlines()[-1])
            if res["images_per_s"] > out.get(name, {}).get("images_per_s", 0):
                out[name] = res
    return out


# ---------------------------------------------------------------- report

def fmt(v, nd=1):
    return "n/a" if v is None else f"{v:,.{nd}f}"


def make_report(R):
    c = R["codec"]
    n = c["files"]
    raw = c["raw_bytes"]
    mb = raw / 1e6
    lines = []
    A = lines.append
    A(f"Machine: {R['machine']['cpu']}, {R['machine']['nproc']} CPUs"
      f"{', GPU ' + R['machine']['gpu'] if R['machine']['gpu'] else ', no GPU'}; "
      f"{R['date']}; load average {R['machine']['loadavg_start']} at the start, "
      f"{R['machine']['loadavg_end']} at the end (other processes share the CPUs: compare "
      "rows of one run, not runs).  ")
    A(f"Data: `{R['png_dir']}`, {n} PNGs, {mb:.1f} MB of decoded pixels.  ")
    A(f"Command: `{R['command']}`")
    A("")
    A(f"#### Decode throughput (from memory; {R['runs']} interleaved rounds of all decoders, "
      "best round per file)")
    A("")
    A("| decoder | MB/s of pixels | images/s | vs libpng |")
    A("| --- | ---: | ---: | ---: |")
    rows = [("libpng (`l3 bench`)", c["libpng_s"]),
            (f"PIL {PIL.__version__} (`Image.load`)", c["pil_s"]),
            ("L3 CPU, 1 thread (libl3, `l3 bench`)", c["l3_1t_s"]),
            (f"L3 CPU, {c['l3_nt_threads']} threads (libl3, `l3 bench`)", c["l3_nt_s"]),
            (f"L3 CPU batch, {R['jobs']} threads (`l3.decode_batch`)",
             c["batch_cpu_s"])]
    chart = []
    for name, s in rows:
        A(f"| {name} | {fmt(mb / s)} | {fmt(n / s)} | {c['libpng_s'] / s:.2f}x |")
        chart.append((name.split(" (")[0].replace("PIL " + PIL.__version__, "PIL"), mb / s))
    g = c["batch_gpu_s"]
    if g:
        A(f"| L3 GPU batch ({c['gpu']}, `l3.decode_batch`) | {fmt(mb / g)} | "
          f"{fmt(n / g)} | {c['libpng_s'] / g:.2f}x |")
        chart.append(("L3 GPU batch", mb / g))
    else:
        A("| L3 GPU batch | n/a (no GPU) | n/a | n/a |")
        chart.append(("L3 GPU batch", None))
    A("")
    A("#### Size")
    A("")
    A("| | bytes | vs PNG |")
    A("| --- | ---: | ---: |")
    for name, b in (("PNG", c["png_bytes"]), ("L3", c["l3_bytes"]), ("raw pixels", raw)):
        A(f"| {name} | {int(b):,} | {b / c['png_bytes']:.3f} |")
    A("")
    F = R["fs"]
    fs_chart = []
    if "skipped" in F:
        A(f"#### Filesystem: skipped ({F['skipped']})")
    else:
        dropped = F["png_cold"]["page_cache_dropped"]
        A("#### Filesystem (sequential reads of every file, one reader, 1 MiB reads; "
          f"best of 3, the cold read best of {F['cold_rounds']} fresh caches)")
        A("")
        A("Page cache " + ("dropped (`echo 3 > /proc/sys/vm/drop_caches`) before each "
                           "'dropped' run." if dropped else
                           "was NOT dropped in this run (not permitted, or --no-drop): "
                           "'dropped' runs may be served from memory."))
        A("")
        A("| read | page cache | MB/s of file bytes | images/s | MB/s of pixels |")
        A("| --- | --- | ---: | ---: | ---: |")
        for key, name, pc in (("png_cold", "plain read of the PNGs", "dropped"),
                              ("mount_cold", "cold first read through the mount (encodes)",
                               "dropped"),
                              ("mount_warm", "warm read through the mount", "dropped"),
                              ("objects_warm", "direct read of the cache objects", "dropped"),
                              ("png_hot", "plain read of the PNGs", "hot"),
                              ("mount_hot", "warm read through the mount", "hot"),
                              ("objects_hot", "direct read of the cache objects", "hot")):
            x = F[key]
            s = x["seconds"]
            A(f"| {name} | {pc} | {fmt(x['bytes'] / 1e6 / s)} | {fmt(x['files'] / s)} | "
              f"{fmt(mb / s)} |")
            fs_chart.append((f"{name.split(' (')[0]} ({pc})", x["bytes"] / 1e6 / s))
        mw = F["objects_warm"]["seconds"] / F["mount_warm"]["seconds"]
        mh = F["objects_hot"]["seconds"] / F["mount_hot"]["seconds"]
        cold = F["mount_cold"]["seconds"] / n
        A("")
        A(f"Mount vs direct read of the same objects: {mw:.0%} (page cache dropped), "
          f"{mh:.0%} (hot). Cold first read: {cold * 1e3:.1f} ms per image including the "
          f"encode, vs {c['libpng_s'] / n * 1e3:.1f} ms for a bare libpng decode "
          f"({cold / (c['libpng_s'] / n):.2f}x); l3fs's encode time per image "
          f"p50 {F['mount_cold']['encode_time_ms']['p50']:.0f} ms, "
          f"max {F['mount_cold']['encode_time_ms']['max']:.0f} ms. "
          f"Mount statistics: {F['stats']['encodes']} encodes, "
          f"{F['stats']['l3_open_hits']} open hits, {F['stats']['encode_errors']} errors.")
    A("")
    L = R["loader"]
    ld_chart = []
    if "skipped" in L:
        A(f"#### Loader: skipped ({L['skipped']})")
    else:
        some = next((v for v in L.values() if "images_per_s" in v), None)
        A("#### Loader (PyTorch DataLoader, `examples/pytorch/train.py --loader-only`)")
        A("")
        if some:
            A(f"ImageFolder over the directory, batch {some['batch_size']}, "
              f"{some['workers']} workers, {some['images']} images timed after one warm-up "
              f"batch, best of {R['loader_rounds']} alternating runs. "
              "The mount is warm (second epoch on). "
              "float32: the workers hand over float32 NCHW normalised batches (ToTensor + "
              "Normalize), as a model consumes them; uint8: the workers hand over uint8 "
              "NCHW (4x fewer bytes through shared memory) and the training loop normalises "
              "on its device (`--dtype uint8`).")
            A("")
        A("| loader | batch output | images/s | MB/s of pixels | vs PNG + PIL |")
        A("| --- | --- | ---: | ---: | ---: |")
        for key, name, dt in (
                ("png_pil", "PNG files, PIL decode in workers", "float32"),
                ("mount_l3_cpu", "l3fs mount, `l3.decode_batch` in workers (CPU)", "float32"),
                ("mount_l3_gpu", "l3fs mount, `l3.decode_batch` on the GPU", "float32"),
                ("png_pil_u8", "PNG files, PIL decode in workers", "uint8"),
                ("mount_l3_cpu_u8", "l3fs mount, `l3.decode_batch` in workers (CPU)", "uint8")):
            base = L.get("png_pil" if dt == "float32" else "png_pil_u8", {}).get("images_per_s")
            v = L.get(key, {})
            if "images_per_s" not in v:
                A(f"| {name} | {dt} | n/a ({v.get('skipped', '?')}) | n/a | n/a |")
                if key == "mount_l3_gpu":
                    ld_chart.append(("l3fs + l3 GPU, float32", None))
                continue
            ips = v["images_per_s"]
            A(f"| {name} | {dt} | {fmt(ips)} | {fmt(ips * mb / n)} | "
              f"{(ips / base) if base else float('nan'):.2f}x |")
            ld_chart.append(({"png_pil": "PNG + PIL (workers), float32",
                              "mount_l3_cpu": "l3fs + l3 CPU (workers), float32",
                              "mount_l3_gpu": "l3fs + l3 GPU, float32",
                              "png_pil_u8": "PNG + PIL (workers), uint8",
                              "mount_l3_cpu_u8": "l3fs + l3 CPU (workers), uint8"}[key], ips))
    A("")
    return "\n".join(lines), chart, fs_chart, ld_chart


def _label(v):
    if v is None:
        return "n/a (no GPU)"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def make_chart(out_dir, title, chart, fs_chart, ld_chart):
    """Three horizontal bar panels stacked vertically (PNG via gnuplot's cairo terminal)."""
    gp = shutil.which("gnuplot")
    if not gp:
        return "gnuplot not found"
    panels = [("Decode throughput, MB/s of decoded pixels (higher is better)", "#4a7ebb",
               chart, False),
              ("File reads, MB/s of file bytes (log scale; higher is better)", "#6aa84f",
               fs_chart, True),
              ("PyTorch DataLoader, images/s (higher is better)", "#e69138", ld_chart, False)]
    panels = [p for p in panels if p[2]]
    row_px, pad_px, top_px = 34, 95, 50
    heights = [pad_px + row_px * len(p[2]) for p in panels]
    total = top_px + sum(heights)
    png = os.path.join(out_dir, "benchmarks.png")
    script = [f"set terminal pngcairo size 1300,{total} font 'DejaVu Sans,11' noenhanced",
              f"set output '{png}'",
              "set multiplot",
              f"set label 1 \"{title}\" at screen 0.5, screen {1 - 22 / total:.4f} center "
              "font ',13'",
              "set style fill solid 0.85 border -1",
              "set grid xtics lc rgb '#dddddd'",
              "unset key",
              "set lmargin at screen 0.30",
              "set rmargin at screen 0.96"]
    y = 1 - top_px / total
    for i, ((ttl, colour, rows, log), h) in enumerate(zip(panels, heights)):
        lo = 1 if log else 0
        path = os.path.join(out_dir, f"chart{i}.dat")
        with open(path, "w") as f:
            for name, v in rows:
                f.write(f"\"{name}\" {lo if v is None else v:.4f} \"{_label(v)}\"\n")
        frac = h / total
        y -= frac
        top = max(v for _, v in rows if v is not None)
        lo = 1 if log else 0
        script += [f"set origin 0,{y:.4f}", f"set size 1,{frac:.4f}",
                   f"set title '{ttl}'",
                   "set logscale x" if log else "unset logscale x",
                   f"set xrange [{lo}:{top * (4 if log else 1.18):.4f}]",
                   f"set yrange [{len(rows) - 0.5}:-0.5]",
                   "unset label 1" if i else "",
                   f"plot '{path}' using ({lo}):0:({lo}):2:($0-0.32):($0+0.32):ytic(1) "
                   f"with boxxyerror lc rgb '{colour}', "
                   "'' using 2:0:(' '.stringcolumn(3)) with labels left font ',10'"]
    script.append("unset multiplot")
    with open(os.path.join(out_dir, "benchmarks.gp"), "w") as f:
        f.write("\n".join(x for x in script if x) + "\n")
    r = subprocess.run([gp, os.path.join(out_dir, "benchmarks.gp")], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return "gnuplot failed: " + r.stderr.strip()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("png_dir")
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--command", default=None, help="command line to record")
    ap.add_argument("--quick", action="store_true",
                    help="one cold mount and one loader round (for the smoke test)")
    ap.add_argument("--no-drop", action="store_true",
                    help="never drop the page cache (the 'dropped' runs then say so)")
    args = ap.parse_args()
    global DROP
    DROP = not args.no_drop
    sys.path.insert(0, os.path.join(args.build, "python"))
    import l3  # noqa: F401  (fail early when the module is not built)

    png_dir = os.path.abspath(args.png_dir)
    pngs = sorted(os.path.join(d, f) for d, _, fs in os.walk(png_dir) for f in fs
                  if f.lower().endswith(".png"))
    if not pngs:
        sys.exit(f"no PNG files under {png_dir}")
    os.makedirs(args.out, exist_ok=True)
    t_start = time.perf_counter()
    load_start = loadavg()
    R = {"png_dir": png_dir, "runs": args.runs, "jobs": args.jobs,
         "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
         "command": args.command or " ".join(sys.argv)}
    l3_cli = os.path.join(args.build, "codec", "l3")
    R["codec"] = decode_numbers(l3_cli, pngs, args.runs, args.jobs)
    R["machine"] = {"cpu": cpu_model(), "nproc": os.cpu_count(), "gpu": R["codec"]["gpu"],
                    "loadavg_start": load_start,
                    "kernel": platform.release()}
    l3fs = os.path.join(args.build, "fs", "l3fs")
    with tempfile.TemporaryDirectory(prefix="l3-bench.") as tmp:
        if os.access(l3fs, os.X_OK):
            F = fs_numbers(l3fs, png_dir, pngs, tmp, cold_rounds=1 if args.quick else 2)
        else:
            F = {"skipped": "l3fs not built"}
        unmount = F.pop("unmount", None)
        try:
            device = "cuda" if R["codec"]["gpu"] else "cpu"
            R["loader"] = loader_numbers(png_dir, F.get("mnt"), args.build, args.jobs, device,
                                         rounds=1 if args.quick else 2)
        finally:
            if unmount:
                unmount()
    R["fs"] = F
    R["loader_rounds"] = 1 if args.quick else 2
    R["elapsed_s"] = time.perf_counter() - t_start
    R["machine"]["loadavg_end"] = loadavg()
    md, chart, fs_chart, ld_chart = make_report(R)
    with open(os.path.join(args.out, "benchmarks.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(R, f, indent=1, default=str)
    title = (f"l3fs benchmark: {len(pngs)} PNGs from {os.path.basename(png_dir)}; "
             f"{R['machine']['cpu']} x{R['machine']['nproc']}, "
             f"{R['machine']['gpu'] or 'no GPU'}; {R['date']}")
    err = make_chart(args.out, title, chart, fs_chart, ld_chart)
    print(md)
    print(f"\n(benchmark took {R['elapsed_s']:.0f} s; tables in "
          f"{os.path.join(args.out, 'benchmarks.md')}, chart "
          f"{os.path.join(args.out, 'benchmarks.png') if not err else 'not written: ' + err})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
