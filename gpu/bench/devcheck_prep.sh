#!/usr/bin/env bash
# Prepares .devcheck/ (git-ignored, at most 60 MiB) on a normal machine for
# gpu/bench/device_check.sh on a GPU machine that has no libpng, xxHash or
# network. Run from the tree's root with no arguments:
#   .devcheck/include/xxhash.h   xxHash, used header-only by the codec core
#   .devcheck/l3/photos/*.l3     real 2048x1024 photos, pre-encoded (only when
#                                the corpus is present: scripts/fetch-corpus.sh);
#                                each one's l3.decode is first compared with
#                                PIL's decode of the PNG
#   .devcheck/ref.txt            hash of each photo's decoded pixels
# Everything else the device check needs it generates itself.
# Environment: L3_CORPUS (default /var/cache/l3fs-corpus/png), L3_BUILD (a
# configured meson build to reuse; default build-devprep, made if missing),
# L3_DEVCHECK_DIR (for tests: another folder than .devcheck).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${L3_DEVCHECK_DIR:-.devcheck}
corpus=${L3_CORPUS:-/var/cache/l3fs-corpus/png}
build=${L3_BUILD:-build-devprep}
py=/usr/bin/python3
rm -rf "$out"
mkdir -p "$out/include" "$out/l3/photos"
xxh=$(echo '#include <xxhash.h>' | cc -E -M - 2>/dev/null | tr ' \\' '\n\n' | grep -m1 '/xxhash\.h$' || true)
[ -n "$xxh" ] || { echo "devcheck_prep: xxhash.h not found (apt-get install libxxhash-dev)" >&2; exit 2; }
cp "$xxh" "$out/include/xxhash.h"
photos=$corpus/photos-2048
if [ -d "$photos" ]; then
    [ -f "$build/build.ninja" ] || meson setup "$build" -Dtests=false >/dev/null
    meson compile -C "$build" l3gpu_devcheck _l3 >/dev/null 2>&1 ||
        meson compile -C "$build" >/dev/null
    PYTHONPATH="$build/python" "$py" - "$photos" "$out/l3/photos" <<'PYEOF'
import io, os, sys
import numpy as np
from PIL import Image
import l3
src, dst = sys.argv[1], sys.argv[2]
n = total = 0
for f in sorted(os.listdir(src)):
    if not f.endswith(".png"):
        continue
    data = open(os.path.join(src, f), "rb").read()
    enc = l3.encode(data)
    ref = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    dec = l3.decode(enc)
    if dec.shape != ref.shape or not np.array_equal(dec, ref):
        sys.exit(f"devcheck_prep: l3.decode({f}) differs from PIL's decode of the PNG")
    open(os.path.join(dst, f[:-4] + ".l3"), "wb").write(enc)
    n += 1
    total += len(enc)
print(f"devcheck_prep: {n} photos from {src}, {total / 2**20:.1f} MiB, equal to PIL's pixels")
PYEOF
    "$build/gpu/bench/l3gpu_devcheck" write-ref "$out"
else
    echo "devcheck_prep: no photos at $photos (scripts/fetch-corpus.sh): the device check" \
         "will time generated photo-like images instead"
fi
size=$(du -sm "$out" | cut -f1)
[ "$size" -le 60 ] || { echo "devcheck_prep: $out is $size MiB (limit 60)" >&2; exit 1; }
echo "devcheck_prep: $out ready ($size MiB). On the GPU machine, from the tree: gpu/bench/device_check.sh"
