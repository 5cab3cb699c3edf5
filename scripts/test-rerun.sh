#!/usr/bin/env bash
# meson test with one rerun of the tests that timed out (the sanitizer step of
# scripts/test.sh; scripts/test-rerun.py says why and decides which).
#   scripts/test-rerun.sh BUILD_DIR [meson test options...]
# Runs `meson test -C BUILD_DIR OPTIONS`. When that fails and the only tests
# that did not pass timed out (at most two), reruns those once with the same
# options, prints them, and merges the rerun into BUILD_DIR's testlog.json
# (scripts/test-totals.py lists each rerun). Exit status: 0 when the first
# run or the rerun passed, 1 otherwise.
set -uo pipefail
here=$(dirname "$0")
b=$1; shift
meson test -C "$b" "$@" && exit 0
hung=$(/usr/bin/python3 "$here/test-rerun.py" timeouts "$b") || exit 1
echo "== rerun once after a timeout (scripts/test-rerun.py says why):" $hung
cp "$b/meson-logs/testlog.json" "$b/meson-logs/testlog-first.json"
rc=0
# shellcheck disable=SC2086 # one word per test name
meson test -C "$b" "$@" $hung || rc=$?
/usr/bin/python3 "$here/test-rerun.py" merge "$b" || exit 1
[ "$rc" -eq 0 ]
