#!/usr/bin/env bash
# Quick start: installs what is missing, builds, and runs the main job on the bundled
# sample dataset (data/sample): mounts it with l3fs, lists it, reads every .l3 twice
# (first pass encodes, second is served from the cache), decodes one back and checks
# it equals the PNG, prints the cache statistics, unmounts.
#   scripts/demo.sh [SOURCE_DIR]
# SOURCE_DIR: any directory tree with PNGs (default data/sample).
# L3_DEMO_BUILD=DIR uses an existing build directory as it is (no apt, no build).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
src=$(realpath "${1:-$top/data/sample}")
[ -d "$src" ] || { echo "demo: $src is not a directory" >&2; exit 2; }
build=${L3_DEMO_BUILD:-$top/build}
if [ -z "${L3_DEMO_BUILD:-}" ]; then
  scripts/deps.sh
  if [ -d build/meson-private ]; then meson setup --reconfigure build >/dev/null
  else meson setup build -Dbuildtype=release >/dev/null; fi
  meson compile -C build -j "$(nproc)" >/dev/null
fi
l3fs=$build/fs/l3fs
l3=$build/codec/l3
out=$(mktemp -d /tmp/l3fs-demo-out.XXXXXX)

mnt=$(mktemp -d /tmp/l3fs-demo.XXXXXX)
cache=$out/cache
cleanup() { fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; rmdir "$mnt" 2>/dev/null || true; }
trap cleanup EXIT

echo "== mount: l3fs $src $mnt --cache-dir $cache"
"$l3fs" "$src" "$mnt" --cache-dir "$cache"
for _ in $(seq 50); do [ -e "$mnt/.l3fs/stats.json" ] && break; sleep 0.1; done

echo "== ls -lR (sizes are exact: the first ls encodes each .l3 once)"
(cd "$mnt" && ls -lR)

echo "== read every file, twice"
for pass in 1 2; do
  n=0; bytes=0
  while IFS= read -r -d '' f; do
    b=$(wc -c <"$f"); n=$((n + 1)); bytes=$((bytes + b))
  done < <(find "$mnt" -type f -print0)
  echo "pass $pass: $n files, $bytes bytes"
done

echo "== decode one .l3 back and compare with its PNG, pixel for pixel"
one=$(cd "$mnt" && find . -name '*.l3' -type f | sort | sed -n 1p)
[ -n "$one" ] || { echo "demo: no PNG in $src became an .l3 file" >&2; exit 1; }
rel=${one#./}; rel=${rel%.l3}
png=$(cd "$src" && find "./$(dirname "$rel")" -maxdepth 1 -type f -iname "$(basename "$rel").png" | sort | sed -n 1p)
"$l3" info "$mnt/$rel.l3"
"$l3" verify "$mnt/$rel.l3" --against "$src/$png"
"$l3" decode "$mnt/$rel.l3" "$out/demo-decoded.png"
echo "decoded to $out/demo-decoded.png (the cache is in $out/cache)"

echo "== cache statistics"
"$l3fs" stats "$mnt"

echo "== unmount"
fusermount3 -u "$mnt"
trap - EXIT; rmdir "$mnt"
echo "demo finished"
