"""Runs the commands of README.md and examples/README.md as written: every
```sh and ```python block, in document order, from the source root, except
blocks marked with a preceding "<!-- not run by tests/docs: REASON -->" line
(listed with their reason). Then scripts/demo.sh in its DIR mode on a tree
that is not the sample. The only rewriting is where things go: /mnt/, /tmp/
and /var/cache/l3fs point into a scratch directory, build/ is this build
directory, and build/fs and build/codec are on PATH (as after meson install).
Exit 77 (skip) without root or /dev/fuse (the blocks mount l3fs)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ["L3_SOURCE_ROOT"]
BUILD = os.environ["L3_BUILD_ROOT"]
DOCS = ["README.md", "examples/README.md"]
PY = "/usr/bin/python3"


def blocks(path):
    """(kind, first line number, text, skip reason or None) of each fenced block."""
    lines = open(path).read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(sh|python)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        skip = re.match(r"<!-- not run by tests/docs: (.*) -->", lines[j]) if j >= 0 else None
        k = i + 1
        while not lines[k].startswith("```"):
            k += 1
        out.append((m.group(1), i + 1, "\n".join(lines[i + 1:k]), skip and skip.group(1)))
        i = k + 1
    return out


def rewrite(text, tmp):
    text = re.sub(r"(?<![\w/.])/mnt/", f"{tmp}/mnt/", text)
    text = re.sub(r"(?<![\w/.])/tmp/", f"{tmp}/tmp/", text)
    text = text.replace("/var/cache/l3fs", f"{tmp}/cache")
    return re.sub(r"(?<![\w/.-])build/", BUILD + "/", text)


def unmount_all(tmp):
    for line in open("/proc/self/mountinfo"):
        mp = line.split()[4]
        if mp.startswith(tmp + "/"):
            subprocess.run(["fusermount3", "-u", mp], check=False)


def main():
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("SKIP: the documented commands mount l3fs: needs root and /dev/fuse")
        return 77
    tmp = tempfile.mkdtemp(prefix="l3docs.")
    os.makedirs(f"{tmp}/tmp")
    env = dict(os.environ)
    env["PATH"] = f"{BUILD}/fs:{BUILD}/codec:" + env["PATH"]
    env.pop("PYTHONPATH", None)  # the blocks say what they need
    failed = ran = 0
    skipped = []
    print("TAP version 13")  # one case per block (scripts/test-totals.py counts them)
    n = 0

    def case(status, text):
        nonlocal n
        n += 1
        print(f"{status} {n} - {text}", flush=True)

    try:
        for doc in DOCS:
            for kind, line, text, skip in blocks(os.path.join(SRC, doc)):
                where = f"{doc}:{line} ({kind})"
                if skip:
                    skipped.append(where)
                    case("ok", f"{where} # SKIP {skip}")
                    continue
                code = rewrite(text, tmp)
                if kind == "sh":
                    cmd = ["bash", "-euo", "pipefail", "-c", code]
                else:
                    cmd = [PY, "-c", code]
                    env_b = dict(env, PYTHONPATH=f"{BUILD}/python")
                r = subprocess.run(cmd, cwd=SRC, env=env if kind == "sh" else env_b,
                                   capture_output=True, text=True, timeout=600)
                ran += 1
                if r.returncode == 0:
                    case("ok", f"{where}: {len(text.splitlines())} lines")
                else:
                    failed += 1
                    case("not ok", f"{where}: exit {r.returncode}")
                    sys.stderr.write(f"{code}\n--- output:\n{r.stdout[-3000:]}{r.stderr[-3000:]}\n")
                    unmount_all(tmp)
        # scripts/demo.sh DIR on another tree (nested, odd names, upper-case .PNG)
        tree = f"{tmp}/tree"
        os.makedirs(f"{tree}/a b/c")
        suite = sorted(glob.glob("/var/cache/l3fs-corpus/png/pngsuite/*.png"))[:6]
        for i, p in enumerate(suite or sorted(glob.glob(f"{SRC}/data/sample/art/*.png"))):
            shutil.copy(p, f"{tree}/a b/c/img{i}.PNG" if i % 2 else f"{tree}/x{i}.png")
        r = subprocess.run([f"{SRC}/scripts/demo.sh", tree], cwd=SRC, capture_output=True,
                           text=True, env=dict(env, L3_DEMO_BUILD=BUILD), timeout=600)
        ran += 1
        if r.returncode == 0 and "demo finished" in r.stdout:
            case("ok", f"scripts/demo.sh DIR on a {len(os.listdir(tree))}-entry tree that is not the sample")
        else:
            failed += 1
            case("not ok", f"scripts/demo.sh DIR: exit {r.returncode}")
            sys.stderr.write(f"{r.stdout[-3000:]}{r.stderr[-3000:]}\n")
    finally:
        unmount_all(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{n}")
    print(f"# {ran} run, {failed} failed, {len(skipped)} not run (reasons above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
