#!/bin/bash
# Lossless peers side by side: runs bench/peer_bench (libpng, libspng, QOI, WebP
# lossless, JPEG XL lossless effort 1, L3 with 1 and 2 threads, L3 encode) over
# each corpus directory of scripts/fetch-corpus.sh and prints Markdown (the
# peer tables of docs/BENCHMARKS.md).
#
#   bench/peer-report.sh [BUILD_DIR] [CORPUS_PNG_DIR]   > report.md
#
# BUILD_DIR (default build) needs bench/peer_bench, a release build with
# Debian's libspng-dev, libqoi-dev, libwebp-dev and libjxl-dev installed.
# RUNS (default 3) and JOBS (default 2) go to peer_bench's -r and -j.
set -euo pipefail
build=${1:-build}
corpus=${2:-${L3_CORPUS:-/var/cache/l3fs-corpus}/png}
pb=$build/bench/peer_bench
[ -x "$pb" ] || { echo "peer-report: $pb not built (needs libspng-dev libqoi-dev libwebp-dev libjxl-dev)" >&2; exit 1; }
echo "Machine: $(nproc) cores, $(uname -m); start $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
for d in photos-2048 photos photos-unseen-2048 photos-heldout-2048 renders-2048 wallpapers; do
    [ -d "$corpus/$d" ] || continue
    echo
    echo "### $d"
    echo
    echo "\`$pb -r ${RUNS:-3} -j ${JOBS:-2} $corpus/$d\`"
    echo
    "$pb" -r "${RUNS:-3}" -j "${JOBS:-2}" "$corpus/$d"
    echo
    echo "Load average after it: $(cut -d' ' -f1-3 /proc/loadavg)"
done
