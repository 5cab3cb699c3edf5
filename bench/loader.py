#!/usr/bin/python3
"""PyTorch DataLoader throughput: PNG + PIL vs an l3fs mount + l3.torch, side by
side in one run, same images, same workers, same batch size, same order.

    loader.py --build BUILD [--workers 2] [--batch 4] [--steps 40] [--rounds 3]
              [--configs a,b,...] [--json FILE] PNG_DIR...

The PNGs (all the same size) are linked into one ImageFolder tree (a class per
directory), l3fs mounts it and every .l3 is read once (the mount is warm: each
file is encoded and cached before timing). Each round runs every loader once,
in turn, each in a fresh process:

  png_pil      torchvision ImageFolder + transforms.PILToTensor() + the default
               collate: uint8 (N, 3, H, W) batches, what a PyTorch user has today
  l3           l3.torch.ImageFolder over the mount + l3.torch.loader: the batch
               decoded in the worker straight into one shared-memory uint8
               (N, 3, H, W) tensor, 1 decode thread per worker
  l3_t2        the same with 2 decode threads per worker
  png_pil_f32  torchvision with ToTensor() + Normalize(): float32 batches
  l3_f32       l3.torch with dtype float32 and mean/std fused into the decode

A loader is timed in its steady state, from batch 2 * workers (workers
started, prefetch queue full) to the same distance before its last batch:
(steps - 1 - 4 * workers) * batch images per run; the best run counts.
Over the same span the CPU time of the workers and of the main process is
read from /proc (user + system, page faults and IPC included; for the l3
loaders the l3fs daemon's too, as the reads go through it): CPU ms per
image, which a shared machine's load inflates far less than wall time (the
ratio of images/s per CPU second is the load-robust comparison).
The images come from one random order (fixed seed) drawn without repetition
inside each pass over the data, the same for every loader.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = ["png_pil", "l3", "l3_t2", "png_pil_f32", "l3_f32"]
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def log(msg):
    print(f"[loader {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _cpu_s(pids):
    """User + system CPU seconds of these processes so far (/proc/PID/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    tot = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tot += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return tot


def _daemon_pid(mnt):
    """The l3fs process serving `mnt` (its CPU time counts for the l3 loaders:
    the reads go through it), or None."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and os.path.basename(argv[0]) == b"l3fs" and os.fsencode(mnt) in argv:
                return int(d)
    return None


def run_one(cfg, root, workers, batch, steps, daemon=None):
    """One loader in this process; returns images/s."""
    import torch
    import torch.utils.data as tud
    g = torch.Generator()
    g.manual_seed(1234)
    if cfg.startswith("png_pil"):
        import torchvision
        import torchvision.transforms as T
        tf = T.PILToTensor() if cfg == "png_pil" else T.Compose([T.ToTensor(),
                                                               T.Normalize(MEAN, STD)])
        ds = torchvision.datasets.ImageFolder(root, transform=tf)
        sampler = tud.RandomSampler(ds, num_samples=steps * batch, generator=g)
        # persistent workers, as l3.torch.loader makes them: alive (and
        # their CPU time readable) until the loader goes
        dl = tud.DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers,
                            drop_last=True, persistent_workers=workers > 0)
    else:
        import l3.torch
        kw = {}
        if cfg == "l3_t2":
            kw["threads"] = 2
        if cfg == "l3_f32":
            kw.update(dtype="float32", mean=MEAN, std=STD)
        ds = l3.torch.ImageFolder(root, **kw)
        sampler = tud.RandomSampler(ds, num_samples=steps * batch, generator=g)
        dl = l3.torch.loader(ds, batch, num_workers=workers, sampler=sampler, shuffle=False)
    # Steady state: the clocks start at batch `edge` and stop at batch
    # steps - 1 - edge, with the workers' prefetch queue full at both ends
    # (edge = the batches in flight); the last batches, when the queue
    # drains, are not timed.
    edge = workers * 2 if workers else 0  # DataLoader's prefetch_factor 2
    if steps - 1 - 2 * edge < 1:
        raise SystemExit(f"--steps must exceed {2 * edge + 1} with {workers} workers")
    it = iter(dl)
    pids = [w.pid for w in getattr(it, "_workers", [])] + ([daemon] if daemon else [])
    shape = None
    n = 0
    for i, (x, _) in enumerate(it):
        if i == edge:
            shape = (tuple(x.shape), str(x.dtype))
            c0 = _cpu_s(pids) + time.process_time()
            t0 = time.perf_counter()
        elif edge < i <= steps - 1 - edge:
            n += x.shape[0]
            if i == steps - 1 - edge:
                dt = time.perf_counter() - t0
                cpu = _cpu_s(pids) + time.process_time() - c0
    return {"images": n, "seconds": dt, "images_per_s": n / dt, "batch": shape,
            "cpu_s": cpu, "cpu_ms_per_image": 1e3 * cpu / n}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="*")
    p.add_argument("--build", required=True)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--json", default=None)
    p.add_argument("--run", default=None, help=argparse.SUPPRESS)  # CONFIG ROOT (child)
    p.add_argument("--root", default=None, help=argparse.SUPPRESS)
    p.add_argument("--daemon-pid", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.run:
        r = run_one(args.run, args.root, args.workers, args.batch, args.steps,
                    args.daemon_pid)
        print(json.dumps(r))
        return 0
    configs = args.configs.split(",")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.abspath(args.build), "python") + os.pathsep + \
        env.get("PYTHONPATH", "")
    l3fs = os.path.join(args.build, "fs", "l3fs")
    res = {"workers": args.workers, "batch": args.batch, "steps": args.steps,
           "rounds": args.rounds, "loadavg": [os.getloadavg()[0]], "runs": {}}
    with tempfile.TemporaryDirectory(prefix="l3-loader-bench.") as tmp:
        src = os.path.join(tmp, "src")
        n = 0
        for d in args.dirs:
            cls = os.path.join(src, os.path.basename(os.path.normpath(d)))
            os.makedirs(cls, exist_ok=True)
            for f in sorted(os.listdir(d)):
                if f.lower().endswith(".png"):
                    s, t = os.path.join(d, f), os.path.join(cls, f)
                    try:
                        os.link(s, t)
                    except OSError:
                        shutil.copyfile(s, t)
                    n += 1
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        subprocess.run([l3fs, src, mnt, "--cache-dir", os.path.join(tmp, "cache")], check=True)
        try:
            for _ in range(200):
                if os.path.exists(os.path.join(mnt, ".l3fs", "stats.json")):
                    break
                time.sleep(0.05)
            log(f"warming the mount: {n} PNGs encoded on first read")
            got = 0
            for dp, _, fs in os.walk(mnt):
                for f in fs:
                    if f.endswith(".l3"):
                        with open(os.path.join(dp, f), "rb") as fh:
                            fh.read()
                        got += 1
            if got != n:
                raise RuntimeError(f"the mount shows {got} .l3 files for {n} PNGs")
            res["images_in_dataset"] = n
            daemon = _daemon_pid(mnt)
            if daemon is None:
                raise RuntimeError(f"no l3fs process found serving {mnt}")
            for r in range(args.rounds):
                for cfg in configs:
                    root = src if cfg.startswith("png") else mnt
                    log(f"round {r + 1}/{args.rounds}: {cfg}")
                    out = subprocess.run(
                        [sys.executable, os.path.abspath(__file__), "--build", args.build,
                         "--run", cfg, "--root", root, "--workers", str(args.workers),
                         "--batch", str(args.batch), "--steps", str(args.steps)] +
                        ([] if cfg.startswith("png") else ["--daemon-pid", str(daemon)]),
                        capture_output=True, text=True, env=env)
                    if out.returncode:
                        raise RuntimeError(f"{cfg} failed: {out.stderr[-2000:]}")
                    one = json.loads(out.stdout.strip().splitlines()[-1])
                    res["runs"].setdefault(cfg, []).append(one)
        finally:
            subprocess.run(["fusermount3", "-u", mnt])
    res["loadavg"].append(os.getloadavg()[0])
    best = {c: max(x["images_per_s"] for x in v) for c, v in res["runs"].items()}
    cpu = {c: min(x["cpu_ms_per_image"] for x in v) for c, v in res["runs"].items()}
    res["best"] = best
    res["best_cpu_ms_per_image"] = cpu
    print(f"{n} images ({args.dirs}), batch {args.batch}, {args.workers} workers, "
          f"{(args.steps - 1 - 4 * args.workers) * args.batch} images timed per run, best of {args.rounds}; "
          f"load average {res['loadavg'][0]:.2f} -> {res['loadavg'][1]:.2f}")
    print("| loader | batch | images/s (best) | runs | vs PNG + PIL | CPU ms/image (best) | "
          "runs | vs PNG + PIL (CPU) |")
    print("| --- | --- | ---: | --- | ---: | ---: | --- | ---: |")
    for c in configs:
        refc = "png_pil_f32" if c.endswith("f32") else "png_pil"
        ref, ref_cpu = best.get(refc), cpu.get(refc)
        runs = ", ".join(f"{x['images_per_s']:.1f}" for x in res["runs"][c])
        cruns = ", ".join(f"{x['cpu_ms_per_image']:.0f}" for x in res["runs"][c])
        shape = res["runs"][c][0]["batch"]
        ratio = f"{best[c] / ref:.2f}x" if ref else "n/a"
        cratio = f"{ref_cpu / cpu[c]:.2f}x" if ref_cpu else "n/a"
        print(f"| {c} | {shape[1].replace('torch.', '')} {shape[0]} | {best[c]:.1f} | {runs} | "
              f"{ratio} | {cpu[c]:.1f} | {cruns} | {cratio} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
