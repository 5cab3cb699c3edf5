#!/usr/bin/env bash
# devcheck-fake: gpu/bench/device_check.c built against the CPU-executed CUDA
# runtime (tests/gpu/fakecuda). Its GPU steps run and pass; wrong GPU bytes
# (one flipped bit in a device-to-host copy) and a device fault make it fail
# (it never fails open); without a device it exits 3 saying "no usable GPU".
set -uo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
expect() { # expected-exit pattern description -- command...
    local want=$1 pat=$2 what=$3; shift 4
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" != "$want" ] || ! grep -q -- "$pat" <<<"$out"; then
        echo "FAIL: $what: exit $rc (want $want), pattern '$pat' $(grep -c -- "$pat" <<<"$out") times"
        tail -15 <<<"$out"
        fails=$((fails + 1))
    else
        echo "ok: $what (exit $rc)"
    fi
}
expect 0 "STEP gpu-checks: PASS" "check on the fake GPU" -- "$bin" check "$dir"
expect 0 "STEP gpu-small: PASS" "small batch" -- "$bin" small "$dir"
expect 0 "TIMING pinned 4" "timing table (quick)" -- "$bin" timing "$dir" --quick
expect 1 "GPU != CPU" "a flipped bit in the GPU output" -- env FAKECUDA_CORRUPT_COPY=40 "$bin" check "$dir"
expect 1 "FAIL" "a kernel fault" -- env FAKECUDA_FAULT_KERNEL=7 "$bin" check "$dir"
expect 3 "no usable GPU" "no device" -- env FAKECUDA_DEVICES=0 "$bin" check "$dir"
expect 3 "STEP cpu-checks: PASS" "no driver, CPU steps pass" -- env FAKECUDA_DEVICES=-1 "$bin" check "$dir"
[ $fails = 0 ] && echo "devcheck-fake: all cases as expected" || exit 1
