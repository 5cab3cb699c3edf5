#!/usr/bin/env bash
# Fetches the 35 PngSuite images that Debian ships in golang-1.19-src into
# DIR/png/pngsuite (default DIR: $L3_CORPUS or /var/cache/l3fs-corpus), for
# the codec tests. Only the PngSuite files are extracted from the 18 MB .deb
# (about 5 s). Does nothing when they are already there; reuses a .deb left
# in DIR/debs by scripts/fetch-corpus.sh.
#
#   scripts/fetch-pngsuite.sh [DIR]
set -euo pipefail
dir=${1:-${L3_CORPUS:-/var/cache/l3fs-corpus}}
dest=$dir/png/pngsuite
pkg=golang-1.19-src
inside=./usr/share/go-1.19/src/image/png/testdata/pngsuite
if [ "$(ls "$dest"/*.png 2>/dev/null | wc -l)" -ge 35 ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
deb=$(ls "$dir/debs/${pkg}"_*.deb 2>/dev/null | head -1 || true)
if [ -z "$deb" ]; then
  (cd "$tmp" && { apt-get download "$pkg" >/dev/null 2>&1 ||
                  { apt-get update -qq && apt-get download "$pkg" >/dev/null; }; })
  deb=$(ls "$tmp/${pkg}"_*.deb | head -1)
fi
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards "$inside/*.png"
mkdir -p "$dest"
cp "$tmp/$inside"/*.png "$dest/"
echo "pngsuite: $(ls "$dest"/*.png | wc -l) files in $dest"
