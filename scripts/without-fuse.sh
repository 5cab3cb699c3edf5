#!/bin/sh
# Runs a command on this machine as if it had no /dev/fuse: in a private mount
# namespace whose /dev is a copy of the real one without the fuse device (the
# rest of the machine keeps its /dev). For checking what the tests do where
# FUSE is missing, e.g. which cases skip and why:
#
#   scripts/without-fuse.sh env L3_TEST_STEPS=main scripts/test.sh
#
# Needs root and unshare(1) (util-linux).
set -eu
[ $# -gt 0 ] || { echo "usage: scripts/without-fuse.sh COMMAND [ARGS...]" >&2; exit 2; }
if [ "${L3_WITHOUT_FUSE_INSIDE:-}" != 1 ]; then
  L3_WITHOUT_FUSE_INSIDE=1 exec unshare --mount --propagation private "$0" "$@"
fi
unset L3_WITHOUT_FUSE_INSIDE
old=$(mktemp -d)
mount --bind /dev "$old"
mount -t tmpfs -o mode=755,size=64k tmpfs /dev
for e in "$old"/* "$old"/.[!.]*; do
  [ -e "$e" ] || [ -L "$e" ] || continue
  n=$(basename "$e")
  [ "$n" = fuse ] && continue
  if [ -L "$e" ]; then cp -P "$e" "/dev/$n"
  elif [ -d "$e" ]; then mkdir "/dev/$n" && mount --rbind "$e" "/dev/$n"
  else touch "/dev/$n" && mount --bind "$e" "/dev/$n"; fi
done
umount -l "$old"
rmdir "$old"
[ ! -e /dev/fuse ] || { echo "without-fuse: /dev/fuse still visible" >&2; exit 1; }
exec "$@"
