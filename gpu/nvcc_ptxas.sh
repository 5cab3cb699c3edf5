#!/bin/sh
# nvcc_ptxas.sh REPORT NVCC ARGS... — runs NVCC ARGS with `-Xptxas -v`, writes
# one line per kernel and architecture to REPORT and prints them (the build
# log shows every kernel's registers, stack and spills), e.g.
#   ptxas sm_90 l3g_decode_planes: 48 registers, 0 B stack, 0 B spill stores, 0 B spill loads
#   ptxas sm_90 l3g_convert<0,0,3>: 48 registers, 0 B stack, 0 B spill stores, 0 B spill loads
# (template arguments of l3g_convert: enum l3gpu_layout, enum l3gpu_dtype, channels)
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
    # the kernel name out of the mangled one, with its integer template
    # arguments: l3g_convert<0,0,3> from ...11l3g_convertILi0ELi0ELi3EEEvPK...
    if (match(name, /l3g_[a-z0-9_]+/)) {
        rest = substr(name, RSTART + RLENGTH); name = substr(name, RSTART, RLENGTH)
        if (rest ~ /^ILi/) {
            rest = substr(rest, 2); targs = ""
            while (match(rest, /^Li[0-9]+E/)) {
                targs = targs (targs == "" ? "" : ",") substr(rest, 3, RLENGTH - 3)
                rest = substr(rest, RLENGTH + 1)
            }
            name = name "<" targs ">"
        }
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
