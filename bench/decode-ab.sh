#!/bin/bash
# Decoder before/after: two builds of the `l3` CLI measured in turn (A B A B
# ...) with `l3 bench -j THREADS -r REPS` on each corpus directory, so that
# both see the same machine load. Prints a Markdown table per corpus: each
# build's decode speed with 1 thread and with THREADS threads as a multiple of
# libpng's decode of the same files in the same `l3 bench` run, and the
# THREADS-thread decode over the 1-thread one (median of the rounds, with the
# lowest and highest). `l3 bench` also checks every decode against libpng's
# pixels and fails on a difference.
#
#   bench/decode-ab.sh L3_BEFORE L3_AFTER [CORPUS_PNG_DIR] > table.md
#
# ROUNDS (default 3) rounds per corpus, REPS (default 5) runs per `l3 bench`
# (best of), THREADS (default 2), CORPORA (default: wallpapers renders-2048
# photos-2048 photos-unseen-2048) a list of names, BENCH_ARGS more arguments
# for `l3 bench` (--cpu-time: one-thread runs in thread CPU time, steadier on a
# busy machine). Times are wall-clock otherwise.
set -euo pipefail
usage="usage: decode-ab.sh L3_BEFORE L3_AFTER [CORPUS_PNG_DIR]"
a=${1:?$usage}
b=${2:?$usage}
corpus=${3:-${L3_CORPUS:-/var/cache/l3fs-corpus}/png}
rounds=${ROUNDS:-3}
reps=${REPS:-5}
threads=${THREADS:-2}
corpora=${CORPORA:-"wallpapers renders-2048 photos-2048 photos-unseen-2048"}
# shellcheck source=bench/ab-common.sh
. "$(dirname "$0")/ab-common.sh"
ab_builds decode-ab "$a" "$b"

# "DEC1 DECN SCALING" of one l3 bench run (the summary lines)
run() {
    # shellcheck disable=SC2086
    "$1" bench -j "$threads" -r "$reps" ${BENCH_ARGS:-} "$2" |
        awk '/^  decode, 1 thread / {d1=$4}
             /^  decode, [0-9]+ threads / {dn=$4; for (i = 1; i < NF; i++) if ($i == "(scaling") s=$(i+1)}
             END {if (d1 == "" || dn == "") exit 1; print d1, dn, s}'
}

col() { ab_spread ""; }

echo "Load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds of" \
     "\`l3 bench -j $threads -r $reps ${BENCH_ARGS:+$BENCH_ARGS }DIR\`, before and after in turn."
echo
echo "| corpus | decode 1t vs libpng, before | after | ${threads}t vs 1t, before | after |"
echo "|---|---:|---:|---:|---:|"
for d in $corpora; do
    [ -d "$corpus/$d" ] || continue
    a1="" b1="" as="" bs=""
    for _ in $(seq "$rounds"); do
        read -r x _ s < <(run "$a" "$corpus/$d")
        a1="$a1 $x" as="$as $s"
        read -r x _ s < <(run "$b" "$corpus/$d")
        b1="$b1 $x" bs="$bs $s"
    done
    echo "| $d | $(echo "$a1" | col) | $(echo "$b1" | col) | $(echo "$as" | col) |" \
         "$(echo "$bs" | col) |"
done
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
