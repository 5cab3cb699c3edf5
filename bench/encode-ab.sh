#!/bin/bash
# Encoder before/after: two builds of the `l3` CLI measured in turn (A B A B
# ...) with `l3 bench -j 1 --cpu-time` on each corpus directory, so that
# both see the same machine load. Prints a Markdown table: total L3 bytes of
# each build (and their ratio), and each build's one-thread encode speed as a
# multiple of libpng's decode of the same files in the same `l3 bench` run
# (median of the rounds, with the lowest and highest).
#
#   bench/encode-ab.sh L3_BEFORE L3_AFTER [CORPUS_PNG_DIR] > table.md
#
# ROUNDS (default 3) rounds per corpus, REPS (default 3) runs per `l3 bench`
# (best of), CORPORA (default: every corpus directory there) a list of names.
set -euo pipefail
a=${1:?usage: encode-ab.sh L3_BEFORE L3_AFTER [CORPUS_PNG_DIR]}
b=${2:?usage: encode-ab.sh L3_BEFORE L3_AFTER [CORPUS_PNG_DIR]}
corpus=${3:-${L3_CORPUS:-/var/cache/l3fs-corpus}/png}
rounds=${ROUNDS:-3}
reps=${REPS:-3}
corpora=${CORPORA:-"wallpapers renders-2048 photos-2048 photos photos-unseen-2048 photos-heldout-2048 pngsuite"}
# shellcheck source=bench/ab-common.sh
. "$(dirname "$0")/ab-common.sh"
ab_builds encode-ab "$a" "$b"

# "L3_BYTES ENCODE_RATIO" of one l3 bench run
run() {
    "$1" bench -j 1 -r "$reps" --cpu-time "$2" |
        awk '/^TOTAL/ {s=$3} /^  encode, 1 thread / {e=$4} END {print s, e}'
}

echo "Load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds of" \
     "\`l3 bench -j 1 -r $reps --cpu-time DIR\`, before and after in turn."
echo
echo "| corpus | L3 bytes before | after | after/before | encode vs libpng decode, before | after |"
echo "|---|---:|---:|---:|---:|---:|"
for d in $corpora; do
    [ -d "$corpus/$d" ] || continue
    sa="" sb="" ea="" eb=""
    for _ in $(seq "$rounds"); do
        read -r s e < <(run "$a" "$corpus/$d")
        sa=$s ea="$ea $e"
        read -r s e < <(run "$b" "$corpus/$d")
        sb=$s eb="$eb $e"
    done
    ra=$(echo "$ea" | ab_spread x)
    rb=$(echo "$eb" | ab_spread x)
    echo "| $d | $sa | $sb | $(awk -v x="$sa" -v y="$sb" 'BEGIN {printf "%.4f", y / x}') | $ra | $rb |"
done
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
