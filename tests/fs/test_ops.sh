#!/usr/bin/env bash
# test_ops.sh — l3fs as an operator meets it, on real mounts of data/sample:
#   - metrics of two live mounts sharing one cache pass `promtool check metrics`
#     and carry distinct mount/source labels;
#   - a second mount on a live mount, a mount on a dead one (daemon killed
#     with -9), a mountpoint inside the source and an -o typo are each refused
#     with exit status 2 and one line saying what to do, and nothing stacks;
#     after `fusermount3 -u` the dead mountpoint mounts again;
#   - --log-file gets the daemon's lines; without syslog (/dev/log absent,
#     simulated) the start says so in one line and the log goes to
#     CACHE_DIR/l3fs.log;
#   - -o keep_names: encoded PNGs keep their .png names with L3 bytes, Pillow
#     (with `import l3`) opens them with the source PNG's pixels, warm finds them.
# Environment (meson): L3FS, L3_SOURCE_ROOT, PYTHONPATH (the build's package).
# Output: TAP, one case per check. Exit 77 (skip) without root, /dev/fuse or fusermount3.
set -uo pipefail
: "${L3FS:?}" "${L3_SOURCE_ROOT:?}"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (mounts, kill -9 of a daemon)"; exit 77; }
[ -e /dev/fuse ] || { echo "SKIP: /dev/fuse is absent"; exit 77; }
command -v fusermount3 >/dev/null || { echo "SKIP: fusermount3 is missing"; exit 77; }
tmp=$(mktemp -d /tmp/l3fs-ops.XXXXXX)
# each check is a TAP case (scripts/test-totals.py counts them, skips with reasons)
fail=0 n=0
echo "TAP version 13"
ok() { n=$((n + 1)); echo "ok $n - $*"; }
bad() { n=$((n + 1)); echo "not ok $n - $*"; fail=1; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
mounts_at() { awk -v m="$1" '$5 == m' /proc/self/mountinfo | wc -l; }
cleanup() {
    for m in "$tmp"/m*; do
        while [ "$(mounts_at "$m")" -gt 0 ]; do fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; done
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
cp -r "$L3_SOURCE_ROOT/data/sample" "$tmp/src"
src=$tmp/src
mkdir "$tmp/ma" "$tmp/mb" "$tmp/mc" "$tmp/md" "$src/inner"
png=leftImg8bit/train/meadow/meadow_000000_000019_leftImg8bit

# refused: exit status 2, exactly one line on stderr matching $2, and no new mount at $3
refused() { # what pattern mountpoint command...
    local what=$1 pat=$2 m=$3
    shift 3
    local before after rc
    before=$(mounts_at "$m")
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    after=$(mounts_at "$m")
    echo "     $what: $(cat "$tmp/err")"
    if [ $rc = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "$pat" "$tmp/err" && [ "$after" = "$before" ]; then
        ok "$what: refused in one line, exit 2, mounts at $m: $after"
    else
        bad "$what: exit $rc, $(wc -l <"$tmp/err") line(s), mounts $before -> $after"
    fi
}

# ---- two mounts, one cache; metrics ----
"$L3FS" "$src" "$tmp/ma" --cache-dir "$tmp/cache" --log-file "$tmp/a.log" --log-level info ||
    bad "mount a"
"$L3FS" "$src" "$tmp/mb" --cache-dir "$tmp/cache" --log-file "$tmp/b.log" --log-level info ||
    bad "mount b"
cat "$tmp/ma/$png.l3" "$tmp/mb/$png.l3" >/dev/null
grep -q "l3fs\[[0-9]*\] info: mounted $src on $tmp/ma" "$tmp/a.log" &&
    ok "--log-file: $(grep -m1 mounted "$tmp/a.log")" || bad "--log-file has no 'mounted' line"
for m in ma mb; do
    cp "$tmp/$m/.l3fs/metrics" "$tmp/$m.prom"
    if out=$(promtool check metrics <"$tmp/$m.prom" 2>&1); then
        ok "promtool check metrics ($m, $(grep -vc '^#' "$tmp/$m.prom") samples)${out:+: $out}"
    else
        bad "promtool check metrics ($m): $out"
    fi
done
la=$(grep '^l3fs_encodes_total{' "$tmp/ma.prom"); lb=$(grep '^l3fs_encodes_total{' "$tmp/mb.prom")
echo "     $la"; echo "     $lb"
case $la in *"mount=\"$tmp/ma\",source=\"$src\""*) ;; *) bad "mount label of a" ;; esac
[ "${la% *}" != "${lb% *}" ] && ok "two mounts' samples differ by their labels" || bad "labels collide"
grep -q '_bytes_served\|_bytes_written' "$tmp/ma.prom" && bad "old byte counter names" ||
    ok "byte counters all *_bytes_total"

# ---- refusals ----
refused "second mount on a live mount" "already mounted" "$tmp/ma" \
    "$L3FS" "$src" "$tmp/ma" --cache-dir "$tmp/cache"
refused "mountpoint inside the source" "inside the source" "$src/inner" \
    "$L3FS" "$src" "$src/inner" --cache-dir "$tmp/cache"
refused "-o typo" "did you mean 'cache_dir'" "$tmp/mc" \
    "$L3FS" "$src" "$tmp/mc" -o ro,cahce_dir="$tmp/cache"
pid=$(sed -n 's/.*l3fs\[\([0-9]*\)\] info: mounted .*/\1/p' "$tmp/b.log" | head -1)
echo "     daemon of mb: $pid: $(ps -o pid=,stat=,args= -p "$pid")"
if [ -n "$pid" ] && kill -9 "$pid"; then
    for _ in $(seq 50); do stat "$tmp/mb" >/dev/null 2>&1 || break; sleep 0.1; done
    if stat "$tmp/mb" >/dev/null 2>"$tmp/err"; then bad "no ENOTCONN after kill -9"
    else grep -q "not connected" "$tmp/err" && ok "kill -9 $pid left a dead mount: $(cat "$tmp/err")" ||
        bad "after kill -9: $(cat "$tmp/err")"; fi
    refused "mount on a dead mount" "dead FUSE mount.*fusermount3 -u" "$tmp/mb" \
        "$L3FS" "$src" "$tmp/mb" --cache-dir "$tmp/cache"
    fusermount3 -u "$tmp/mb" && [ "$(mounts_at "$tmp/mb")" = 0 ] &&
        "$L3FS" "$src" "$tmp/mb" --cache-dir "$tmp/cache" --log-file "$tmp/b2.log" &&
        [ "$(mounts_at "$tmp/mb")" = 1 ] &&
        cmp -s "$tmp/mb/$png.l3" "$tmp/ma/$png.l3" &&
        ok "after fusermount3 -u the mountpoint mounts again, one mount, same bytes" ||
        bad "remount after the dead mount"
else
    bad "no daemon pid in b.log"
fi

# ---- no syslog: the fallback says where the log goes ----
L3FS_SYSLOG_SOCKET=$tmp/no-such-socket "$L3FS" "$src" "$tmp/mc" --cache-dir "$tmp/cache3" \
    2>"$tmp/err" || bad "mount c"
sed 's/^/     /' "$tmp/err"
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "no syslog here.*$tmp/cache3/l3fs.log" "$tmp/err" &&
    ok "without syslog: one line names the log file" || bad "no-syslog notice"
grep -q "warn: no syslog .*mounted $src on $tmp/mc" "$tmp/cache3/l3fs.log" 2>/dev/null &&
    ok "the fallback log has the daemon's lines: $(tail -1 "$tmp/cache3/l3fs.log")" ||
    bad "fallback log"

# ---- keep_names ----
"$L3FS" "$src" "$tmp/md" --cache-dir "$tmp/cache" -o keep_names,log_file="$tmp/d.log" || bad "mount d"
names=$(cd "$tmp/md" && find . -type f | sort)
grep -q '\.l3$' <<<"$names" && bad "keep_names shows .l3 names" || ok "keep_names: no .l3 names"
[ "$(head -c 4 "$tmp/md/$png.png")" = L3IM ] && ok "keep_names: $png.png holds L3 bytes" ||
    bad "keep_names: $png.png is not L3"
cmp -s "$tmp/md/$png.png" "$tmp/ma/$png.l3" && ok "keep_names: same bytes as $png.l3 elsewhere" ||
    bad "keep_names bytes differ"
[ "$(stat -c %s "$tmp/md/$png.png")" = "$(stat -c %s "$tmp/ma/$png.l3")" ] &&
    ok "keep_names: st_size is the L3 size" || bad "keep_names size"
if [ -n "${L3_OPS_NO_PYTHON:-}" ]; then
    skip "keep_names: Image.open gives the source pixels" "$L3_OPS_NO_PYTHON"
elif /usr/bin/python3 - "$tmp/md" "$src" <<'PY'
import os, sys
import numpy as np
from PIL import Image
import l3  # registers the plugin
mnt, src = sys.argv[1:]
n = 0
for dp, _, fs in os.walk(src):
    for f in fs:
        if not f.endswith(".png"):
            continue
        rel = os.path.relpath(os.path.join(dp, f), src)
        with Image.open(os.path.join(mnt, rel)) as a, Image.open(os.path.join(src, rel)) as b:
            assert a.format == "L3", rel
            assert a.mode == b.mode and np.array_equal(np.asarray(a), np.asarray(b)), rel
        n += 1
print(f"     Pillow: {n} .png files of the keep_names mount = their source PNGs")
assert n >= 5
PY
then ok "keep_names: Image.open gives the source pixels"; else bad "keep_names: Pillow"; fi
out=$("$L3FS" warm "$tmp/md" 2>&1 | tail -1)
echo "     $out"
grep -q "^warm: 7 files" <<<"$out" && ok "warm finds the 7 PNGs of a keep_names mount" ||
    bad "warm on keep_names"

echo "1..$n"
exit $fail
