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
# Environment (meson test): L3_SOURCE_ROOT; L3_CORPUS for test_l3py.py.
set -euo pipefail
src=${L3_SOURCE_ROOT:?}
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

t0=$(date +%s)
"$py" -m pip wheel --no-build-isolation --no-deps --no-index -w "$work/wheels" "$src" \
    >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; fail "pip wheel"; }
whl=$(ls "$work"/wheels/l3-*.whl)
echo "built $(basename "$whl") in $(( $(date +%s) - t0 )) s:"
"$py" -m zipfile -l "$whl" | awk 'NR > 1 {print "  " $1}'
"$py" -m zipfile -l "$whl" | awk 'NR > 1 {print $1}' | grep -vqE '^l3/|^l3-[0-9.]+\.dist-info/' &&
    fail "the wheel holds files outside the l3 package"

"$py" -m pip install --no-deps --no-index --target "$work/target" "$whl" >"$work/pip1.log" 2>&1 ||
    { cat "$work/pip1.log"; fail "pip install --target"; }
"$py" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-index "$whl" >"$work/pip2.log" 2>&1 ||
    { cat "$work/pip2.log"; fail "pip install into a venv"; }

run() { # name python PYTHONPATH where-the-package-must-be suites...
    local name=$1 python=$2 pp=$3 want=$4
    shift 4
    mkdir -p "$work/cwd"
    local got
    got=$(cd "$work/cwd" && PYTHONPATH=$pp "$python" -c 'import l3; print(l3.__file__)')
    case $got in "$want"/l3/__init__.py) ;; *) fail "$name: import l3 gave $got, not $want" ;; esac
    echo "== $name: import l3 -> $got"
    for t in "$@"; do
        (cd "$work/cwd" && PYTHONPATH=$pp "$python" "$src/$t" >"$work/out" 2>&1) || {
            rc=$?; tail -30 "$work/out"; fail "$name: $t exit $rc"; }
        echo "   $t: $(grep -E '^(Ran|OK|pillow:)' "$work/out" | tr '\n' ' ')"
    done
}
run "pip --target" "$py" "$work/target" "$work/target" \
    tests/gpu/test_l3py.py tests/python/test_api.py tests/python/test_pillow.py \
    tests/python/test_out.py tests/python/test_torch.py
# the same wheel in a venv: the quick suites (the long one ran above)
venv_site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
run "venv" "$work/venv/bin/python" "" "$venv_site" tests/python/test_api.py tests/python/test_pillow.py \
    tests/python/test_out.py
