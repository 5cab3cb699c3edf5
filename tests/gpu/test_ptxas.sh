#!/bin/sh
# test_ptxas.sh REPORT — gpu/nvcc_ptxas.sh's per-kernel ptxas report of the
# CUDA library: every kernel of every architecture it was built for spills
# no register (0 B spill stores and loads). TAP, one line per kernel.
set -u
report=$1
n=$(grep -c '^ptxas ' "$report" 2>/dev/null || true)
if [ "${n:-0}" -eq 0 ]; then
    echo "1..1"
    echo "not ok 1 - no kernel in $report"
    exit 1
fi
echo "1..$n"
awk '
/^ptxas / {
    k++
    line = $0; sub(/^ptxas /, "", line)
    split(line, f, ", ")
    st = f[3]; ld = f[4]; sub(/ B.*/, "", st); sub(/ B.*/, "", ld)
    if (st == "0" && ld == "0") printf "ok %d - %s\n", k, line
    else { printf "not ok %d - %s: spills\n", k, line; bad = 1 }
}
END { exit bad }' "$report"
