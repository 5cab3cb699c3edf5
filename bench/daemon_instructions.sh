#!/usr/bin/env bash
# bench/daemon_instructions.sh L3FS STRESS_TOOL [WORKDIR]
# Instructions the l3fs daemon executes for a fixed workload, counted by
# valgrind --tool=callgrind (repeatable on a loaded machine, unlike times):
# a tree of 300 generated PNGs, the cache filled first (not counted), then a
# fresh mount on it, every .l3 read three times, one `ls -lR`, unmount.
# Run it for two builds of l3fs to compare their work (docs/FS.md).
set -euo pipefail
L3FS=${1:?usage: daemon_instructions.sh L3FS STRESS_TOOL [WORKDIR]}
TOOL=${2:?usage: daemon_instructions.sh L3FS STRESS_TOOL [WORKDIR]}
W=${3:-$(mktemp -d /var/tmp/l3fs-cg.XXXXXX)}
mkdir -p "$W/mnt"
[ -d "$W/src" ] || "$TOOL" gen-tree "$W/src" 300 1 96 >/dev/null
cache=$W/cache.$(basename "$(dirname "$(dirname "$L3FS")")")
wait_mount() { for _ in $(seq 600); do [ -e "$W/mnt/.l3fs/stats.json" ] && return 0; sleep 0.1; done; return 1; }
"$L3FS" "$W/src" "$W/mnt" --cache-dir "$cache" -f & p=$!
wait_mount
find "$W/mnt" -name '*.l3' -exec cat {} + >/dev/null
fusermount3 -u "$W/mnt"; wait $p
valgrind --tool=callgrind --callgrind-out-file="$W/callgrind.out" \
    "$L3FS" "$W/src" "$W/mnt" --cache-dir "$cache" -f 2>"$W/callgrind.err" & p=$!
wait_mount
for _ in 1 2 3; do find "$W/mnt" -name '*.l3' -exec cat {} + >/dev/null; done
ls -lR "$W/mnt" >/dev/null
fusermount3 -u "$W/mnt"; wait $p
echo "$L3FS: $(grep -o 'Collected : [0-9]*' "$W/callgrind.err")"
