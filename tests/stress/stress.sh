#!/usr/bin/env bash
# tests/stress/stress.sh SCENARIO — one fault/abuse/load scenario against a
# real l3fs mount (docs/RELIABILITY.md). Run by `meson test --suite stress`.
#
#   load       64 readers over >= 2,000 PNGs: cold, hot, warm; bytes, figures,
#              daemon RSS and fds before/after
#   kill9      kill -9 of the daemon while it encodes, remount on the same cache
#   diskfull   cache on a full tmpfs, then on a read-only one
#   twomounts  two daemons, one source, one cache directory, both under load
#   srcchange  sources rewritten under the mount (same size, preserved mtime)
#   hostile    fuzzed/truncated/bit-flipped PNGs, bombs, FIFOs, odd names,
#              50 levels, a directory with 100,000 entries
#   escape     symlinks out of SOURCE, `..`, every kind of write, other users
#   bitrot     cache objects rotted on disk (under the filesystem: no metadata
#              change) at rest and while mounted with the page cache dropped
#   churn      8 readers while sources are rewritten in place (mtime
#              restored), renamed over, deleted and recreated, created; with
#              and without the watcher
#   privacy    another local user and the cache of a 0600 source; --cache-shared
#   gluster    two daemons sharing a cache on a GlusterFS volume (two clients):
#              cold in the same order, kill -9, clear and gc from a third
#              client, ENOSPC (the volume comes from scripts/gluster.sh:
#              L3_GLUSTER, L3_GLUSTER_SMALL; L3_GLUSTER_SKIP says why not)
#
# Environment: L3FS (daemon binary; the ASan build's binary in the ASan
# build), STRESS_TOOL (tests/stress/stress_tool), L3_STRESS=1 for the long
# mode. Exit status 0 pass, 1 fail, 77 skip (no /dev/fuse, no fusermount3,
# or not root where root is needed).
set -uo pipefail
scenario=${1:?usage: stress.sh SCENARIO}
L3FS=${L3FS:?L3FS must name the l3fs binary}
TOOL=${STRESS_TOOL:?STRESS_TOOL must name the stress tool}
LONG=${L3_STRESS:-0}
[ "$LONG" = 1 ] || LONG=0

skip() { echo "SKIP $scenario: $*"; exit 77; }
[ -c /dev/fuse ] || skip "/dev/fuse is missing"
command -v fusermount3 >/dev/null || skip "fusermount3 is missing"

W=$(mktemp -d "${TMPDIR:-/tmp}/l3stress-$scenario.XXXXXX")
MOUNTS=()
PIDS=()
TMPFS=()
fails=0
cleanup() {
    local m p t
    for m in "${MOUNTS[@]}"; do fusermount3 -u -z "$m" 2>/dev/null; done
    # only daemons that are still children of this script: a daemon already
    # reaped may have lent its PID to another test's process (pid_max can be
    # as low as 32768, and scenarios run in parallel)
    for p in "${PIDS[@]}"; do
        [ "$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)" = "$$" ] && kill -9 "$p" 2>/dev/null
    done
    for t in "${TMPFS[@]}"; do umount -l "$t" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
# check DESCRIPTION COMMAND...: PASS/FAIL by the command's status
check() { local d=$1; shift; if "$@"; then pass "$d"; else fail "$d"; fi; }
finish() {
    if [ "$fails" -eq 0 ]; then echo "== $scenario: all checks passed"; exit 0; fi
    echo "== $scenario: $fails check(s) failed"; exit 1
}
need_root() { [ "$(id -u)" = 0 ] || skip "needs root ($*)"; }

# ---------------------------------------------------------------- daemons
# mount_l3fs SRC MNT CACHE LOG [options...]: starts l3fs in the foreground in
# the background; sets DPID. Waits until the mount answers.
mount_l3fs() {
    start_l3fs "$@" && wait_mounted "$2" "$DPID" "$4"
}
# start_l3fs SRC MNT CACHE LOG [options...]: the same without waiting
start_l3fs() {
    local src=$1 mnt=$2 cache=$3 log=$4; shift 4
    mkdir -p "$mnt"
    # a small ASan quarantine so that RSS reflects live memory (ASan builds)
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=16" \
        "$L3FS" "$src" "$mnt" --cache-dir "$cache" -f "$@" 2>>"$log" &
    DPID=$!
    PIDS+=("$DPID")
    MOUNTS+=("$mnt")
}
# wait_mounted MNT PID LOG: until the mount of daemon PID answers (60 s)
wait_mounted() {
    local mnt=$1 DPID=$2 log=$3 i
    for i in $(seq 1 600); do
        if ! kill -0 "$DPID" 2>/dev/null; then
            fail "l3fs did not start on $mnt"; sed 's/^/  log: /' "$log" | tail -20; return 1
        fi
        if mountpoint -q "$mnt" && [ -e "$mnt/.l3fs/stats.json" ]; then return 0; fi
        sleep 0.1
    done
    fail "l3fs did not mount $mnt within 60 s"; return 1
}
# umount_l3fs MNT PID LOG: clean unmount; the daemon must exit with status 0
# (under ASan: no leak, no error report) and the log must hold no sanitizer
# report.
umount_l3fs() {
    local mnt=$1 pid=$2 log=$3 rc
    fusermount3 -u "$mnt" || { sleep 1; fusermount3 -u -z "$mnt"; }
    local i
    for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then fail "daemon $pid still running 30 s after unmount"; kill -9 "$pid"; fi
    wait "$pid"; rc=$?
    check "daemon on $(basename "$mnt") exited cleanly after unmount (status $rc)" test "$rc" -eq 0
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$log"; then
        fail "sanitizer report in $log"; grep -E -A20 'AddressSanitizer|LeakSanitizer|runtime error:' "$log" | head -40
    fi
}
alive() { kill -0 "$1" 2>/dev/null; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
nfds() { ls "/proc/$1/fd" | wc -l; }
# sampler PID FILE: writes "peak_fds peak_rss_kb" of PID to FILE every 0.1 s
# until FILE.stop exists
sampler() {
    local pid=$1 out=$2 mf=0 mr=0 f r
    while [ ! -e "$out.stop" ] && kill -0 "$pid" 2>/dev/null; do
        f=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l); r=$(rss_kb "$pid" 2>/dev/null || echo 0)
        [ "$f" -gt "$mf" ] && mf=$f
        [ "${r:-0}" -gt "$mr" ] && mr=$r
        echo "$mf $mr" > "$out"
        sleep 0.1
    done
}
drop_caches() { sync; [ "$(id -u)" = 0 ] && echo 1 2>/dev/null > /proc/sys/vm/drop_caches; return 0; }
stat_num() { "$TOOL" json "$1/.l3fs/stats.json" "$2"; }
tree_sum() { (cd "$1" && find . -printf '%p %s %T@ %m %U %G\n' | sort | md5sum); }
# (find's output is captured: under pipefail `find | grep -q .` fails when grep quits first)
no_temp_files() { local t; t=$(find "$1/objects" -name '.tmp-*' 2>/dev/null); [ -z "$t" ]; }
verify_cache() { # verify_cache DIR: every object checks out
    local out rc
    out=$("$L3FS" cache verify --cache-dir "$1" 2>&1); rc=$?
    echo "$out" | sed 's/^/  cache verify: /'
    [ "$rc" -eq 0 ]
}

"$TOOL" 2>/dev/null; [ $? -eq 2 ] || { echo "FAIL stress tool $TOOL does not run"; exit 1; }
echo "== stress $scenario (mode: $([ "$LONG" = 1 ] && echo long || echo short), daemon $L3FS)"

# ================================================================== load
sc_load() {
    local n=2000 secs=5
    [ "$LONG" = 1 ] && n=10000 secs=60
    "$TOOL" gen-tree "$W/src" "$n" 1 96 || return 1
    "$TOOL" oracle "$W/src" "$W/oracle" || return 1
    local log=$W/l3fs.log
    mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" || return 1
    local pid=$DPID
    echo "-- cold: new cache, every file read once by 64 threads (each read encodes)"
    check "cold pass: every byte correct" "$TOOL" load "$W/mnt" "$W/oracle" --pass --threads 64 \
        --seconds 600 --timeout 60 --label "cold pass"
    check "full check: bytes = independent encode, pixels = libpng" \
        "$TOOL" verify "$W/mnt" "$W/oracle" --pixels --threads 2 --timeout 60
    local enc; enc=$(stat_num "$W/mnt" fs.encodes)
    echo "   cold mount: $enc encodes for $n files (duplicates share objects)"
    echo "-- hot: same mount, random reads for ${secs} s (kernel page cache)"
    check "hot random reads: every byte correct" "$TOOL" load "$W/mnt" "$W/oracle" \
        --threads 64 --seconds "$secs" --label "hot random"
    umount_l3fs "$W/mnt" "$pid" "$log"

    echo "-- warm: new mount on the same cache (objects and index from disk)"
    mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" || return 1
    pid=$DPID
    check "warm pass: every byte correct" "$TOOL" load "$W/mnt" "$W/oracle" --pass \
        --threads 64 --seconds 600 --timeout 60 --label "warm pass"
    check "warm random reads (page cache): every byte correct" "$TOOL" load "$W/mnt" \
        "$W/oracle" --threads 64 --seconds "$secs" --label "warm random"
    # Then rounds after dropping the kernel's cached pages (root), so every
    # read goes to the daemon: a 2 s warm-up (every FUSE thread and allocator
    # arena in use once), then two equal measured rounds. A leak shows as
    # growth between the two rounds; descriptors are sampled throughout.
    local r0 f0 r1 r2 f2 pf pr
    drop_caches
    "$TOOL" load "$W/mnt" "$W/oracle" --threads 64 --seconds 2 --label "warm-up (not measured)" >/dev/null \
        || fail "warm-up load"
    sleep 0.5
    r0=$(rss_kb "$pid"); f0=$(nfds "$pid")
    sampler "$pid" "$W/peak" &
    local spid=$!
    drop_caches
    check "round 1 after drop_caches: every byte correct" "$TOOL" load "$W/mnt" \
        "$W/oracle" --threads 64 --seconds "$secs" --label "warm random, page cache dropped, round 1"
    sleep 0.5
    r1=$(rss_kb "$pid")
    drop_caches
    check "round 2 after drop_caches: every byte correct" "$TOOL" load "$W/mnt" \
        "$W/oracle" --threads 64 --seconds "$secs" --label "warm random, page cache dropped, round 2"
    touch "$W/peak.stop"; wait "$spid"
    read -r pf pr < "$W/peak"
    sleep 1
    r2=$(rss_kb "$pid"); f2=$(nfds "$pid")
    echo "   daemon: RSS ${r0} kB after warm-up, ${r1} kB after round 1, ${r2} kB after round 2 (peak ${pr} kB); open fds ${f0} before, peak ${pf} during, ${f2} after"
    local enc2; enc2=$(stat_num "$W/mnt" fs.encodes)
    check "warm mount encoded nothing (fs.encodes = $enc2)" test "$enc2" -eq 0
    # a leak grows with the ~10^5 opens of a round; allow 32 for descriptors
    # of objects the daemon keeps per node and releases still in flight
    check "no fd growth after load (${f0} -> ${f2})" test "$f2" -le "$((f0 + 32))"
    # during load: one fd per open file at most (64 readers) plus slack
    check "fds bounded during load (peak ${pf}, allowed $((f0 + 256)))" test "$pf" -le "$((f0 + 256))"
    # RSS between two equal rounds: 16 MiB or 15% for allocator noise (ASan's
    # allocator and quarantine: 32 MiB or 25%; its leak check runs at exit)
    local allow=$(( r1 * 15 / 100 > 16384 ? r1 * 15 / 100 : 16384 ))
    if grep -q libasan <<<"$(ldd "$L3FS" 2>/dev/null)"; then
        allow=$(( r1 / 4 > 32768 ? r1 / 4 : 32768 ))
    fi
    if [ "$(( r2 - r1 ))" -gt "$allow" ]; then
        # allocator noise (a busy machine can start more FUSE workers in one
        # round) settles; a leak grows again by the same amount: one more
        # equal round tells them apart
        echo "   RSS grew by $(( r2 - r1 )) kB (> $allow kB) between rounds 1 and 2: round 3 decides"
        local r3
        drop_caches
        check "round 3 after drop_caches: every byte correct" "$TOOL" load "$W/mnt" \
            "$W/oracle" --threads 64 --seconds "$secs" --label "warm random, page cache dropped, round 3"
        sleep 1
        r3=$(rss_kb "$pid")
        check "no memory growth between equal rounds (RSS $(( r2 - r1 )) kB, then $(( r3 - r2 )) kB; allowed +$allow kB)" \
            test "$(( r3 - r2 ))" -le "$allow"
    else
        check "no memory growth between equal rounds (RSS $(( r2 - r1 )) kB, allowed +$allow kB)" \
            test "$(( r2 - r1 ))" -le "$allow"
    fi
    check "RSS bounded overall (after round 2 ${r2} kB <= 2 x after warm-up + 32 MiB)" \
        test "$r2" -le "$(( 2 * r0 + 32768 ))"
    umount_l3fs "$W/mnt" "$pid" "$log"
    check "cache verifies clean" verify_cache "$W/cache"
}

# ================================================================= kill9
sc_kill9() {
    local rounds=2 n=400
    [ "$LONG" = 1 ] && rounds=6 n=1500
    "$TOOL" gen-tree "$W/src" "$n" 2 320 || return 1
    "$TOOL" oracle "$W/src" "$W/oracle" || return 1
    local log=$W/l3fs.log r pid delay tmp_seen=0
    local uniq; uniq=$(awk -F'\t' '$1 == 1 { print $4 $5 }' "$W/oracle" | sort -u | wc -l)
    for r in $(seq 1 "$rounds"); do
        mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" --jobs 4 || return 1
        pid=$DPID
        # kill when about r/(rounds+1) of the tree is encoded: mid-way
        # through the encodes whatever the machine's speed (at most 60 s)
        local target=$(( uniq * r / (rounds + 1) )) t0=$SECONDS
        "$TOOL" load "$W/mnt" "$W/oracle" --pass --threads 64 --seconds 120 --tolerate-errors \
            --label "round $r: readers while the daemon is killed" > "$W/load.out" 2>&1 &
        local lpid=$!
        while [ "$(find "$W/cache/objects" -name '*.l3' 2>/dev/null | wc -l)" -lt "$target" ] &&
              [ $(( SECONDS - t0 )) -lt 60 ]; do sleep 0.02; done
        delay=$(( SECONDS - t0 ))
        local objs; objs=$(find "$W/cache/objects" -name '*.l3' 2>/dev/null | wc -l)
        local tmps; tmps=$(find "$W/cache/objects" -name '.tmp-*' 2>/dev/null | wc -l)
        tmp_seen=$((tmp_seen + tmps))
        kill -9 "$pid"
        wait "$pid" 2>/dev/null
        fusermount3 -u -z "$W/mnt"
        wait "$lpid"
        sed 's/^/   /' "$W/load.out"
        grep -q "0 wrong bytes" "$W/load.out" || fail "round $r: a reader got wrong bytes before the kill"
        echo "   round $r: killed after ~${delay} s at $objs objects stored (target $target of $uniq distinct), $tmps temp files in flight"
        check "round $r: the kill came while files were still being encoded ($objs < $uniq objects)" test "$objs" -lt "$uniq"
    done
    echo "-- remount on the same cache"
    mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" || return 1
    pid=$DPID
    check "after kill -9: every file reads correctly (bytes and pixels)" "$TOOL" verify \
        "$W/mnt" "$W/oracle" --pixels --threads 4 --timeout 60 --label "after kill -9"
    check "no temp file left after the remount's cleanup" no_temp_files "$W/cache"
    umount_l3fs "$W/mnt" "$pid" "$log"
    check "l3fs cache verify: no bad object" verify_cache "$W/cache"
    echo "   temp files seen in flight at the kills: $tmp_seen"
}

# ============================================================== diskfull
sc_diskfull() {
    need_root "mounts a tmpfs"
    "$TOOL" gen-tree "$W/src" 300 3 200 || return 1
    "$TOOL" oracle "$W/src" "$W/oracle" || return 1
    mkdir -p "$W/small"
    mount -t tmpfs -o size=256k tmpfs "$W/small" 2>/dev/null || skip "cannot mount a tmpfs here"
    TMPFS+=("$W/small")
    local log=$W/full.log pid
    echo "-- cache on a 256 KiB tmpfs (the encoded tree is several MiB)"
    mount_l3fs "$W/src" "$W/mnt" "$W/small/cache" "$log" || return 1
    pid=$DPID
    check "full disk: every file reads correctly" "$TOOL" verify "$W/mnt" "$W/oracle" \
        --threads 8 --timeout 60 --label "cache disk full"
    check "full disk: reads keep succeeding under 64 readers" "$TOOL" load "$W/mnt" \
        "$W/oracle" --threads 64 --seconds 3 --label "cache disk full, random"
    local wf wd; wf=$(stat_num "$W/mnt" cache.instance.write_failures)
    wd=$(stat_num "$W/mnt" cache.writes_disabled)
    echo "   stats.json: write_failures=$wf writes_disabled=$wd; df: $(df -k "$W/small" | awk 'NR==2 {print $3 " kB used of " $2}')"
    check "full disk: write failures counted in stats.json ($wf)" test "${wf:-0}" -ge 1
    umount_l3fs "$W/mnt" "$pid" "$log"
    local lines; lines=$(grep -ciE 'cache.*(writ|space|disabled|read-only)|no space' "$log")
    sed 's/^/   log: /' "$log" | head -5
    check "full disk: logged once ($lines matching log lines)" test "$lines" -eq 1
    rm -rf "$W/small/cache"

    echo "-- read-only cache directory (tmpfs remounted ro, holding part of the objects)"
    mkdir -p "$W/small/cache"
    mount_l3fs "$W/src" "$W/mnt" "$W/small/cache" "$W/pre.log" || return 1
    pid=$DPID
    "$TOOL" verify "$W/mnt" "$W/oracle" --threads 2 --label "filling part of the cache" >/dev/null
    umount_l3fs "$W/mnt" "$pid" "$W/pre.log"
    mount -o remount,ro "$W/small" || { fail "cannot remount the tmpfs read-only"; return 1; }
    log=$W/ro.log
    mount_l3fs "$W/src" "$W/mnt" "$W/small/cache" "$log" || return 1
    pid=$DPID
    check "read-only cache: every file reads correctly" "$TOOL" verify "$W/mnt" "$W/oracle" \
        --threads 8 --timeout 60 --label "read-only cache"
    check "read-only cache: reads keep succeeding under 64 readers" "$TOOL" load "$W/mnt" \
        "$W/oracle" --threads 64 --seconds 3 --label "read-only cache, random"
    wf=$(stat_num "$W/mnt" cache.instance.write_failures)
    wd=$(stat_num "$W/mnt" cache.writes_disabled)
    local hits; hits=$(stat_num "$W/mnt" cache.instance.hits)
    echo "   stats.json: write_failures=$wf writes_disabled=$wd hits=$hits"
    check "read-only cache: writes disabled and counted (write_failures=$wf, writes_disabled=$wd)" \
        test "${wf:-0}" -ge 1 -o "$wd" = 1
    umount_l3fs "$W/mnt" "$pid" "$log"
    lines=$(grep -ciE 'cache.*(writ|space|disabled|read-only)|read-only' "$log")
    sed 's/^/   log: /' "$log" | head -5
    check "read-only cache: logged once ($lines matching log lines)" test "$lines" -eq 1
}

# ============================================================= twomounts
sc_twomounts() {
    local n=800 secs=5
    [ "$LONG" = 1 ] && n=4000 secs=60
    "$TOOL" gen-tree "$W/src" "$n" 4 128 || return 1
    "$TOOL" oracle "$W/src" "$W/oracle" || return 1
    mount_l3fs "$W/src" "$W/m1" "$W/cache" "$W/a.log" || return 1
    local p1=$DPID
    mount_l3fs "$W/src" "$W/m2" "$W/cache" "$W/b.log" || return 1
    local p2=$DPID
    echo "-- two daemons, one cache: two load processes, each on both mounts, cold"
    "$TOOL" load "$W/m1,$W/m2" "$W/oracle" --pass --threads 32 --seconds 600 --timeout 60 \
        --label "cold pass A (both mounts)" > "$W/la" 2>&1 &
    local la=$!
    "$TOOL" load "$W/m2,$W/m1" "$W/oracle" --pass --threads 32 --seconds 600 --timeout 60 \
        --label "cold pass B (both mounts)" > "$W/lb" 2>&1 &
    local lb=$!
    wait "$la"; local ra=$?
    wait "$lb"; local rb=$?
    sed 's/^/   /' "$W/la" "$W/lb"
    check "two mounts cold: correct bytes (reader A)" test "$ra" -eq 0
    check "two mounts cold: correct bytes (reader B)" test "$rb" -eq 0
    "$TOOL" load "$W/m1,$W/m2" "$W/oracle" --threads 32 --seconds "$secs" \
        --label "random A (both mounts)" > "$W/la" 2>&1 &
    la=$!
    "$TOOL" load "$W/m2,$W/m1" "$W/oracle" --threads 32 --seconds "$secs" \
        --label "random B (both mounts)" > "$W/lb" 2>&1 &
    lb=$!
    wait "$la"; ra=$?
    wait "$lb"; rb=$?
    sed 's/^/   /' "$W/la" "$W/lb"
    check "two mounts warm: correct bytes (reader A)" test "$ra" -eq 0
    check "two mounts warm: correct bytes (reader B)" test "$rb" -eq 0
    local e1 e2; e1=$(stat_num "$W/m1" fs.encodes); e2=$(stat_num "$W/m2" fs.encodes)
    echo "   encodes: daemon 1 $e1, daemon 2 $e2 (for $n files; duplicate work across processes is allowed)"
    check "both mounts: full check of every file" "$TOOL" verify "$W/m2" "$W/oracle" \
        --pixels --threads 2 --label "mount 2"
    umount_l3fs "$W/m1" "$p1" "$W/a.log"
    umount_l3fs "$W/m2" "$p2" "$W/b.log"
    check "shared cache verifies clean" verify_cache "$W/cache"
    check "no temp file left" no_temp_files "$W/cache"
}

# ============================================================= srcchange
# What is guaranteed (docs/RELIABILITY.md): a source whose size, mtime or
# ctime changed is re-encoded at the next LOOKUP/GETATTR after the kernel's
# attribute timeout (--timeout); an open that follows sees the new content.
# A rewrite that keeps size and mtime still changes ctime, so it is detected.
sc_srcchange() {
    # stored-deflate PNGs: a file with other pixels has exactly the same size
    "$TOOL" gen-tree "$W/src" 60 5 64 store || return 1
    mkdir -p "$W/alt"
    "$TOOL" gen-tree "$W/alt" 60 6 64 >/dev/null || return 1
    local log=$W/l3fs.log to=1
    mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" --timeout "$to" --dir-timeout "$to" || return 1
    local pid=$DPID
    "$TOOL" oracle "$W/src" "$W/oracle" >/dev/null
    check "before the change: every file correct (read twice: page cache warm)" \
        sh -c "'$TOOL' verify '$W/mnt' '$W/oracle' --label before && '$TOOL' verify '$W/mnt' '$W/oracle' --label 'before, again'"
    local changed=0 i f
    for i in 1 2 3 4 5 6 7 8; do
        f=$W/src/d00/img_0000$i.png
        cp -p "$f" "$W/orig.png"
        "$TOOL" gen-variant "$f" "$W/variant.png" || { fail "no variant for $f"; continue; }
        if [ "$(stat -c %s "$W/variant.png")" != "$(stat -c %s "$f")" ] || cmp -s "$f" "$W/variant.png"; then
            fail "variant of $f is not a same-size rewrite"; continue
        fi
        # in place: same inode, same size, other pixels, mtime restored (ctime moves)
        dd if="$W/variant.png" of="$f" conv=notrunc status=none
        touch -m -r "$W/orig.png" "$f"
        [ "$(stat -c %Y.%y "$f")" = "$(stat -c %Y.%y "$W/orig.png")" ] || fail "mtime not preserved"
        changed=$((changed + 1))
    done
    "$TOOL" oracle "$W/src" "$W/oracle2" >/dev/null
    sleep "$(( to + 1 ))"
    check "same size + preserved mtime ($changed files): new content after the timeout" \
        "$TOOL" verify "$W/mnt" "$W/oracle2" --label "after in-place rewrite"
    # size change, rename over with an old mtime, delete (other files: d00/img_0001*)
    cp "$W/alt/d00/img_00010.png" "$W/src/d00/img_00010.png"
    cp "$W/alt/d00/img_00011.png" "$W/tmp.png"; touch -d '2001-01-01' "$W/tmp.png"
    mv "$W/tmp.png" "$W/src/d00/img_00011.png"
    rm "$W/src/d00/img_00012.png"
    "$TOOL" oracle "$W/src" "$W/oracle3" >/dev/null
    sleep "$(( to + 1 ))"
    check "size change, rename over, delete: never stale" "$TOOL" verify "$W/mnt" \
        "$W/oracle3" --label "after size change/rename/delete" --prefix d00/img_0001
    check "deleted source is gone from the mount" test ! -e "$W/mnt/d00/img_00012.l3"
    # docs/FS.md "Consistent bytes": a reader gets one whole version, the
    # one it opened, even if the source is rewritten meanwhile; a lookup
    # after the change gets a new inode, so new opens read the new version
    # while the old reader finishes. A reader holds d00/img_00013.l3 open,
    # reads 64 bytes, the source is replaced (other size), a new open reads
    # the file, then the first reader reads the rest.
    cp "$W/mnt/d00/img_00013.l3" "$W/before13.l3"
    exec 7<"$W/mnt/d00/img_00013.l3"
    dd bs=64 count=1 of="$W/open13.l3" status=none <&7
    cp "$W/alt/d00/img_00013.png" "$W/src/d00/img_00013.png"
    "$TOOL" oracle "$W/src" "$W/oracle3" >/dev/null
    sleep "$(( to + 1 ))"
    check "while an old reader holds it open, a new open reads the new version" "$TOOL" verify \
        "$W/mnt" "$W/oracle3" --label "new open during an old reader" --prefix d00/img_00013
    cat <&7 >> "$W/open13.l3"
    exec 7<&-
    check "the reader open across its source's change read one whole version (the one it opened)" \
        cmp -s "$W/before13.l3" "$W/open13.l3"
    check "after the last close: the new version" "$TOOL" verify "$W/mnt" "$W/oracle3" \
        --label "after the last close" --prefix d00/img_00013
    umount_l3fs "$W/mnt" "$pid" "$log"
    echo "-- after a remount (index from disk): still the new content"
    mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" || return 1
    pid=$DPID
    check "after remount: never stale (every file)" "$TOOL" verify "$W/mnt" "$W/oracle3" --label "remount"
    umount_l3fs "$W/mnt" "$pid" "$log"
    echo "-- without inotify (--no-watch): only the attribute timeout tells the kernel"
    mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" --timeout "$to" --dir-timeout "$to" --no-watch || return 1
    pid=$DPID
    "$TOOL" verify "$W/mnt" "$W/oracle3" --label "no-watch, before" >/dev/null
    "$TOOL" verify "$W/mnt" "$W/oracle3" --label "no-watch, before, again" >/dev/null
    changed=0
    for i in 0 1 2 3 4 5 6 7; do
        f=$W/src/d00/img_0002$i.png
        cp -p "$f" "$W/orig.png"
        "$TOOL" gen-variant "$f" "$W/variant.png" || continue
        [ "$(stat -c %s "$W/variant.png")" = "$(stat -c %s "$f")" ] || continue
        dd if="$W/variant.png" of="$f" conv=notrunc status=none
        touch -m -r "$W/orig.png" "$f"
        changed=$((changed + 1))
    done
    "$TOOL" oracle "$W/src" "$W/oracle5" >/dev/null
    sleep "$(( to + 1 ))"
    check "--no-watch, same size + preserved mtime ($changed files): new content after the timeout" \
        "$TOOL" verify "$W/mnt" "$W/oracle5" --label "no-watch, after in-place rewrite"
    umount_l3fs "$W/mnt" "$pid" "$log"
    check "cache verifies clean" verify_cache "$W/cache"
}

# =============================================================== hostile
sc_hostile() {
    local nf=60 many=100000
    [ "$LONG" = 1 ] && nf=600
    "$TOOL" gen-hostile "$W/src" 7 "$nf" || return 1
    local t0=$SECONDS
    if [ "$(id -u)" = 0 ]; then # on a tmpfs: 100,000 creates in a second or two
        mkdir -p "$W/src/many"
        mount -t tmpfs -o size=256m tmpfs "$W/src/many" && TMPFS+=("$W/src/many")
    fi
    "$TOOL" gen-many "$W/src/many" "$many" || return 1
    echo "   generated $many entries in $(( SECONDS - t0 )) s"
    "$TOOL" oracle "$W/src" "$W/oracle" --skip many || return 1
    local log=$W/l3fs.log
    mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" || return 1
    local pid=$DPID
    local h0; h0=$(hwm_kb "$pid")
    check "hostile corpus: EIO or pass-through as documented, each read < 30 s" \
        "$TOOL" verify "$W/mnt" "$W/oracle" --pixels --threads 4 --timeout 30 --label hostile
    check "daemon alive after the hostile corpus" alive "$pid"
    check "second pass (failures remembered): same answers" \
        "$TOOL" verify "$W/mnt" "$W/oracle" --threads 4 --timeout 30 --label "hostile again"
    local errs; errs=$(stat_num "$W/mnt" fs.encode_errors)
    local h1; h1=$(hwm_kb "$pid")
    echo "   daemon peak RSS ${h0} kB at start, ${h1} kB after the corpus; encode_errors=$errs"
    # the largest valid bomb is 6000x6000 8-bit gray (36 MB of pixels); the
    # claims beyond the 256 Mpixel limit must be refused before allocating
    check "daemon peak memory bounded (peak ${h1} kB < 1 GiB)" test "$h1" -lt 1048576
    local dup; dup=$(grep 'cannot encode' "$log" | sort | uniq -d | wc -l)
    echo "   log: $(grep -c 'cannot encode' "$log") 'cannot encode' lines, $dup repeated"
    check "each refused file logged once" test "$dup" -eq 0
    echo "-- directory with $many entries: readdir and lstat through the mount vs the source"
    "$TOOL" lsdir "$W/src/many" | head -1 | sed 's/^/   source: /'
    local fd0; fd0=$(nfds "$pid")
    local out; out=$(timeout 300 "$TOOL" lsdir "$W/mnt/many")
    local rc=$?
    echo "$out" | head -1 | sed 's/^/   mount:  /'
    local fd1; fd1=$(nfds "$pid")
    local lim; lim=$(awk '/^Max open files/ {print $4}' "/proc/$pid/limits")
    echo "   daemon descriptors: $fd0 before, $fd1 after stat-ing every entry (limit $lim)"
    check "readdir of $many entries through the mount (all listed, all stat-able)" \
        test "$rc" -eq 0 -a "$(echo "$out" | sed -n 's/^entries=\([0-9]*\).*/\1/p')" -eq "$(( many + 2 ))" \
        -a "$(echo "$out" | sed -n 's/.*statted=\([0-9]*\).*/\1/p')" -eq "$(( many + 2 ))"
    # only directory nodes hold a descriptor: the known files cost none
    check "descriptors independent of the known entries ($fd1 after, $fd0 before)" \
        test "$fd1" -le "$(( fd0 + 64 ))"
    local t1=$SECONDS
    local c; c=$(timeout 300 ls -f "$W/mnt/many" | wc -l)
    echo "   ls -f: $c names in $(( SECONDS - t1 )) s"
    check "ls -f lists $many entries" test "$c" -eq "$(( many + 2 ))"
    check "daemon alive after the huge directory" alive "$pid"
    umount_l3fs "$W/mnt" "$pid" "$log"
    [ "$(id -u)" = 0 ] || return 0
    echo "-- configured limits: --max-pixels 16M --max-memory 256M"
    log=$W/limits.log
    mount_l3fs "$W/src" "$W/mnt" "$W/cache2" "$log" --max-pixels 16M --max-memory 256M || return 1
    pid=$DPID
    "$TOOL" as-user 0 0 "$W/mnt/bomb/zeros_6000x6000.l3"; local rb=$?
    check "a 36-Mpixel image over --max-pixels 16M gives EIO" test "$rb" -eq 5
    "$TOOL" as-user 0 0 "$W/mnt/odd/x.png/inner.l3"; rb=$?
    check "a small image under the limits still reads" test "$rb" -eq 0
    h1=$(hwm_kb "$pid")
    check "daemon peak memory under the limits (${h1} kB < 256 MiB)" test "$h1" -lt 262144
    umount_l3fs "$W/mnt" "$pid" "$log"
}

# ================================================================ escape
sc_escape() {
    "$TOOL" gen-tree "$W/src" 20 8 32 >/dev/null || return 1
    mkdir -p "$W/outside"
    cp "$W/src/d00/img_00000.png" "$W/outside/secret.png"
    chmod 0600 "$W/src/d00/img_00001.png"
    ln -s "$W/outside/secret.png" "$W/src/abs_link.png"
    ln -s ../outside/secret.png "$W/src/rel_link.png"
    ln -s ../../../../../../../../../../../etc/passwd "$W/src/d00/deep_rel_link.png"
    ln -s "$W/outside" "$W/src/dir_link"
    local sum0; sum0=$(tree_sum "$W/src")
    local log=$W/l3fs.log
    mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" || return 1
    local pid=$DPID m=$W/mnt
    check "abs symlink shown as a symlink, not transcoded" test -L "$m/abs_link.png" -a ! -e "$m/abs_link.l3"
    check "rel symlink shown as a symlink, not transcoded" test -L "$m/rel_link.png" -a ! -e "$m/rel_link.l3"
    check "readlink gives the stored target" test "$(readlink "$m/rel_link.png")" = ../outside/secret.png
    check "deep ../ symlink not followed by the daemon" test -L "$m/d00/deep_rel_link.png" -a ! -e "$m/d00/deep_rel_link.l3"
    check "dir symlink: no transcoded file behind it" test -L "$m/dir_link" -a ! -e "$m/dir_link/secret.l3"
    check "readdir never lists a .l3 for a symlink" sh -c "! ls -a '$m' '$m/d00' | grep -q '_link\.l3'"
    check "'..' from the mount root leaves the mount, not into SOURCE's parent" \
        test "$(stat -c %i "$m/d00/../..")" = "$(stat -c %i "$W")"
    check "'..' path to the outside file sees no transcoded copy" test ! -e "$m/d00/../../outside/secret.l3"
    check "'..' names inside the mount stay inside" test "$(stat -c %i "$m/d00/..")" = "$(stat -c %i "$m")"
    echo "-- writes of every kind"
    check "every write to an .l3 file refused with EROFS" "$TOOL" escape "$m" d00/img_00002.l3 d00
    check "every write to a pass-through file refused with EROFS" "$TOOL" escape "$m" d00/labels.json d00
    check "source tree unchanged by the attempts" test "$(tree_sum "$W/src")" = "$sum0"
    umount_l3fs "$m" "$pid" "$log"

    if [ "$(id -u)" != 0 ]; then echo "SKIP other-user checks: not root"; return 0; fi
    local nob=65534
    chmod 0755 "$W" "$W/src" "$W/src/d00"
    echo "-- another user (uid $nob) without allow_other"
    mount_l3fs "$W/src" "$m" "$W/cache" "$log" || return 1
    pid=$DPID
    "$TOOL" as-user $nob $nob "$m/d00/img_00002.l3"; local r=$?
    check "without allow_other: other user refused (EACCES)" test "$r" -eq 13
    umount_l3fs "$m" "$pid" "$log"
    echo "-- allow_other alone (l3fs adds default_permissions)"
    mount_l3fs "$W/src" "$m" "$W/cache" "$log" -o allow_other || return 1
    pid=$DPID
    "$TOOL" as-user $nob $nob "$m/d00/img_00002.l3"; r=$?
    check "allow_other: other user reads a 0644 file" test "$r" -eq 0
    "$TOOL" as-user $nob $nob "$m/d00/img_00001.l3"; local r600=$?
    check "allow_other alone: other user refused on a 0600 file (EACCES)" test "$r600" -eq 13
    umount_l3fs "$m" "$pid" "$log"
    echo "-- allow_other,default_permissions"
    mount_l3fs "$W/src" "$m" "$W/cache" "$log" -o allow_other,default_permissions || return 1
    pid=$DPID
    "$TOOL" as-user $nob $nob "$m/d00/img_00002.l3"; r=$?
    check "default_permissions: other user reads a 0644 file" test "$r" -eq 0
    "$TOOL" as-user $nob $nob "$m/d00/img_00001.l3"; r=$?
    check "default_permissions: other user refused on a 0600 file (EACCES)" test "$r" -eq 13
    umount_l3fs "$m" "$pid" "$log"
}

# ================================================================ bitrot
# rot_raw FILE OFFSET IMAGE: flips a byte of FILE (on the ext4 filesystem in
# IMAGE, mounted through a loop device) in the image itself: the filesystem
# sees no write, mtime and ctime stay. The file's pages must be out of the
# page cache before it is read again (drop_caches).
rot_raw() {
    local f=$1 off=$2 img=$3 bs=4096 blk ext phys
    sync
    blk=$(( off / bs ))
    # filefrag -v: "N: lstart.. lend: pstart.. pend: len:"
    phys=$(filefrag -v -b$bs "$f" | awk -v b="$blk" -F'[:. ]+' '
        /^ *[0-9]+:/ { ls=$3; le=$4; ps=$5; if (b >= ls && b <= le) { print ps + (b - ls); exit } }')
    [ -n "$phys" ] || { echo "no extent for block $blk of $f"; return 1; }
    local at=$(( phys * bs + off % bs ))
    local byte; byte=$(od -An -tu1 -j "$at" -N1 "$img" | tr -d ' ')
    printf "\\$(printf %03o $(( (byte ^ 0x5a) & 255 )))" |
        dd of="$img" bs=1 seek="$at" conv=notrunc,fsync status=none
}
# objects_of CACHE: the object files, one a line, largest first (so that
# the rotted ones span several 64 KiB chunks of range checksums)
objects_of() { find "$1/objects" -name '*.l3' -printf '%s %p\n' | sort -k1,1rn -k2 | cut -d' ' -f2-; }
# xattr_op get|strip FILE...: how many of the files carry range checksums
# (docs/CACHE.md) / remove them (what an object of an earlier version lacks)
xattr_op() {
    /usr/bin/python3 -c '
import os, sys
op, n = sys.argv[1], 0
for f in sys.argv[2:]:
    try:
        if op == "strip":
            os.removexattr(f, "user.l3cache.ranges")
        elif len(os.getxattr(f, "user.l3cache.ranges")) >= 56:
            n += 1
    except OSError:
        pass
print(n)' "$@"
}
sc_bitrot() {
    need_root "a loop device and drop_caches"
    command -v filefrag >/dev/null || skip "filefrag (e2fsprogs) is missing"
    local n=6
    [ "$LONG" = 1 ] && n=16
    "$TOOL" gen-tree "$W/src" 80 9 160 >/dev/null || return 1
    "$TOOL" gen-tree "$W/big" $((3 * n)) 19 1200 >/dev/null && mv "$W/big" "$W/src/big" || return 1
    "$TOOL" oracle "$W/src" "$W/oracle" >/dev/null || return 1
    truncate -s 192M "$W/disk.img" && mkfs.ext4 -q -F -b 4096 "$W/disk.img" >/dev/null 2>&1 ||
        skip "mkfs.ext4 failed"
    mkdir -p "$W/disk"
    mount -o loop "$W/disk.img" "$W/disk" 2>/dev/null || skip "cannot mount a loop device here"
    TMPFS+=("$W/disk")
    local cache=$W/disk/cache log=$W/l3fs.log pid
    mount_l3fs "$W/src" "$W/mnt" "$cache" "$log" || return 1
    pid=$DPID
    "$TOOL" verify "$W/mnt" "$W/oracle" --threads 2 --label "fill the cache" >/dev/null ||
        fail "filling the cache"
    umount_l3fs "$W/mnt" "$pid" "$log"
    local objs; mapfile -t objs < <(objects_of "$cache")
    local ranged; ranged=$(xattr_op get "${objs[@]}")
    check "every stored object carries range checksums ($ranged of ${#objs[@]})" \
        test "$ranged" -eq "${#objs[@]}"
    local multi; multi=$(find "$cache/objects" -name '*.l3' -size +64k | wc -l)
    check "the $((2 * n)) largest objects span several 64 KiB chunks ($multi over 64 KiB)" \
        test "$multi" -ge $((2 * n))
    echo "-- at rest: the $n largest of ${#objs[@]} objects rotted under the filesystem (mid-payload and near the end), every third without range checksums (checked whole)"
    local i f sz before after
    for i in $(seq 0 $((n - 1))); do
        f=${objs[$i]}
        [ $((i % 3)) = 0 ] && xattr_op strip "$f" >/dev/null
        sz=$(stat -c %s "$f")
        before=$(stat -c '%Y %Z' "$f")
        rot_raw "$f" $(( i % 2 ? sz - 3 : sz / 2 )) "$W/disk.img" || { fail "rot $f"; return 1; }
        after=$(stat -c '%Y %Z' "$f")
        [ "$before" = "$after" ] || fail "the rot changed $f's times"
    done
    sync; echo 3 > /proc/sys/vm/drop_caches # page cache, dentries and inodes
    mount_l3fs "$W/src" "$W/mnt" "$cache" "$log" || return 1
    pid=$DPID
    check "at rest: every file right through the mount (bytes and pixels)" "$TOOL" verify \
        "$W/mnt" "$W/oracle" --pixels --threads 2 --label "after rot at rest"
    local rep enc; rep=$(stat_num "$W/mnt" cache.instance.corrupt_repaired); enc=$(stat_num "$W/mnt" fs.encodes)
    echo "   corrupt_repaired=$rep encodes=$enc"
    check "at rest: the $n rotted objects found and encoded again ($rep repaired, $enc encodes)" \
        test "$rep" -eq "$n" -a "$enc" -eq "$n"

    echo "-- mounted: $n other objects rotted the same way, page cache dropped, every file read again"
    mapfile -t objs < <(objects_of "$cache")
    for i in $(seq 0 $((n - 1))); do
        f=${objs[$((n + i))]} # the next n largest (the repaired ones kept their size)
        sz=$(stat -c %s "$f")
        rot_raw "$f" $(( i % 2 ? sz / 3 : sz - 9 )) "$W/disk.img" || { fail "rot $f"; return 1; }
    done
    sync; echo 3 > /proc/sys/vm/drop_caches # page cache, dentries and inodes
    check "mounted, page cache dropped: every file right (bytes and pixels)" "$TOOL" verify \
        "$W/mnt" "$W/oracle" --pixels --threads 2 --label "after rot while mounted"
    local rep2 enc2; rep2=$(stat_num "$W/mnt" cache.instance.corrupt_repaired); enc2=$(stat_num "$W/mnt" fs.encodes)
    echo "   corrupt_repaired=$rep2 encodes=$enc2"
    check "mounted: $n more rotted objects found and encoded again ($((rep2 - rep)) repaired, $((enc2 - enc)) encodes)" \
        test "$((rep2 - rep))" -eq "$n" -a "$((enc2 - enc))" -eq "$n"
    local lines; lines=$(grep -c 'failed its payload checksum' "$log")
    check "each repair logged once ($lines lines for $((2 * n)) objects)" test "$lines" -eq $((2 * n))
    umount_l3fs "$W/mnt" "$pid" "$log"
    check "cache verifies clean" verify_cache "$cache"
}

# ================================================================= churn
sc_churn() {
    local secs=10
    [ "$LONG" = 1 ] && secs=60
    local mode
    for mode in watch no-watch; do
        rm -rf "$W/src" "$W/cache"; mkdir -p "$W/src"
        "$TOOL" churn "$W/src" "$W/mnt" --create-only || return 1
        local log=$W/churn-$mode.log
        if [ $mode = watch ]; then
            mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" || return 1
        else
            mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" --no-watch || return 1
        fi
        local pid=$DPID
        echo "-- $mode: 8 readers for ${secs} s while the sources change"
        check "churn, $mode: no other file's content, no torn read, errors only near changes" \
            "$TOOL" churn "$W/src" "$W/mnt" --readers 8 --seconds "$secs" --bound-ms 1500
        umount_l3fs "$W/mnt" "$pid" "$log"
    done
}

# =============================================================== privacy
# readable_cache_files UID CACHE: files of CACHE another user can open
readable_cache_files() {
    local u=$1 c=$2 n=0 f
    while IFS= read -r f; do
        "$TOOL" as-user "$u" "$u" "$f" >/dev/null 2>&1 && n=$((n + 1))
    done < <(find "$c" -type f)
    echo "$n"
}
sc_privacy() {
    need_root "another user (setresuid)"
    local nob=65534
    "$TOOL" gen-tree "$W/src" 12 10 48 >/dev/null || return 1
    chmod 0755 "$W" "$W/src"
    find "$W/src" -type d -exec chmod 0755 {} +
    chmod 0600 "$W/src/d00/img_00000.png" "$W/src/d00/img_00001.png"
    local priv=2 pngs; pngs=$(find "$W/src" -name '*.png' | wc -l)
    local log=$W/l3fs.log pid
    echo "-- default (private) cache, allow_other"
    mount_l3fs "$W/src" "$W/mnt" "$W/cache" "$log" -o allow_other || return 1
    pid=$DPID
    find "$W/mnt" -name '*.l3' -exec cat {} + >/dev/null
    check "cache directory private: $(stat -c %a "$W/cache")" test "$(stat -c %a "$W/cache")" = 700
    local r; r=$(readable_cache_files $nob "$W/cache")
    check "as uid $nob: no file of the cache readable ($r readable)" test "$r" -eq 0
    "$TOOL" as-user $nob $nob "$W/mnt/d00/img_00000.l3"; local e=$?
    check "as uid $nob: the mount refuses the 0600 source's .l3 (EACCES, got $e)" test "$e" -eq 13
    "$TOOL" as-user $nob $nob "$W/mnt/d00/img_00002.l3"; e=$?
    check "as uid $nob: a 0644 source's .l3 reads" test "$e" -eq 0
    "$TOOL" as-user $nob $nob "$W/mnt/.l3fs/stats.json"; e=$?
    check "as uid $nob: stats.json under allow_other is the owner's (EACCES, got $e)" test "$e" -eq 13
    umount_l3fs "$W/mnt" "$pid" "$log"
    echo "-- --cache-shared: 0755/0644, private sources kept out"
    mount_l3fs "$W/src" "$W/mnt" "$W/shared" "$log" -o allow_other --cache-shared || return 1
    pid=$DPID
    find "$W/mnt" -name '*.l3' -exec cat {} + >/dev/null
    local objs; objs=$(find "$W/shared/objects" -name '*.l3' | wc -l)
    check "shared cache: $objs objects for $pngs PNGs, none of the $priv private ones" \
        test "$objs" -le $(( pngs - priv ))
    r=$(readable_cache_files $nob "$W/shared/objects")
    check "shared cache: every object readable by others ($r of $objs)" test "$r" -eq "$objs"
    "$TOOL" as-user $nob $nob "$W/mnt/d00/img_00000.l3"; e=$?
    check "shared cache: the mount still refuses the 0600 source (EACCES, got $e)" test "$e" -eq 13
    umount_l3fs "$W/mnt" "$pid" "$log"
}

# =============================================================== gluster
sc_gluster() {
    [ -n "${L3_GLUSTER:-}" ] || skip "no GlusterFS volume (${L3_GLUSTER_SKIP:-L3_GLUSTER is not set: scripts/test.sh sets one up})"
    local G=$L3_GLUSTER n=120
    [ "$LONG" = 1 ] && n=600
    "$TOOL" gen-tree "$W/src" "$n" 11 160 >/dev/null || return 1
    "$TOOL" oracle "$W/src" "$W/oracle" >/dev/null || return 1
    local uniq; uniq=$(awk -F'\t' '$1 == 1 { print $4 $5 }' "$W/oracle" | sort -u | wc -l)
    local ca=$G/a/cache-$$ cb=$G/b/cache-$$ cc=$G/c/cache-$$ p1 p2

    echo "-- two daemons, caches on two clients of one volume, cold, same order, same moment"
    # started at once: the second opens the cache while the first holds it
    start_l3fs "$W/src" "$W/m1" "$ca" "$W/a.log"; p1=$DPID
    start_l3fs "$W/src" "$W/m2" "$cb" "$W/b.log"; p2=$DPID
    wait_mounted "$W/m1" $p1 "$W/a.log" || return 1
    wait_mounted "$W/m2" $p2 "$W/b.log" || return 1
    "$TOOL" verify "$W/m1" "$W/oracle" --threads 2 --label "daemon 1, cold" > "$W/v1" 2>&1 &
    local v1=$!
    "$TOOL" verify "$W/m2" "$W/oracle" --threads 2 --label "daemon 2, cold" > "$W/v2" 2>&1 &
    local v2=$!
    wait $v1; local r1=$?; wait $v2; local r2=$?
    sed 's/^/   /' "$W/v1" "$W/v2" | grep -v '^   PASS' | head -20
    check "cold, both daemons: every byte right" test $r1 -eq 0 -a $r2 -eq 0
    local e1 e2; e1=$(stat_num "$W/m1" fs.encodes); e2=$(stat_num "$W/m2" fs.encodes)
    local w1 w2; w1=$(stat_num "$W/m1" cache.instance.claim_waits); w2=$(stat_num "$W/m2" cache.instance.claim_waits)
    echo "   encodes: $e1 + $e2 = $((e1 + e2)) for $uniq distinct PNGs ($(awk "BEGIN { printf \"%.2f\", ($e1 + $e2) / $uniq }")x); claim waits $w1 + $w2"
    check "encodes <= 1.15 x distinct files ($((e1 + e2)) for $uniq)" \
        test $(( (e1 + e2) * 100 )) -le $(( uniq * 115 ))
    umount_l3fs "$W/m1" "$p1" "$W/a.log"
    umount_l3fs "$W/m2" "$p2" "$W/b.log"
    check "shared cache verifies clean" verify_cache "$ca"

    echo "-- range checksums on the volume: kept, seen through another client, rot caught"
    # the attribute is set by the storing client on the temp file before the
    # rename; the third client ($cc: the same directory) must see it on all
    local nobj nx
    nobj=$(find "$cc/objects" -name '*.l3' | wc -l)
    nx=$(/usr/bin/python3 -c 'import os, sys
n = 0
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        if f.endswith(".l3"):
            try:
                n += len(os.getxattr(os.path.join(d, f), "user.l3cache.ranges")) > 48
            except OSError:
                pass
print(n)' "$cc/objects")
    echo "   $nx of $nobj objects carry user.l3cache.ranges through the third client"
    check "every object keeps its range checksums on GlusterFS ($nx of $nobj)" \
        test "$nobj" -gt 0 -a "$nx" -eq "$nobj"
    # rot in 3 objects (a byte in the middle, written through the third
    # client); a daemon on the second client serves every byte right
    find "$cc/objects" -name '*.l3' | head -3 | while read -r o; do
        /usr/bin/python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); size = os.fstat(fd).st_size
b = os.pread(fd, 1, size // 2); os.pwrite(fd, bytes([b[0] ^ 0x20]), size // 2); os.close(fd)' "$o"
    done
    drop_caches
    mount_l3fs "$W/src" "$W/m2" "$cb" "$W/b.log" || return 1; p2=$DPID
    check "rot through GlusterFS: every byte right" "$TOOL" verify "$W/m2" "$W/oracle" \
        --threads 2 --label "after rot on the volume"
    local rep; rep=$(stat_num "$W/m2" cache.instance.corrupt_repaired)
    umount_l3fs "$W/m2" "$p2" "$W/b.log"
    check "rot through GlusterFS: the 3 rotten objects found and re-encoded ($rep)" test "$rep" -eq 3

    echo "-- kill -9 of one daemon in the middle of a cold pass"
    "$L3FS" cache clear --cache-dir "$ca" >/dev/null
    mount_l3fs "$W/src" "$W/m1" "$ca" "$W/a.log" --jobs 2 || return 1; p1=$DPID
    mount_l3fs "$W/src" "$W/m2" "$cb" "$W/b.log" --jobs 2 || return 1; p2=$DPID
    "$TOOL" load "$W/m1" "$W/oracle" --pass --threads 8 --seconds 120 --tolerate-errors \
        --label "daemon 1 (killed)" > "$W/l1" 2>&1 &
    local l1=$!
    "$TOOL" verify "$W/m2" "$W/oracle" --threads 2 --label "daemon 2, through the kill" > "$W/v2" 2>&1 &
    v2=$!
    local t0=$SECONDS
    while [ "$(find "$ca/objects" -name '*.l3' 2>/dev/null | wc -l)" -lt $(( uniq / 3 )) ] &&
          [ $(( SECONDS - t0 )) -lt 60 ]; do sleep 0.05; done
    local at; at=$(find "$ca/objects" -name '*.l3' | wc -l)
    kill -9 "$p1"; wait "$p1" 2>/dev/null; fusermount3 -u -z "$W/m1"
    wait $l1
    wait $v2; r2=$?
    echo "   killed daemon 1 at $at of $uniq objects"
    check "kill -9: the other daemon read every file right" test $r2 -eq 0
    mount_l3fs "$W/src" "$W/m1" "$ca" "$W/a.log" || return 1; p1=$DPID
    check "kill -9: after a remount every file right (bytes and pixels)" "$TOOL" verify "$W/m1" \
        "$W/oracle" --pixels --threads 2 --label "remount after kill -9"
    umount_l3fs "$W/m1" "$p1" "$W/a.log"
    umount_l3fs "$W/m2" "$p2" "$W/b.log"
    check "kill -9: verify clean" verify_cache "$ca"
    check "kill -9: no temp file left" no_temp_files "$ca"

    echo "-- cache clear and gc from a third client while both daemons fill the cache"
    mount_l3fs "$W/src" "$W/m1" "$ca" "$W/a.log" || return 1; p1=$DPID
    mount_l3fs "$W/src" "$W/m2" "$cb" "$W/b.log" || return 1; p2=$DPID
    "$L3FS" cache clear --cache-dir "$cc" >/dev/null || fail "clear (before)"
    "$TOOL" load "$W/m1,$W/m2" "$W/oracle" --threads 8 --seconds 10 --label "both daemons" > "$W/l1" 2>&1 &
    l1=$!
    local k
    for k in 1 2 3 4 5 6; do
        sleep 0.8
        "$L3FS" cache clear --cache-dir "$cc" >/dev/null || fail "clear from the third client"
        sleep 0.4
        "$L3FS" cache gc --cache-dir "$cc" --cache-size 1M >/dev/null || fail "gc from the third client"
    done
    wait $l1; local rl=$?
    sed 's/^/   /' "$W/l1" | tail -3
    check "clear/gc: every byte right under load" test $rl -eq 0
    local wf1 wf2 wd1 wd2
    wf1=$(stat_num "$W/m1" cache.instance.write_failures); wf2=$(stat_num "$W/m2" cache.instance.write_failures)
    wd1=$(stat_num "$W/m1" cache.writes_disabled); wd2=$(stat_num "$W/m2" cache.writes_disabled)
    echo "   write failures $wf1 + $wf2, writes disabled $wd1 / $wd2"
    check "clear/gc: no write failures, writes never disabled" test "$wf1" -eq 0 -a "$wf2" -eq 0 -a "$wd1" = 0 -a "$wd2" = 0
    "$TOOL" verify "$W/m1" "$W/oracle" --threads 2 --label "refill" >/dev/null
    local objs; objs=$(find "$ca/objects" -name '*.l3' | wc -l)
    check "clear/gc: the cache refills ($objs objects)" test "$objs" -ge $(( uniq * 9 / 10 ))
    check "clear/gc: no 'disk full or read-only' message" sh -c "! grep -qi 'disk full\|read-only' '$W/a.log' '$W/b.log'"
    umount_l3fs "$W/m1" "$p1" "$W/a.log"
    umount_l3fs "$W/m2" "$p2" "$W/b.log"
    rm -rf "$ca"

    if [ -n "${L3_GLUSTER_SMALL:-}" ]; then
        echo "-- ENOSPC: the cache on a volume with 1 MiB left"
        local S=$L3_GLUSTER_SMALL
        dd if=/dev/zero of="$S/filler-$$" bs=1M 2>/dev/null
        truncate -s -1M "$S/filler-$$"
        mount_l3fs "$W/src" "$W/m1" "$S/cache-$$" "$W/small.log" || return 1; p1=$DPID
        check "ENOSPC: every file right" "$TOOL" verify "$W/m1" "$W/oracle" --threads 2 \
            --label "volume full"
        wf1=$(stat_num "$W/m1" cache.instance.write_failures)
        echo "   write_failures=$wf1; df: $(df -k "$S" | awk 'NR==2 {print $3 " of " $2 " kB"}')"
        umount_l3fs "$W/m1" "$p1" "$W/small.log"
        local lines; lines=$(grep -ci 'cannot store objects' "$W/small.log")
        sed 's/^/   log: /' "$W/small.log" | grep -i 'cannot store' | head -2
        check "ENOSPC: write failures counted ($wf1) and logged once ($lines), naming the error" \
            sh -c "test '$wf1' -ge 1 -a '$lines' -eq 1 && grep -qi 'no space left' '$W/small.log'"
        rm -rf "$S/cache-$$" "$S/filler-$$"
    fi
}

case $scenario in
load | kill9 | diskfull | twomounts | srcchange | hostile | escape | bitrot | churn | privacy | gluster)
    "sc_$scenario" || fail "$scenario aborted" ;;
*) echo "unknown scenario $scenario"; exit 2 ;;
esac
finish
