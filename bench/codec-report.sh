#!/bin/bash
# Codec benchmark report: runs `l3 bench` over the corpus directories made by
# scripts/fetch-corpus.sh and prints Markdown (the results part of
# docs/CODEC-BENCH.md). Every number of one table comes from one `l3 bench`
# run, side by side with libpng on the same files.
#
#   bench/codec-report.sh [BUILD_DIR] [CORPUS_PNG_DIR]   > report.md
#
# BUILD_DIR defaults to build (needs build/codec/l3, a release build);
# CORPUS_PNG_DIR to $L3_CORPUS/png or /var/cache/l3fs-corpus/png.
set -euo pipefail
build=${1:-build}
corpus=${2:-${L3_CORPUS:-/var/cache/l3fs-corpus}/png}
l3=$build/codec/l3
[ -x "$l3" ] || { echo "codec-report: $l3 not built" >&2; exit 1; }
[ -d "$corpus" ] || { echo "codec-report: $corpus absent (scripts/fetch-corpus.sh)" >&2; exit 1; }
jobs=${JOBS:-2}
reps=${REPS:-3}

describe() {
    case $1 in
    photos-2048) echo "Real photos (mate-backgrounds), resized to 2048x1024 RGB." ;;
    photos) echo "The same photos at their full size." ;;
    renders-2048) echo "GNOME background art rendered to 2048x1024 RGB." ;;
    wallpapers) echo "Every PNG of at least 20 kB in ukui-wallpapers, sway-backgrounds and desktop-base: RGB, RGBA and palette, 200x184 to 3840x2400." ;;
    pngsuite) echo "PngSuite (every colour type, bit depth, interlacing; tiny images)." ;;
    photos-unseen-2048) echo "Photos the encoder was not tuned on (lomiri-wallpapers-16.04/-20.04, plasma-workspace-wallpapers), 2048x1024 RGB." ;;
    photos-heldout-2048) echo "Every third of those, held out: not looked at while tuning." ;;
    esac
}

# "size | decode 1t | encode 1t" cells from an l3 bench summary
cells() {
    awk '/^  size/ {s=$4}
         /^  decode, 1 thread/ {d=$4}
         /^  encode, 1 thread/ {e=$4}
         END {printf "%s | %sx | %sx", s, d, e}'
}

echo "Machine: $(nproc) cores, $(uname -m); load average at start: $(cut -d' ' -f1-3 /proc/loadavg);"
echo "\`$l3 --version\`: $($l3 --version 2>&1 | head -1). Wall clock, best of $reps runs."
echo
for d in photos-2048 photos photos-unseen-2048 photos-heldout-2048 renders-2048 wallpapers pngsuite; do
    [ -d "$corpus/$d" ] || continue
    echo "### $d"
    echo
    describe "$d"
    echo
    echo '```'
    echo "\$ l3 bench -j $jobs -r $reps $corpus/$d"
    "$l3" bench -j "$jobs" -r "$reps" "$corpus/$d"
    echo '```'
    echo
done

echo "### Encoder effort and tile size"
echo
echo "One \`l3 bench -j $jobs -r $reps [--effort E] [--tile N] DIR\` run per cell group."
echo
echo "| setting | corpus | L3 / PNG | decode 1t vs libpng | encode 1t vs libpng decode |"
echo "|---|---|---:|---:|---:|"
for setting in "--effort 0" "--effort -1" "--effort 2" "--tile 128" "--tile 256"; do
    for d in photos-2048 renders-2048 wallpapers; do
        [ -d "$corpus/$d" ] || continue
        # shellcheck disable=SC2086
        c=$("$l3" bench -j "$jobs" -r "$reps" $setting "$corpus/$d" | cells)
        echo "| \`$setting\` | $d | $c |"
    done
done
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
