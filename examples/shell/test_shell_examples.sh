#!/usr/bin/env bash
# Test of the shell examples on data/sample:
#   1. l3fs-session.sh: mounts, warms, reads, prints a 100% hit rate for the read
#      pass, unmounts (nothing left mounted);
#   2. the fstab line of fstab.example, with this checkout's paths, mounted with
#      `mount --fstab FILE MOUNTPOINT` (the same path as a line in /etc/fstab);
#   3. the [Mount] section of mnt-l3-cityscapes.mount, mounted with mount(8) the way
#      systemd does, and the unit checked by systemd-analyze when it is present.
# For 2 and 3 it checks that labelIds stay PNG (the exclude option) and that an
# .l3 read through the mount decodes to the PNG's pixels (`l3 verify --against`).
# Environment (meson sets it): L3_SOURCE_ROOT, L3FS, L3 (the l3 CLI).
# Exit status 77 (meson: skipped) when /dev/fuse is absent.
# Output is matched with `grep -q PATTERN <<<"$out"`, never `printf | grep -q`: under
# pipefail the writer can take SIGPIPE once grep has matched and quit, and the check fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=${L3_SOURCE_ROOT:-$here/../..}
src=$top/data/sample
: "${L3FS:?L3FS must name the l3fs binary}" "${L3:?L3 must name the l3 CLI}"
[ -e /dev/fuse ] || { echo "SKIP: /dev/fuse is absent: cannot mount l3fs here"; exit 77; }

tmp=$(mktemp -d /tmp/l3-shell-test.XXXXXX)
mnt=$tmp/mnt
mkdir "$mnt"
cleanup() {
    if grep -q " $mnt " /proc/mounts; then umount -l "$mnt" || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

rel=leftImg8bit/train/meadow/meadow_000000_000019_leftImg8bit
lbl=gtFine/train/meadow/meadow_000000_000019_gtFine_labelIds
check_mounted() { # what
    local what=$1
    grep -q " $mnt fuse" /proc/mounts && ok "$what: mounted" || bad "$what: not in /proc/mounts"
    [ -f "$mnt/$lbl.png" ] && [ ! -e "$mnt/$lbl.l3" ] \
        && ok "$what: exclude option kept $lbl.png" || bad "$what: exclude option not applied"
    if "$L3" verify "$mnt/$rel.l3" --against "$src/$rel.png" >/dev/null; then
        ok "$what: $rel.l3 decodes to the PNG's pixels"
    else
        bad "$what: $rel.l3 does not verify against its PNG"
    fi
    umount "$mnt" && ! grep -q " $mnt " /proc/mounts && ok "$what: unmounted" || bad "$what: umount"
}

# 1. The session script.
out=$(L3FS=$L3FS JOBS=2 "$here/l3fs-session.sh" "$src" "$mnt" --cache-dir "$tmp/cache1" 2>&1) \
    && ok "l3fs-session.sh exits 0" || bad "l3fs-session.sh failed: $out"
printf '%s\n' "$out" | sed 's/^/    | /'
grep -q "warm: 7 files.*7 encoded now, 0 already cached, 0 errors" <<<"$out" \
    && ok "warm encoded the 7 PNGs" || bad "warm summary missing or wrong"
grep -q "hit rate of .l3 opens, read pass *: 100.0% (7 hits, 0 misses)" <<<"$out" \
    && ok "read pass after warm: 7 hits, 0 misses" || bad "read pass hit rate not 100% of 7"
grep -q "^9 files," <<<"$out" && ok "read 9 files" || bad "file count"
grep -q " $mnt " /proc/mounts && bad "still mounted after the script" || ok "unmounted by the script"

if [ "$(id -u)" != 0 ]; then
    echo "SKIP (parts 2, 3): mount(8) with an fstab file or a unit's options needs root"
    [ $fail = 0 ] && echo "all checks run passed" || echo "some checks failed"
    exit $fail
fi

# 2. fstab line, paths replaced by this checkout's.
opts_sub() { sed -e "s|/var/cache/l3fs|$tmp/cache2|g"; }
line=$(grep -v '^[[:space:]]*#' "$here/fstab.example" | grep -m1 'fuse' \
       | sed -e "s|^/usr/local/bin/l3fs#/data/cityscapes|$L3FS#$src|" -e "s|/mnt/cityscapes-l3|$mnt|" \
       | opts_sub)
printf '%s\n' "$line" > "$tmp/fstab"
echo "    fstab: $line"
if mount --fstab "$tmp/fstab" "$mnt"; then check_mounted "fstab"; else bad "mount --fstab failed"; fi

# 3. systemd mount unit: What/Where/Type/Options as systemd passes them to mount(8).
unit=$here/mnt-l3-cityscapes.mount
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify "$unit" && ok "systemd-analyze verify accepts the unit" \
        || bad "systemd-analyze verify rejects the unit"
fi
key() { sed -n "s/^$1=//p" "$unit"; }
what=$(key What | sed "s|^/usr/local/bin/l3fs#/data/cityscapes|$L3FS#$src|")
type=$(key Type)
options=$(key Options | sed -e "s|/var/cache/l3fs|$tmp/cache3|g")
[ "$(key Where)" = /mnt/l3/cityscapes ] && ok "unit name matches Where=" || bad "Where= vs file name"
echo "    unit: mount -t $type -o $options $what $mnt"
if mount -t "$type" -o "$options" "$what" "$mnt"; then check_mounted "systemd unit"
else bad "mount of the unit's What= failed"; fi

[ $fail = 0 ] && echo "all checks passed" || echo "some checks failed"
exit $fail
