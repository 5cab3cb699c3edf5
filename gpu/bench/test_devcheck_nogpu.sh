#!/usr/bin/env bash
# devcheck-no-gpu (meson test, CI): the GPU machine's one command on a
# machine without a GPU. gpu/bench/devcheck_prep.sh then device_check.sh
# must build from the tree (nvcc for one architecture when present), pass
# every CPU step and exit 3 saying "no usable GPU" -- never 0 (it must not
# fail open) and never a build failure (R1: it used to fail to link).
# Args: BUILD_ROOT (the meson build, for the prep step). Uses a temporary
# .devcheck (no photos: the CPU steps on the generated inputs).
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export L3_DEVCHECK_DIR=$tmp/dc L3_DEVCHECK_BUILD=$tmp/build OUT=$tmp/out
L3_BUILD=$1 L3_CORPUS=$tmp/no-corpus "$src/gpu/bench/devcheck_prep.sh" || { echo "FAIL: prep"; exit 1; }
# nvcc through a wrapper script in another directory (as /usr/local/bin/nvcc
# can be): the check must find the CUDA headers as nvcc does
nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
if [ -n "$nvcc" ]; then
    mkdir -p "$tmp/wrap"
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$(readlink -f "$nvcc")" > "$tmp/wrap/nvcc"
    chmod +x "$tmp/wrap/nvcc"
    export NVCC=$tmp/wrap/nvcc
fi
PYTHON=/usr/bin/python3 L3_GPU_ARCHS=${L3_GPU_ARCHS:-90} "$src/gpu/bench/device_check.sh" > "$tmp/run.txt" 2>&1
rc=$?
cat "$tmp/run.txt"
fail=0
check() { grep -qE -- "$1" "$tmp/out/summary.txt" || { echo "FAIL: summary lacks: $1"; fail=1; }; }
[ "$rc" = 3 ] || { echo "FAIL: exit $rc, want 3"; fail=1; }
check '^build +PASS'
check '^cpu +PASS'
check '^pybuild +PASS'   # Debian's python3 with numpy and Python.h (scripts/deps.sh)
check '^gpu +NOT RUN +no usable GPU'
check 'no usable GPU: .*every CPU step passed \(exit 3\)'
if [ -n "$nvcc" ]; then
    check '^l3g_decode_planes +sm_[0-9]+ +[0-9]+ registers'
    check '^l3g_convert(<[0-9]+,[0-9]+,[0-9]+>)? +sm_[0-9]+ +[0-9]+ registers'
fi
grep -q "every step ran and passed" "$tmp/out/summary.txt" && { echo "FAIL: claims success without a GPU"; fail=1; }
[ $fail = 0 ] && echo "devcheck-no-gpu: exit 3, CPU steps passed, kernels built" || exit 1
