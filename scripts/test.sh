#!/usr/bin/env bash
# The whole test suite: installs what is missing (scripts/deps.sh: apt-get install of the
# Debian packages not yet present), builds, runs every test.
#   1. warnings-as-errors build (CUDA library too when nvcc exists), all tests
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build, all tests (a test that
#      timed out there is rerun once, printed and listed: scripts/test-rerun.py)
#   3. bounded libFuzzer runs of the decoders (clang)
# Exits non-zero when anything fails. Build dirs: build-test, build-asan, build-fuzz.
# Ends with "tests: P passed, F failed, S skipped", counted case by case (each Criterion
# test and Python unittest case: they report in TAP), and every skipped case with its
# reason (scripts/test-totals.py). scripts/without-fuse.sh runs it as if /dev/fuse
# were missing.
# Environment: L3_FUZZ_SECONDS (default 20 per harness), L3_TEST_STEPS (default "main asan fuzz").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

# ---- PngSuite images for the codec tests (35 files from Debian's golang-1.19-src,
# about 5 s; the tests skip PngSuite with a reason when this cannot fetch them) ----
scripts/fetch-pngsuite.sh || echo "== warning: PngSuite not fetched; its codec tests will be skipped" >&2
# ---- end PngSuite ----

# ---- a GlusterFS volume (two daemons sharing a cache on a real distributed
# filesystem: tests/stress, scenario gluster). scripts/gluster.sh prints
# L3_GLUSTER=... or L3_GLUSTER_SKIP="reason"; without one the scenario skips
# with that reason (counted in the totals). ----
gluster_dir=/var/tmp/l3fs-gluster-$$
eval "$(scripts/gluster.sh up "$gluster_dir")"
export L3_GLUSTER=${L3_GLUSTER:-} L3_GLUSTER_SMALL=${L3_GLUSTER_SMALL:-} L3_GLUSTER_SKIP=${L3_GLUSTER_SKIP:-}
[ -z "$L3_GLUSTER_SKIP" ] || echo "== GlusterFS not available: $L3_GLUSTER_SKIP (stress-gluster will skip)"
trap 'scripts/gluster.sh down "$gluster_dir"' EXIT
# ---- end GlusterFS ----

jobs=$(nproc)
steps=${L3_TEST_STEPS:-main asan fuzz}
ran=() # build dirs whose tests ran
totals() { # every test case of those runs, skips with their reasons (scripts/test-totals.py)
  [ ${#ran[@]} -eq 0 ] || /usr/bin/python3 scripts/test-totals.py "${ran[@]}"
}
setup() { # dir, args...
  local d=$1; shift
  if [ -d "$d/meson-private" ]; then meson setup --reconfigure "$d" "$@" >/dev/null
  else meson setup "$d" "$@" >/dev/null; fi
}
for step in $steps; do
  case $step in
  main)
    echo "== build (werror) + tests"
    setup build-test -Dwerror=true -Dbuildtype=debugoptimized
    meson compile -C build-test -j "$jobs"
    ran+=(build-test)
    meson test -C build-test --print-errorlogs --num-processes "$jobs" || { totals; exit 1; }
    ;;
  asan)
    echo "== ASan+UBSan build + tests"
    setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dgpu=disabled -Dbuildtype=debug
    meson compile -C build-asan -j "$jobs"
    ran+=(build-asan)
    # a test that timed out is rerun once, printed and listed (scripts/test-rerun.py)
    scripts/test-rerun.sh build-asan --print-errorlogs --num-processes "$jobs" --timeout-multiplier 4 || { totals; exit 1; }
    ;;
  fuzz)
    echo "== bounded fuzz runs"
    if [ -d build-fuzz/meson-private ]; then meson setup --reconfigure build-fuzz >/dev/null
    else CC=clang meson setup build-fuzz -Dfuzz=true -Dtests=false -Dgpu=disabled -Dfuse=disabled -Dpython=disabled -Dbuildtype=debugoptimized >/dev/null; fi
    meson compile -C build-fuzz -j "$jobs"
    scripts/run-fuzz.sh build-fuzz "${L3_FUZZ_SECONDS:-20}"
    ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
echo "== all test steps passed: $steps"
totals
