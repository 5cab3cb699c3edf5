#!/usr/bin/env bash
# test_install.sh LIB — what a user gets from `meson install`, checked in a
# DESTDIR tree: LIB is l3 or l3gpu.
#   - the shared library with its soname (libLIB.so.1 -> libLIB.so.1.x.y,
#     libLIB.so -> .so.1), the static library, LIB.pc, the headers;
#   - the shared library exports exactly the functions its header marks
#     L3_API / L3GPU_API;
#   - every installed header compiles alone as C++17 and C11 with
#     -Wall -Wextra -Werror -Wpedantic;
#   - a C++17 consumer built with `pkg-config --cflags --libs LIB` (and one
#     linked with the static library) decodes the sample images, made .l3 by
#     the installed `l3` CLI, bit for bit (tests/install/consumer*.cpp);
#   - l3: the Python package is installed where /usr/bin/python3 looks, and
#     imports from the DESTDIR tree outside the source tree.
# fstab: the mount helper and man pages as installed; then, in a private mount
# namespace where the DESTDIR tree is bind-mounted over /usr/local and /sbin
# (the installed system, simulated), an fstab line of type fuse.l3fs and a
# `mount -t l3fs` mount through mount(8), read back and unmounted.
# Exit 77 (skip) for l3gpu when the build has no CUDA library, for fstab
# without root, /dev/fuse or unshare.
# Environment (meson test): L3_SOURCE_ROOT, L3_BUILD_ROOT, MESON (the meson command).
set -euo pipefail
lib=${1:?usage: test_install.sh l3|l3gpu|fstab}
src=${L3_SOURCE_ROOT:?}
build=${L3_BUILD_ROOT:?}
meson=${MESON:-meson}
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

opt() { # the value of a meson option of the build
    "$meson" introspect "$build" --buildoptions |
        "$py" -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}
prefix=$(opt prefix)
libdir=$(opt libdir); case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
incdir=$(opt includedir); case $incdir in /*) ;; *) incdir=$prefix/$incdir ;; esac
bindir=$(opt bindir); case $bindir in /*) ;; *) bindir=$prefix/$bindir ;; esac
version=$("$meson" introspect "$build" --projectinfo | "$py" -c 'import json, sys; print(json.load(sys.stdin)["version"])')
major=${version%%.*}

dest=$work/dest
"$meson" install -C "$build" --no-rebuild --quiet --destdir "$dest" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "meson install"; }
L=$dest$libdir
I=$dest$incdir

if [ "$lib" = fstab ]; then
    [ "$(id -u)" = 0 ] && [ -e /dev/fuse ] && command -v unshare >/dev/null ||
        { echo "SKIP: needs root, /dev/fuse and unshare (mount namespaces)"; exit 77; }
    helper_dir=$(opt mount_helper_dir)
    H=$dest$helper_dir
    [ -x "$H/mount.fuse.l3fs" ] || fail "$helper_dir/mount.fuse.l3fs not installed"
    [ "$(readlink "$H/mount.l3fs")" = mount.fuse.l3fs ] || fail "$helper_dir/mount.l3fs is not a link"
    grep -q "^l3fs=\${L3FS_MOUNT_HELPER_BIN:-$bindir/l3fs}\$" "$H/mount.fuse.l3fs" ||
        fail "the helper does not name $bindir/l3fs"
    mandir=$(opt mandir); case $mandir in /*) ;; *) mandir=$prefix/$mandir ;; esac
    for page in man1/l3.1 man8/l3fs.8; do
        f=$dest$mandir/$page
        [ -f "$f" ] || fail "$mandir/$page not installed"
        w=$(groff -man -Tutf8 -ww -z "$f" 2>&1) || true
        [ -z "$w" ] || fail "$page: groff warnings: $w"
        echo "man page: $mandir/$page ($(wc -l <"$f") lines, groff -ww clean)"
    done
    grep -q 'keep\\\?-names' "$dest$mandir/man8/l3fs.8" || fail "l3fs.8 lacks --keep-names"
    [ "$helper_dir" = /sbin ] || { echo "helper dir $helper_dir: the namespace run needs /sbin"; exit 0; }
    src=$work/src
    cp -r "$L3_SOURCE_ROOT/data/sample" "$src"
    mkdir "$work/m1" "$work/m2"
    rel=leftImg8bit/train/meadow/meadow_000000_000019_leftImg8bit
    echo "$src  $work/m1  fuse.l3fs  ro,noatime,nofail,cache_dir=$work/cache,exclude=*_labelIds.png,log_file=$work/m1.log  0  0" >"$work/fstab"
    echo "fstab: $(cat "$work/fstab")"
    unshare -m --propagation private bash -euo pipefail -c '
        dest=$1 prefix=$2 work=$3 src=$4 rel=$5
        mount --bind "$dest$prefix" "$prefix"
        mount --bind "$dest/sbin" /sbin
        trap "umount $work/m1 2>/dev/null || true; umount $work/m2 2>/dev/null || true" EXIT
        mount --fstab "$work/fstab" "$work/m1"
        grep -q " $work/m1 .* - fuse.l3fs " /proc/self/mountinfo
        "$prefix/bin/l3" verify "$work/m1/$rel.l3" --against "$src/$rel.png" >/dev/null
        [ -f "$work/m1/gtFine/train/meadow/meadow_000000_000019_gtFine_labelIds.png" ]
        echo "mount --fstab (type fuse.l3fs): mounted by $(readlink -f /sbin/mount.fuse.l3fs), $rel.l3 verifies against its PNG"
        mount -t l3fs -o cache_dir="$work/cache",keep_names,log_file="$work/m2.log" "$src" "$work/m2"
        [ "$(head -c 4 "$work/m2/$rel.png")" = L3IM ]
        echo "mount -t l3fs -o keep_names: $rel.png holds L3 bytes"
        ! mount -t l3fs -o cache_dri=/x "$src" "$work/m2" 2>"$work/err"
        echo "mount -t l3fs with a typo: $(cat "$work/err")"
        umount "$work/m1"; umount "$work/m2"
        ! grep -q " $work/m[12] " /proc/self/mountinfo
        echo "umount: both gone"
    ' _ "$dest" "$prefix" "$work" "$src" "$rel" || fail "fstab mount through the installed helper"
    exit 0
fi
if [ "$lib" = l3gpu ] && [ ! -e "$L/pkgconfig/l3gpu.pc" ]; then
    echo "SKIP: this build has no CUDA library (libl3gpu is built when nvcc and cudart are found)"
    exit 77
fi
header=$([ "$lib" = l3 ] && echo l3.h || echo l3gpu.h)
macro=$([ "$lib" = l3 ] && echo L3_API || echo L3GPU_API)

# ---- files and sonames ----
echo "== installed ($prefix)"
(cd "$dest" && find . -path "*lib$lib.*" -o -name "$lib.pc" -o -name "$header" | sort | sed 's|^\.||')
so=$L/lib$lib.so.$major
[ -f "$L/lib$lib.so.$version" ] || fail "lib$lib.so.$version not installed"
[ "$(readlink "$so")" = "lib$lib.so.$version" ] || fail "lib$lib.so.$major is not a link to lib$lib.so.$version"
[ "$(readlink "$L/lib$lib.so")" = "lib$lib.so.$major" ] || fail "lib$lib.so is not a link to lib$lib.so.$major"
[ -f "$L/lib$lib.a" ] || fail "lib$lib.a not installed"
[ -f "$I/$header" ] && [ -f "$I/l3_version.h" ] || fail "headers not installed"
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
echo "soname: $soname"
[ "$soname" = "lib$lib.so.$major" ] || fail "soname is '$soname'"

# ---- exports: exactly the marked functions, and every function marked ----
unmarked=$(grep -E '^[a-z][a-z0-9_ ]*[ *]l3[a-z0-9_]*\(' "$I/$header" || true)
[ -z "$unmarked" ] || { echo "$unmarked"; fail "function declarations in $header without $macro"; }
grep -o "^$macro [^(]*(" "$I/$header" | sed 's/.*[ *]\([a-z0-9_]*\)($/\1/' | sort >"$work/declared"
nm -D --defined-only "$so" | awk '{print $3}' | sort >"$work/exported"
diff "$work/declared" "$work/exported" >"$work/exports.diff" ||
    { echo "declared ($header, $macro) vs exported (lib$lib.so):"; cat "$work/exports.diff"; fail "exports differ"; }
echo "exports: $(wc -l <"$work/exported") functions, exactly those marked $macro in $header"

# ---- every installed header alone, C++17 and C11 ----
for h in "$I"/l3.h "$I"/l3_version.h "$I"/l3gpu.h; do
    [ -f "$h" ] || continue
    printf "#include <%s>\nint one_header_only;\n" "$(basename "$h")" >"$work/one.cpp"
    g++ -std=c++17 -Wall -Wextra -Werror -Wpedantic -I"$I" -fsyntax-only "$work/one.cpp" ||
        fail "$(basename "$h") does not compile as C++17"
    cp "$work/one.cpp" "$work/one.c"
    cc -std=c11 -Wall -Wextra -Werror -Wpedantic -I"$I" -fsyntax-only "$work/one.c" ||
        fail "$(basename "$h") does not compile as C11"
done
echo "headers: compile alone as C++17 and C11 (-Wall -Wextra -Werror -Wpedantic)"

# ---- pkg-config consumer (shared) and a static link ----
# the .pc files as installed, with prefix= moved into the DESTDIR tree
mkdir "$work/pc"
for pc in "$L"/pkgconfig/*.pc; do
    sed "s|^prefix=$prefix\$|prefix=$dest$prefix|" "$pc" >"$work/pc/$(basename "$pc")"
done
export PKG_CONFIG_PATH=$work/pc
[ "$(pkg-config --modversion "$lib")" = "$version" ] || fail "pkg-config --modversion $lib"
flags=$(pkg-config --cflags --libs "$lib")
echo "pkg-config --cflags --libs $lib: $flags"
consumer=$([ "$lib" = l3 ] && echo consumer || echo consumer_gpu)
g++ -std=c++17 -Wall -Wextra -Werror -o "$work/$consumer" "$src/tests/install/$consumer.cpp" $flags
dyn=$(readelf -d "$work/$consumer") # captured: `readelf | grep -q` can die of SIGPIPE under pipefail
grep -q "NEEDED.*\[lib$lib.so.$major\]" <<<"$dyn" ||
    fail "$consumer does not load lib$lib.so.$major"
# static: the archives themselves, then what `pkg-config --static` adds for them
static_libs="$L/lib$lib.a"
[ "$lib" = l3gpu ] && static_libs="$static_libs $L/libl3.a"
g++ -std=c++17 -Wall -Wextra -Werror -o "$work/$consumer-static" "$src/tests/install/$consumer.cpp" \
    $(pkg-config --cflags "$lib") $static_libs \
    $(pkg-config --static --libs "$lib" | sed 's/-ll3gpu / /; s/-ll3 / /')
dyn=$(readelf -d "$work/$consumer-static")
! grep -q "NEEDED.*libl3" <<<"$dyn" || fail "static link still needs libl3*.so"

# the sample images, encoded by the installed CLI
n=0
for png in $(find "$src/data/sample" -name '*.png' | sort); do
    n=$((n + 1))
    "$dest$bindir/l3" encode "$png" "$work/$n.l3"
    if [ "$lib" = l3 ]; then
        for exe in "$consumer" "$consumer-static"; do
            LD_LIBRARY_PATH=$L "$work/$exe" "$work/$n.l3" "$png" >"$work/out" || fail "$exe on $png"
        done
        echo "$(basename "$png"): $(cat "$work/out")"
    fi
done
[ $n -ge 5 ] || fail "only $n sample PNGs"
if [ "$lib" = l3gpu ]; then
    for exe in "$consumer" "$consumer-static"; do
        LD_LIBRARY_PATH=$L "$work/$exe" "$work"/*.l3 >"$work/out" || fail "$exe"
        echo "$exe: $(cat "$work/out" | tr '\n' ' ')"
    done
    exit 0
fi

# ---- l3: the Python package where Debian's python3 looks ----
pkg=$(cd "$dest" && find . -path '*/l3/__init__.py' | sed 's|^\.||; s|/l3/__init__.py$||')
[ -n "$pkg" ] || fail "the Python package is not installed"
"$py" -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$pkg" ||
    fail "the Python package went to $pkg, which $py does not search"
got=$(cd / && PYTHONPATH=$dest$pkg "$py" -c 'import l3; print(l3.__version__, l3.__file__)')
case $got in "$version $dest$pkg/l3/__init__.py") ;; *) fail "import l3 from the DESTDIR tree gave: $got" ;; esac
echo "python: $pkg (on $py's sys.path), import l3 from / gives $got"
