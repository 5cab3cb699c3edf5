#!/usr/bin/env bash
# The side-by-side benchmark: PNG vs L3 decode, sizes, reads through an l3fs
# mount, and the PyTorch loader, on one directory of PNGs, in one run.
#
#   bench/run.sh [PNG_DIR] [-o OUT_DIR] [-r RUNS] [-j THREADS]
#
#   PNG_DIR   default /var/cache/l3fs-corpus/png/photos-2048 (scripts/fetch-corpus.sh)
#   -o DIR    where the report goes (default build-bench/report): benchmarks.md
#             (Markdown tables), benchmarks.png (chart), results.json
#   -r N      best of N runs per file for the decode numbers (default 3)
#   -j N      threads / loader workers (default: number of CPUs)
#
# Builds a release tree in build-bench/ (or uses $L3_BUILD when set). Run as
# root for the filesystem part (mounting, dropping the page cache between cold
# runs with `echo 3 > /proc/sys/vm/drop_caches`); without that permission the
# report says the page cache was not dropped. Uses Debian's /usr/bin/python3
# (NumPy, Pillow, and torch for the loader part; skipped with a reason when
# missing) and gnuplot for the chart.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
png_dir=/var/cache/l3fs-corpus/png/photos-2048
out=
runs=3
jobs=$(nproc)
cmdline="bench/run.sh${*:+ $*}"
while [ $# -gt 0 ]; do
    case $1 in
    -o) out=$2; shift 2 ;;
    -r) runs=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,19s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "bench/run.sh: unknown option $1" >&2; exit 2 ;;
    *) png_dir=$1; shift ;;
    esac
done
[ -d "$png_dir" ] || { echo "bench/run.sh: $png_dir is not a directory (scripts/fetch-corpus.sh fetches the default corpus)" >&2; exit 2; }

build=${L3_BUILD:-$top/build-bench}
if [ -z "${L3_BUILD:-}" ]; then
    if [ -d "$build/meson-private" ]; then meson setup --reconfigure "$build" >/dev/null
    else meson setup "$build" -Dbuildtype=release -Dtests=false >/dev/null; fi
    echo "building $build ..." >&2
    meson compile -C "$build" -j "$(nproc)" >/dev/null
fi
out=${out:-$build/report}
exec /usr/bin/python3 "$top/bench/bench.py" --build "$build" --out "$out" --runs "$runs" \
    --jobs "$jobs" --command "$cmdline" "$png_dir"
