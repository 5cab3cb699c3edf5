#!/usr/bin/env bash
# test_installed.sh — the Python package as a user installs it from the tree,
# without network, with the commands of docs/INSTALL.md, run from the root
# of a copy of the tree:
#   /usr/bin/python3 -m pip install --no-build-isolation --no-deps --target DIR .
#   python3 -m venv --system-site-packages V; V/bin/pip install --no-build-isolation .
# (each with --no-index, so that a dependency pip wanted to download fails
# instead of waiting on the network, and --config-settings builddir=: both share one
# meson-python build, the CUDA library makes it minutes). They run in a copy
# of the tree's files (git ls-files, as a fresh checkout has them: what
# meson-python or a build left in the source tree cannot change the result;
# without git, a copy without build*/), and in each, from a
# directory outside the tree: `import l3` must come from the installation,
# then the Python test suites run against it
# (--target: tests/gpu/test_l3py.py, tests/python/test_api.py,
# tests/python/test_pillow.py, test_out.py, test_torch.py; venv: test_api.py,
# test_pillow.py, test_out.py).
# Reports in TAP (meson protocol 'tap'): the build and the installs are a case
# each, then every case of every suite under each installation, named
# "INSTALL: SUITE: CASE", skips with their reasons - scripts/test-totals.py
# counts them like the build tree's runs.
# Environment (meson test): L3_SOURCE_ROOT; L3_CORPUS for test_l3py.py.
set -euo pipefail
src=${L3_SOURCE_ROOT:?}
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "TAP version 13"
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
note() { sed 's/^/# /'; }
fail() { n=$((n + 1)); echo "not ok $n - $*"; echo "1..$n"; exit 1; }

only_l3() { # DIR: what pip put there is the l3 package and its dist-info only
    (cd "$1" && find . -mindepth 1 -maxdepth 1 | sed 's|^\./||' | sort) >"$work/top"
    note <"$work/top"
    ! grep -vqE '^l3$|^l3-[0-9.]+\.dist-info$' "$work/top"
}
tree=$work/tree
mkdir "$tree"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z -co --exclude-standard | xargs -0 cp -P --parents -t "$tree")
else
    (cd "$src" && tar -c --exclude='./build*' --exclude=./.mesonpy-native-file.ini .) | tar -x -C "$tree"
fi || fail "copy of the source tree"
ok "the tree to install from: $(find "$tree" -type f | wc -l) files"
cfg=(--config-settings "builddir=$work/mesonpy-build")  # pip 23.0: no -C
t0=$(date +%s)
(cd "$tree" && "$py" -m pip install --no-build-isolation --no-deps --no-index "${cfg[@]}" \
    --target "$work/target" .) >"$work/pip1.log" 2>&1 ||
    { tail -40 "$work/pip1.log" | note; fail "pip install --no-build-isolation --no-deps --target DIR ."; }
ok "pip install --no-build-isolation --no-deps --target DIR . (built and installed in $(( $(date +%s) - t0 )) s)"
only_l3 "$work/target" || fail "pip --target put more than the l3 package into DIR"
ok "DIR holds the l3 package and its dist-info only"
find "$work/target/l3" -type f | sed "s|^$work/target/||" | sort | note

"$py" -m venv --system-site-packages "$work/venv"
t0=$(date +%s)
(cd "$tree" && "$work/venv/bin/pip" install --no-build-isolation --no-index "${cfg[@]}" .) \
    >"$work/pip2.log" 2>&1 || { tail -40 "$work/pip2.log" | note; fail "pip install into a venv"; }
ok "venv --system-site-packages: pip install --no-build-isolation . ($(( $(date +%s) - t0 )) s, the build reused)"

run() { # name python PYTHONPATH where-the-package-must-be suites...
    local name=$1 python=$2 pp=$3 want=$4
    shift 4
    mkdir -p "$work/cwd"
    local got
    got=$(cd "$work/cwd" && PYTHONPATH=$pp "$python" -c 'import l3; print(l3.__file__)') ||
        fail "$name: import l3 failed"
    case $got in "$want"/l3/__init__.py) ;; *) fail "$name: import l3 gave $got, not $want" ;; esac
    ok "$name: import l3 from outside the tree -> $got"
    for t in "$@"; do
        # the suite's own TAP (tests/common/tap.py), each case renumbered and
        # named after the installation; its comments and stderr as comments
        local rc=0 cases
        (cd "$work/cwd" && PYTHONPATH=$pp "$python" "$src/$t" >"$work/out" 2>"$work/err") || rc=$?
        cases=$(grep -cE '^(not )?ok ' "$work/out" || true)
        while IFS= read -r line; do
            case $line in
            "ok "*|"not ok "*)
                n=$((n + 1))
                echo "$line" | sed -E "s/^(not ok|ok) [0-9]+ (- )?/\1 $n - $name: ${t##*/}: /" ;;
            "#"*) echo "$line" ;;
            esac
        done <"$work/out"
        if [ "$rc" -ne 0 ] || [ "$cases" -eq 0 ]; then
            tail -30 "$work/err" | note
            fail "$name: $t exit status $rc, $cases cases reported"
        fi
    done
}
run "pip --target" "$py" "$work/target" "$work/target" \
    tests/gpu/test_l3py.py tests/python/test_api.py tests/python/test_pillow.py \
    tests/python/test_out.py tests/python/test_torch.py
# the same wheel in a venv: the quick suites (the long one ran above)
venv_site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
run "venv" "$work/venv/bin/python" "" "$venv_site" tests/python/test_api.py tests/python/test_pillow.py \
    tests/python/test_out.py
echo "1..$n"
