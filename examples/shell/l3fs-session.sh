#!/usr/bin/env bash
# A whole l3fs session from the shell: mount a PNG tree, encode it ahead of
# training with a progress bar, read every file the way a loader would, print
# the hit rate, unmount.
#
#   examples/shell/l3fs-session.sh SOURCE [MOUNTPOINT] [l3fs options...]
#
#   SOURCE       a PNG tree (for example data/sample, or /data/cityscapes)
#   MOUNTPOINT   where to mount it (default: a new temporary directory)
#   options      passed to l3fs, e.g. --cache-dir DIR --exclude '*_labelIds.png'
#
# Environment: L3FS (the l3fs program; default: build/fs/l3fs of this checkout if
# built, else l3fs from PATH), JOBS (warm parallelism, default: number of CPUs).
# Exits non-zero when a step fails; unmounts on the way out in every case.
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '2,15s/^# \{0,1\}//p' "$0"
    exit 2
fi
src=$1; shift
mnt=
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then mnt=$1; shift; fi

here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${L3FS:-}" ]; then
    if [ -x "$here/../../build/fs/l3fs" ]; then L3FS=$here/../../build/fs/l3fs
    else L3FS=$(command -v l3fs) || { echo "l3fs not found: build it or set L3FS" >&2; exit 1; }
    fi
fi
jobs=${JOBS:-$(nproc)}

made_mnt=0
if [ -z "$mnt" ]; then mnt=$(mktemp -d /tmp/l3fs-session.XXXXXX); made_mnt=1; fi
mounted=0
cleanup() {
    if [ $mounted = 1 ]; then fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; fi
    if [ $made_mnt = 1 ]; then rmdir "$mnt" 2>/dev/null || true; fi
}
trap cleanup EXIT

# 1. Mount (l3fs goes to the background once the mount is up).
echo "== mount: $L3FS $src $mnt $*"
"$L3FS" "$src" "$mnt" "$@"
mounted=1
for _ in $(seq 100); do [ -e "$mnt/.l3fs/stats.json" ] && break; sleep 0.05; done
[ -e "$mnt/.l3fs/stats.json" ] || { echo "l3fs did not come up at $mnt" >&2; exit 1; }

# 2. Warm: encode every PNG into the cache before training starts (a progress bar
#    on a terminal, plain lines otherwise; interrupting and rerunning resumes).
echo "== warm: l3fs warm $mnt -j $jobs"
"$L3FS" warm "$mnt" -j "$jobs"

# 3. Read every file once, as a loader would (all from the cache now).
echo "== read every file"
num() { printf '%s' "$1" | grep -o "\"$2\": *[0-9.]*" | sed -n 1p | sed 's/.*: *//'; }
before=$(cat "$mnt/.l3fs/stats.json")
start=$(date +%s.%N)
files=0; bytes=0
while IFS= read -r -d '' f; do
    n=$(wc -c <"$f")
    files=$((files + 1)); bytes=$((bytes + n))
done < <(find "$mnt" -type f -print0)
end=$(date +%s.%N)
awk -v f=$files -v b=$bytes -v s="$start" -v e="$end" 'BEGIN {
    t = e - s; printf "%d files, %.1f MiB in %.3f s (%.1f MiB/s)\n", f, b / 1048576, t, b / 1048576 / (t > 0 ? t : 1e-9) }'

# 4. Hit rate: the summary, and the numbers from .l3fs/stats.json.
echo "== statistics"
"$L3FS" stats "$mnt"
after=$(cat "$mnt/.l3fs/stats.json")
rate() { # label hits misses
    awk -v l="$1" -v h="$2" -v m="$3" 'BEGIN {
        n = h + m; r = "n/a"; if (n > 0) r = sprintf("%.1f%%", 100 * h / n)
        printf "%s: %s (%d hits, %d misses)\n", l, r, h, m }'
}
h0=$(num "$before" l3_open_hits); m0=$(num "$before" l3_open_misses)
h1=$(num "$after" l3_open_hits); m1=$(num "$after" l3_open_misses)
rate "hit rate of .l3 opens, whole session" "${h1:-0}" "${m1:-0}"
rate "hit rate of .l3 opens, read pass    " "$(( ${h1:-0} - ${h0:-0} ))" "$(( ${m1:-0} - ${m0:-0} ))"

# 5. Unmount.
echo "== unmount"
fusermount3 -u "$mnt"
mounted=0
echo "session finished"
