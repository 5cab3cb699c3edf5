# shellcheck shell=bash
# ab-common.sh — what bench/decode-ab.sh and bench/encode-ab.sh share:
# sourced by both (not run). Two builds of the `l3` CLI measured in turn.

# ab_builds NAME A B: both must be executables (else a message, exit 1)
ab_builds() {
    local name=$1 x
    shift
    for x in "$@"; do
        [ -x "$x" ] || { echo "$name: $x is not an executable" >&2; exit 1; }
    done
}

# ab_spread SUFFIX: "median (min-max)" of the numbers on standard input (one
# or more per line), the median followed by SUFFIX ("x" or "")
ab_spread() {
    tr ' ' '\n' | grep . | sort -g |
        awk -v sfx="$1" '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
                                          printf "%.2f%s (%.2f-%.2f)", m, sfx, v[1], v[NR]}'
}
