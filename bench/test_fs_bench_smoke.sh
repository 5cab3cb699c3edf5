#!/usr/bin/env bash
# Smoke test of bench/fs_bench (docs/FS.md "Benchmark"): every part once on the
# PNGs of data/sample with a few repetitions, then checks that each part printed
# its figures as numbers, that part 4's intervals hold their medians, and that
# nothing is left mounted or in the work directory. Timings are not checked
# (benchmarks are not timed tests).
# Environment (meson sets it): L3_SOURCE_ROOT, L3FS (the daemon), FS_BENCH.
# Exit status 77 (meson: skipped) when /dev/fuse is absent.
set -euo pipefail
top=${L3_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
: "${L3FS:?L3FS must name the l3fs binary}" "${FS_BENCH:?FS_BENCH must name fs_bench}"
[ -e /dev/fuse ] || { echo "SKIP: /dev/fuse is absent: fs_bench mounts l3fs"; exit 77; }

tmp=$(mktemp -d /tmp/l3-fs-bench-test.XXXXXX)
trap 'grep -q " $tmp/" /proc/mounts && umount -l "$tmp"/work/mnt; rm -rf "$tmp"' EXIT
mkdir "$tmp/photos"
# fs_bench takes one flat directory of PNGs: the sample's, whatever their folders
find "$top/data/sample" -name '*.png' -exec cp {} "$tmp/photos/" \;
npng=$(find "$tmp/photos" -name '*.png' | wc -l)
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# 6 repetitions: the fewest for which part 4 gives a 95 % interval
if out=$("$FS_BENCH" --l3fs "$L3FS" --photos "$tmp/photos" --files 200 --reps 6 \
         --work "$tmp/work" 2>&1); then
    ok "fs_bench exits 0"
else
    bad "fs_bench failed (exit $?)"
fi
printf '%s\n' "$out" | sed 's/^/    | /'

num='[0-9]+(\.[0-9]+)?'
has() { # what regex
    if grep -Eq -e "$2" <<<"$out"; then ok "$1"; else bad "$1: no line matching /$2/"; fi
}
has "header names $npng photos" "^l3fs fs_bench: $npng photos from "
has "1a: mount vs direct, objects not in RAM" "through a fresh mount +$num MB/s += $num% of direct"
has "1b: second read on the same mount" "again on the same mount \(kernel page cache\) +$num MB/s"
has "2: cold read vs libpng" "cold \.l3 read through the mount +$num ms per photo += ${num}x libpng"
has "3: ls -lR of 200 files" "fresh mount \(sizes from index\) +$num ms += ${num}x source"
has "4: verification, 6 alternating pairs" "--no-verify, 6 alternating pairs"

# part 4's rows whose label matches $1: four of them, each "best MB/s vs best
# MB/s, best, median, interval, CPU median", and each interval holds its median
check_rows() { # label-regex what
    local rows row name med lo hi
    rows=$(grep -E "^   $1(objects|empty cache)" <<<"$out" | grep -E ' vs ' || true)
    [ "$(grep -c . <<<"$rows")" = 4 ] && ok "4: four $2" || bad "4: not four $2: $rows"
    while IFS= read -r row; do
        [ -n "$row" ] || continue
        name=$(sed -E 's/^ +//; s/ {2,}.*//' <<<"$row")
        if ! [[ $row =~ ($num)x\ +($num)-($num)x\ +($num)x$ ]]; then
            bad "4: $name: no median, interval and CPU median"
            continue
        fi
        med=${BASH_REMATCH[1]} lo=${BASH_REMATCH[3]} hi=${BASH_REMATCH[5]}
        if awk -v m="$med" -v l="$lo" -v h="$hi" 'BEGIN { exit !(l > 0 && l <= m && m <= h) }'; then
            ok "4: $name: median $med within its interval $lo-$hi"
        else
            bad "4: $name: median $med outside $lo-$hi"
        fi
    done <<<"$rows"
}
check_rows "" rows

# part 4 alone with a baseline daemon (here the same binary, header checks
# only): four more rows, "vs baseline: ...", checked the same way
if out=$("$FS_BENCH" --l3fs "$L3FS" --photos "$tmp/photos" --only 4 --reps 6 \
         --baseline "$L3FS" --baseline-opt --no-verify --work "$tmp/work" 2>&1); then
    ok "fs_bench --only 4 --baseline exits 0"
else
    bad "fs_bench --only 4 --baseline failed (exit $?)"
fi
printf '%s\n' "$out" | sed 's/^/    | /'
check_rows "vs baseline: " "baseline rows"

grep -q " $tmp/" /proc/mounts && bad "a mount left behind" || ok "nothing left mounted"
[ ! -e "$tmp/work" ] || [ -z "$(ls -A "$tmp/work")" ] && ok "work directory emptied" ||
    bad "work directory left: $(ls -A "$tmp/work" | head -5 | tr '\n' ' ')"

[ $fail = 0 ] && echo "all checks passed" || echo "some checks failed"
exit $fail
