#!/usr/bin/env bash
# test_installed.sh — the Python package as a user installs it from the tree,
# without network: one wheel built by pip + meson-python
# (pip wheel --no-build-isolation), installed with
#   pip install --no-deps --target DIR       (Debian's numpy stays the system's)
#   a venv --system-site-packages + pip install
# and in each, from a directory outside the tree: `import l3` must come from
# the installation, then the Python test suites run against it
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

t0=$(date +%s)
"$py" -m pip wheel --no-build-isolation --no-deps --no-index -w "$work/wheels" "$src" \
    >"$work/build.log" 2>&1 || { tail -40 "$work/build.log" | note; fail "pip wheel"; }
whl=$(ls "$work"/wheels/l3-*.whl)
ok "pip wheel --no-build-isolation built $(basename "$whl") in $(( $(date +%s) - t0 )) s"
"$py" -m zipfile -l "$whl" | awk 'NR > 1 {print "  " $1}' | note
"$py" -m zipfile -l "$whl" | awk 'NR > 1 {print $1}' | grep -vqE '^l3/|^l3-[0-9.]+\.dist-info/' &&
    fail "the wheel holds files outside the l3 package"
ok "the wheel holds the l3 package and its dist-info only"

"$py" -m pip install --no-deps --no-index --target "$work/target" "$whl" >"$work/pip1.log" 2>&1 ||
    { note <"$work/pip1.log"; fail "pip install --target"; }
ok "pip install --no-deps --target DIR"
"$py" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-index "$whl" >"$work/pip2.log" 2>&1 ||
    { note <"$work/pip2.log"; fail "pip install into a venv"; }
ok "pip install into a venv --system-site-packages"

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
