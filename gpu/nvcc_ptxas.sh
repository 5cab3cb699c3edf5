#!/bin/sh
# nvcc_ptxas.sh REPORT NVCC ARGS... — runs NVCC ARGS with `-Xptxas -v`, writes
# one line per kernel and architecture to REPORT and prints them (the build
# log shows every kernel's registers, stack and spills), e.g.
#   ptxas sm_90 l3g_decode_planes: 48 registers, 0 B stack, 0 B spill stores, 0 B spill loads
# Other compiler output goes to stderr unchanged; the exit status is nvcc's.
set -u
report=$1
shift
raw=$report.raw
"$@" -Xptxas -v 2>"$raw"
rc=$?
grep -v '^ptxas info\|bytes stack frame' "$raw" >&2
awk -v q="'" '
/Compiling entry function/ {
    split($0, part, q); name = part[2]; arch = part[4]
    if (match(name, /l3g_[A-Za-z0-9_]+/)) {
        name = substr(name, RSTART, RLENGTH); sub(/E[A-Z]?P?K?[0-9].*$/, "", name)
    }
    stack = st = ld = "?"
}
/bytes stack frame/ { stack = $1; st = $5; ld = $9 }
/Used [0-9]+ registers/ {
    regs = $0; sub(/^.*Used /, "", regs); sub(/ registers.*$/, "", regs)
    printf "ptxas %s %s: %s registers, %s B stack, %s B spill stores, %s B spill loads\n",
           arch, name, regs, stack, st, ld
}' "$raw" >"$report"
cat "$report"
rm -f "$raw"
exit $rc
