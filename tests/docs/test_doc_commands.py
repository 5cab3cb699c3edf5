"""Runs the commands of every README.md (README.md, examples/, bench/) as written: every
```sh and ```python block, in document order, from the source root, except
blocks marked with a preceding "<!-- not run by tests/docs: REASON -->" line
(listed with their reason). Then scripts/demo.sh on the sample and in its DIR
mode on a tree that is not the sample, with this build (L3_DEMO_BUILD). Fails
when a README.md of the tree is not in DOCS or has a ```bash (console, ...)
block this test would not run. The only rewriting is where things go: /mnt/, /tmp/
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
DOCS = ["README.md", "examples/README.md", "bench/README.md"]
OTHER_CODE = ("bash", "shell", "console", "zsh", "py", "python3", "pycon")  # fences to write as sh/python


def readmes():
    """Every README.md of the tree (build directories and hidden ones left out)."""
    found = []
    for top, dirs, files in os.walk(SRC):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
        found += [os.path.relpath(os.path.join(top, f), SRC) for f in files if f == "README.md"]
    return sorted(found)
PY = "/usr/bin/python3"


def blocks(path):
    """(kind, first line number, text, skip reason or None) of each fenced block."""
    lines = open(path).read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w+)\s*$", lines[i])
        if not m:
            i += 1
            continue
        if m.group(1) not in ("sh", "python"):  # a shell or Python block this test would miss
            if m.group(1) in OTHER_CODE:
                out.append((m.group(1), i + 1, "", None))
            i += 1
            while not lines[i].startswith("```"):
                i += 1
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
        missed = sorted(set(readmes()) - set(DOCS))
        if missed:
            failed += 1
            case("not ok", f"README files whose commands this test does not run: {', '.join(missed)}")
        else:
            case("ok", f"every README.md of the tree is run: {', '.join(DOCS)}")
        for doc in DOCS:
            for kind, line, text, skip in blocks(os.path.join(SRC, doc)):
                where = f"{doc}:{line} ({kind})"
                if kind not in ("sh", "python"):
                    failed += 1
                    case("not ok", f"{where}: a ```{kind} block is not run (write it as ```sh or ```python)")
                    continue
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
        # scripts/demo.sh as the quick start runs it (sample tree), then DIR mode;
        # the build is this one (L3_DEMO_BUILD: no apt, no second build)
        for args, what in (([], "scripts/demo.sh (the sample tree)"),
                           ([tree], f"scripts/demo.sh DIR on a {len(os.listdir(tree))}-entry tree "
                                    "that is not the sample")):
            r = subprocess.run([f"{SRC}/scripts/demo.sh", *args], cwd=SRC, capture_output=True,
                               text=True, env=dict(env, L3_DEMO_BUILD=BUILD), timeout=600)
            ran += 1
            if r.returncode == 0 and "demo finished" in r.stdout:
                case("ok", what)
            else:
                failed += 1
                case("not ok", f"{what}: exit {r.returncode}")
                sys.stderr.write(f"{r.stdout[-3000:]}{r.stderr[-3000:]}\n")
    finally:
        unmount_all(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{n}")
    print(f"# {ran} run, {failed} failed, {len(skipped)} not run (reasons above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
