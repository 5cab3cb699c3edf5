#!/usr/bin/env bash
# cuda-paths (meson test, where nvcc is found): gpu/cuda_paths.sh finds the
# toolkit's headers and runtime library for nvcc however it is reached --
# the toolkit's own nvcc, a symlink to it in another directory, and a
# wrapper script that execs it (the case that once left CI without the CUDA
# library: /usr/local/bin/nvcc on PATH, whose ../include has no CUDA headers)
# -- and names the failure for a "nvcc" that is none. With a toolkit found,
# the build must have built the CUDA library (GPU_BUILT = true).
# Args: NVCC GPU_BUILT
set -uo pipefail
nvcc=$1 gpu_built=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
paths=$src/gpu/cuda_paths.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
real=$(readlink -f "$nvcc")
want=$("$paths" "$nvcc") || { echo "FAIL: cuda_paths.sh $nvcc: exit $?"; exit 1; }
inc=$(sed -n 1p <<<"$want") lib=$(sed -n 2p <<<"$want")
echo "nvcc $nvcc: headers $inc, runtime $lib"
[ -f "$inc/cuda_runtime_api.h" ] || { echo "FAIL: no cuda_runtime_api.h in $inc"; fail=1; }
[ -f "$lib/libcudart_static.a" ] || [ -f "$lib/libcudart.so" ] || { echo "FAIL: no libcudart in $lib"; fail=1; }
mkdir -p "$tmp/link/bin" "$tmp/wrap/bin"
ln -s "$real" "$tmp/link/bin/nvcc"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$real" > "$tmp/wrap/bin/nvcc"
printf '#!/bin/sh\necho "not a compiler" >&2\nexit 1\n' > "$tmp/none"
chmod +x "$tmp/wrap/bin/nvcc" "$tmp/none"
for n in "$real" "$tmp/link/bin/nvcc" "$tmp/wrap/bin/nvcc"; do
    got=$("$paths" "$n") || { echo "FAIL: cuda_paths.sh $n: exit $?"; fail=1; continue; }
    [ "$got" = "$want" ] || { echo "FAIL: $n gives '$got', want '$want'"; fail=1; }
done
if "$paths" "$tmp/none" > "$tmp/out" 2> "$tmp/err"; then
    echo "FAIL: a nvcc that is none gave $(cat "$tmp/out")"; fail=1
fi
grep -q "no CUDA runtime headers and library found" "$tmp/err" || { echo "FAIL: error: $(cat "$tmp/err")"; fail=1; }
[ "$gpu_built" = true ] || { echo "FAIL: a CUDA toolkit is here but the build has no CUDA library"; fail=1; }
[ $fail = 0 ] && echo "cuda-paths: toolkit, symlink and wrapper agree; a non-compiler is named"
exit $fail
