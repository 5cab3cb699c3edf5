#!/usr/bin/env bash
# scripts/gluster.sh up DIR | down DIR — a GlusterFS volume on this machine
# for the shared-cache tests (tests/stress/stress.sh gluster).
#
# up: starts glusterd (unless one runs), creates and starts two volumes with
# bricks under DIR (127.0.0.2: gluster refuses 127.0.0.1 and "localhost", and
# accepts this other loopback address; `force` because the bricks are on the
# root filesystem): l3fs-<id>, mounted three times through the FUSE client
# (DIR/a, DIR/b, DIR/c: three clients of one volume, like three hosts), and
# l3fs-<id>-small on a 48 MiB brick (DIR/small: for ENOSPC). Prints the
# environment the tests read (L3_GLUSTER=DIR, L3_GLUSTER_SMALL=DIR/small),
# or L3_GLUSTER_SKIP="reason" when any step fails (then nothing is left).
# down: unmounts, stops and deletes the volumes, stops the glusterd it started.
# Needs root and /dev/fuse; glusterfs-server from scripts/deps.sh.
set -uo pipefail
cmd=${1:?usage: gluster.sh up|down DIR}
dir=${2:?usage: gluster.sh up|down DIR}
id=$(basename "$dir" | tr -c 'a-zA-Z0-9\n' '-')
vol=l3fs-$id
g() { timeout 120 gluster --mode=script "$@"; }

down() {
    for m in a b c small; do
        mountpoint -q "$dir/$m" 2>/dev/null && { umount "$dir/$m" 2>/dev/null || umount -l "$dir/$m"; }
    done
    for v in "$vol" "$vol-small"; do
        g volume stop "$v" force >/dev/null 2>&1
        g volume delete "$v" >/dev/null 2>&1
    done
    if [ -f "$dir/glusterd.started" ]; then
        pkill -F "$dir/glusterd.pid" glusterd 2>/dev/null
        # the brick and self-heal processes of our volumes end with them
        rm -f "$dir/glusterd.started"
    fi
    mountpoint -q "$dir/smallfs" 2>/dev/null && umount -l "$dir/smallfs"
    rm -rf "$dir"
}

skip() {
    echo "L3_GLUSTER_SKIP=\"$*\""
    down >/dev/null 2>&1
    exit 0
}

up() {
    [ "$(id -u)" = 0 ] || skip "needs root"
    [ -c /dev/fuse ] || skip "/dev/fuse is missing"
    command -v glusterd >/dev/null && command -v gluster >/dev/null || skip "glusterfs-server is not installed"
    rm -rf "$dir"
    mkdir -p "$dir/brick" "$dir/a" "$dir/b" "$dir/c" "$dir/small" "$dir/smallfs" || skip "cannot make $dir"
    if ! timeout 20 gluster --mode=script volume list >/dev/null 2>&1; then
        glusterd -p "$dir/glusterd.pid" >/dev/null 2>&1 || skip "glusterd does not start"
        touch "$dir/glusterd.started"
        for _ in $(seq 100); do g volume list >/dev/null 2>&1 && break; sleep 0.2; done
    fi
    g volume create "$vol" 127.0.0.2:"$dir/brick" force >/dev/null 2>&1 || skip "gluster volume create failed"
    g volume start "$vol" >/dev/null 2>&1 || skip "gluster volume start failed"
    for m in a b c; do
        local ok=0
        for _ in $(seq 20); do
            mount -t glusterfs 127.0.0.2:/"$vol" "$dir/$m" 2>/dev/null && { ok=1; break; }
            sleep 0.5
        done
        [ $ok = 1 ] || skip "mount -t glusterfs failed"
    done
    # the small volume: a brick on a 48 MiB ext4 image
    truncate -s 48M "$dir/small.img" && mkfs.ext4 -q -F "$dir/small.img" >/dev/null 2>&1 &&
        mount -o loop "$dir/small.img" "$dir/smallfs" 2>/dev/null && mkdir -p "$dir/smallfs/brick" &&
        g volume create "$vol-small" 127.0.0.2:"$dir/smallfs/brick" force >/dev/null 2>&1 &&
        g volume start "$vol-small" >/dev/null 2>&1 &&
        mount -t glusterfs 127.0.0.2:/"$vol-small" "$dir/small" 2>/dev/null ||
        skip "the small volume (loop device) could not be set up"
    echo "L3_GLUSTER=$dir"
    echo "L3_GLUSTER_SMALL=$dir/small"
}

case $cmd in
up) up ;;
down) down ;;
*) echo "usage: gluster.sh up|down DIR" >&2; exit 2 ;;
esac
