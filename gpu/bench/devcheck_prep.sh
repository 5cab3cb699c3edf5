#!/usr/bin/env bash
# Prepares .devcheck/ on a normal machine (libpng, xxHash, a meson build) for
# gpu/bench/device_check.sh on a GPU machine that has none of them:
#   .devcheck/include/xxhash.h   header-only xxHash for building the codec core
#   .devcheck/l3/photos/*.l3     the 16 real 2048x1024 photos (timing + checks)
#   .devcheck/l3/mixed/*.l3      PngSuite + small rendered images (every colour
#                                model and bit depth; checks)
#   .devcheck/ref.txt            checksums of the CPU decoder's output for every
#                                check file and output format, computed here
# Usage: gpu/bench/devcheck_prep.sh [BUILD_DIR]   (default: build; created if missing)
# Environment: L3_CORPUS (default /var/cache/l3fs-corpus/png).
# The folder is git-ignored; hand it to the GPU machine with the tree (the
# device tool: carry [".devcheck"]). It stays under ~40 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
corpus=${L3_CORPUS:-/var/cache/l3fs-corpus/png}
out=.devcheck
py=/usr/bin/python3
[ -d "$corpus/photos-2048" ] || { echo "devcheck_prep: no corpus at $corpus (scripts/fetch-corpus.sh)" >&2; exit 2; }
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
meson compile -C "$build" >/dev/null
rm -rf "$out"
mkdir -p "$out/include" "$out/l3/photos" "$out/l3/mixed"
xxh=$(echo '#include <xxhash.h>' | cc -E -M - 2>/dev/null | tr ' \\' '\n\n' | grep -m1 '/xxhash\.h$' || true)
cp "${xxh:-/usr/include/xxhash.h}" "$out/include/xxhash.h"
PYTHONPATH="$build/python" "$py" - "$corpus" "$out/l3" <<'PYEOF'
import os, sys
import l3
corpus, dst = sys.argv[1], sys.argv[2]
def enc(src, d, limit=None):
    n = total = 0
    for f in sorted(os.listdir(src)):
        if not f.endswith(".png"):
            continue
        with open(os.path.join(src, f), "rb") as fh:
            data = fh.read()
        try:
            e = l3.encode(data)
        except Exception:
            continue  # PngSuite's deliberately broken files
        if limit and (len(e) > limit[0] or total + len(e) > limit[1]):
            continue
        with open(os.path.join(dst, d, f[:-4] + ".l3"), "wb") as fh:
            fh.write(e)
        n += 1
        total += len(e)
    print(f"  {d}: {n} files from {src}, {total / 1e6:.1f} MB")
enc(os.path.join(corpus, "photos-2048"), "photos")
for sub in ("pngsuite", "wallpapers"):
    if os.path.isdir(os.path.join(corpus, sub)):
        enc(os.path.join(corpus, sub), "mixed", limit=(400_000, 8_000_000))
PYEOF
"$build/gpu/bench/l3gpu_devcheck" "$out" --write-ref --cpu-only | grep -E "wrote|FAIL" || true
du -sh "$out"
echo "devcheck_prep: done. On the GPU machine: gpu/bench/device_check.sh"
