#!/usr/bin/env bash
# Fetches real images from Debian packages into a cache outside the repository
# and prepares a PNG corpus for tests and benchmarks.
#
#   scripts/fetch-corpus.sh [DIR]     (default: $L3_CORPUS or /var/cache/l3fs-corpus)
#
# Result (idempotent; a second run downloads nothing):
#   DIR/png/wallpapers/*.png  rendered wallpapers and art (ukui, sway, desktop-base)
#   DIR/png/photos/*.png      photos (mate-backgrounds nature set), converted to 8-bit RGB PNG
#   DIR/png/photos-2048/*.png the same photos cropped to 2:1 and resized to 2048x1024 (Cityscapes size)
#   DIR/png/renders-2048/*.png gnome-backgrounds' rendered art, converted and resized likewise
#   DIR/png/pngsuite/*.png    PngSuite images shipped in Debian's Go source package
#   DIR/png/photos-unseen-2048/*.png  photos the encoder was NOT tuned on: the JPEG photos of
#                             lomiri-wallpapers-16.04/-20.04 and the 2560x1600 JPEG photos of
#                             plasma-workspace-wallpapers, 8-bit RGB, cropped to 2:1, 2048x1024
#   DIR/png/photos-heldout-2048/*.png every third of those (sorted by name), moved aside: data to
#                             report on that nobody looks at while tuning
set -euo pipefail
dir=${1:-${L3_CORPUS:-/var/cache/l3fs-corpus}}
mkdir -p "$dir/debs" "$dir/x" "$dir/png/wallpapers" "$dir/png/photos" "$dir/png/photos-2048" "$dir/png/renders-2048" "$dir/png/pngsuite"
cd "$dir/debs"
pkgs=(ukui-wallpapers sway-backgrounds desktop-base gnome-backgrounds mate-backgrounds golang-1.19-src
      lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 plasma-workspace-wallpapers)
for p in "${pkgs[@]}"; do
  if ! ls "$p"_*.deb >/dev/null 2>&1; then
    apt-get download "$p" >/dev/null 2>&1 || { apt-get update -qq && apt-get download "$p"; }
  fi
  [ -e "$dir/x/.$p" ] || { dpkg -x "$p"_*.deb "$dir/x" && touch "$dir/x/.$p"; }
done

py=/usr/bin/python3
# Photos (JPEG) and GNOME's rendered art (WebP) are converted with PIL:
# full size into the first directory, cropped to 2:1 and resized to 2048x1024 into the second.
convert_set() { # outdir (- for none) outdir-2048 files...
  "$py" -c '
import sys, os
from PIL import Image
out, out2 = sys.argv[1], sys.argv[2]
for f in sys.argv[3:]:
    base = os.path.splitext(os.path.basename(f))[0]
    try:
        im = Image.open(f).convert("RGB")
    except Exception as e:
        print("skip", f, e, file=sys.stderr); continue
    if out != "-":
        im.save(os.path.join(out, base + ".png"))
    w, h = im.size
    if w / h > 2:
        nw = 2 * h; box = ((w - nw) // 2, 0, (w - nw) // 2 + nw, h)
    else:
        nh = w // 2; box = (0, (h - nh) // 2, w, (h - nh) // 2 + nh)
    im.crop(box).resize((2048, 1024), Image.LANCZOS).save(os.path.join(out2, base + ".png"))
' "$@"
}
if [ ! -e "$dir/png/.done" ]; then
  # Wallpapers and art: every PNG in the art packages (by signature, not name).
  # (The packages added later for photos-unseen are left out, so the set stays as it was.)
  find "$dir/x/usr/share" \( -path '*go-1.19*' -o -path '*backgrounds/mate*' -o -path '*/share/wallpapers' \
         -o -name 'warty-final-ubuntu.png' -o -name 'lomiri-default-background.png' \) -prune -o -type f -name '*.png' -print0 |
    while IFS= read -r -d '' f; do
      [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || continue
      [ "$(stat -c %s "$f")" -ge 20000 ] || continue   # skip icons
      n=$(echo "${f#$dir/x/usr/share/}" | tr '/ ' '__')
      cp -n "$f" "$dir/png/wallpapers/$n"
    done
  convert_set "$dir/png/photos" "$dir/png/photos-2048" \
    "$dir"/x/usr/share/backgrounds/mate/nature/*.jpg "$dir"/x/usr/share/backgrounds/mate/abstract/Elephants.jpg
  mkdir -p "$dir/png/renders-full"
  convert_set "$dir/png/renders-full" "$dir/png/renders-2048" "$dir"/x/usr/share/backgrounds/gnome/*.webp
  cp -n "$dir"/x/usr/share/go-1.19/src/image/png/testdata/pngsuite/*.png "$dir/png/pngsuite/" 2>/dev/null || true
  touch "$dir/png/.done"
fi
# Photos the encoder was not tuned on (a later addition: its own marker, so an
# existing cache gains it without redoing the rest). Full-size copies are not kept.
if [ ! -e "$dir/png/.done-unseen" ]; then
  rm -rf "$dir/png/photos-unseen-2048" "$dir/png/photos-heldout-2048" "$dir/tmp-unseen"
  mkdir -p "$dir/png/photos-unseen-2048" "$dir/png/photos-heldout-2048" "$dir/tmp-unseen"
  shopt -s nullglob
  srcs=("$dir"/x/usr/share/backgrounds/*_by_*.jpg "$dir"/x/usr/share/wallpapers/*/contents/images/2560x1600.jpg)
  shopt -u nullglob
  # plasma's photos are all named 2560x1600.jpg: name each after its directory
  mkdir -p "$dir/tmp-unseen/src"
  for f in "${srcs[@]}"; do
    case $f in
    */contents/images/*) n=$(basename "$(dirname "$(dirname "$(dirname "$f")")")").jpg ;;
    *) n=$(basename "$f") ;;
    esac
    ln -sf "$(readlink -f "$f")" "$dir/tmp-unseen/src/$n"
  done
  convert_set - "$dir/png/photos-unseen-2048" "$dir"/tmp-unseen/src/*.jpg
  i=0
  for f in $(ls "$dir/png/photos-unseen-2048" | sort); do
    i=$((i + 1))
    [ $((i % 3)) -eq 0 ] && mv "$dir/png/photos-unseen-2048/$f" "$dir/png/photos-heldout-2048/"
  done
  rm -rf "$dir/tmp-unseen"
  touch "$dir/png/.done-unseen"
fi
for d in wallpapers photos photos-2048 renders-2048 pngsuite photos-unseen-2048 photos-heldout-2048; do
  printf '%-12s %4d files %8s\n' "$d" "$(ls "$dir/png/$d" | wc -l)" "$(du -sh "$dir/png/$d" | cut -f1)"
done
