#!/usr/bin/env bash
# Device check for batch decoding: builds from the tree with only a C compiler
# and nvcc (no meson build, no libpng/libfuse/xxHash dev files needed), then
# runs l3gpu_devcheck on .devcheck/ (prepared by gpu/bench/devcheck_prep.sh
# on a normal machine): GPU vs CPU bit-exactness for every layout/dtype/
# channel format, the CPU output against checksums made on the normal
# machine, broken images in a batch, and timings of batch 1/8/64/256 of
# 2048x1024 photos next to a device memcpy and the CPU decoder. With Python
# headers, numpy and torch present it also checks torch.from_dlpack on CUDA.
#
# Usage: gpu/bench/device_check.sh [--cpu-only]
#   --cpu-only (or no nvcc / no GPU): build without CUDA, run the CPU part.
# Environment: NVCC, CC, L3_GPU_ARCHS (e.g. "90"; default: the GPU's own, else
# "80 90"), OUT (logs are written there too when set).
# Finishes in well under 5 minutes on an H200 machine (build ~1 min).
set -euo pipefail
cd "$(dirname "$0")/../.."
dc=.devcheck
[ -f "$dc/ref.txt" ] && [ -f "$dc/include/xxhash.h" ] || {
    echo "device_check: $dc/ is missing: run gpu/bench/devcheck_prep.sh on a normal machine" >&2; exit 2; }
cpu_only=0
[ "${1:-}" = "--cpu-only" ] && cpu_only=1
CC=${CC:-cc}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "device_check: nvcc not found: CPU part only"; cpu_only=1; }
b=build-devcheck   # git-ignored (/build*/), outside the carried .devcheck/
rm -rf "$b"; mkdir -p "$b"
log=${OUT:-$b}/device_check.log
t0=$(date +%s)

# codec/l3_version.h from meson.build's project() version, as meson generates it
ver=$(sed -n "s/^ *version : '\([0-9.]*\)',.*/\1/p" meson.build | head -1)
IFS=. read -r vmaj vmin vpat <<<"$ver"
mkdir -p "$b/gen"
sed -e "s/@L3_VERSION_MAJOR@/$vmaj/" -e "s/@L3_VERSION_MINOR@/$vmin/" \
    -e "s/@L3_VERSION_PATCH@/$vpat/" -e "s/@L3_VERSION_STRING@/$ver/" \
    codec/l3_version.h.in > "$b/gen/l3_version.h"
cflags=(-O2 -std=c11 -D_GNU_SOURCE -fPIC -pthread -Icodec -I"$b/gen" -Igpu -I"$dc/include" -DXXH_INLINE_ALL)
codec_srcs=()
for f in codec/*.c; do
    case $f in codec/png.c) ;; *) codec_srcs+=("$f") ;; esac   # no libpng here
done
pids=()
for f in "${codec_srcs[@]}"; do
    $CC "${cflags[@]}" -c "$f" -o "$b/codec_$(basename "$f" .c).o" & pids+=($!)
done
$CC "${cflags[@]}" -ffp-contract=off -c gpu/cpu.c -o "$b/cpu.o" & pids+=($!)
if [ $cpu_only = 0 ]; then
    cuda_root=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
    archs=${L3_GPU_ARCHS:-}
    if [ -z "$archs" ] && command -v nvidia-smi >/dev/null; then
        archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
    fi
    archs=${archs:-80 90}
    gencode=()
    for a in $archs; do gencode+=("-gencode=arch=compute_$a,code=sm_$a"); done
    echo "device_check: building for sm_${archs// /, sm_} with $NVCC"
    "$NVCC" -std=c++17 -O3 -lineinfo -Xcompiler -fPIC -Xptxas -v -Icodec -I"$b/gen" -Igpu "${gencode[@]}" \
        -c gpu/l3gpu.cu -o "$b/l3gpu.o" > "$b/ptxas.txt" 2>&1 & pids+=($!)
    $CC "${cflags[@]}" -ffp-contract=off -DL3_HAVE_CUDA=1 -isystem "$cuda_root/include" \
        -c gpu/bench/device_check.c -o "$b/device_check.o" & pids+=($!)
else
    $CC "${cflags[@]}" -ffp-contract=off -c gpu/bench/device_check.c -o "$b/device_check.o" & pids+=($!)
fi
for p in "${pids[@]}"; do wait "$p" || { cat "$b/ptxas.txt" 2>/dev/null; echo "device_check: build failed" >&2; exit 1; }; done
if [ $cpu_only = 0 ]; then
    grep -E "Compiling|registers|spill|stack" "$b/ptxas.txt" | grep -E "l3g_|registers|spill" | head -20 || true
    "$NVCC" -o "$b/l3gpu_devcheck" "$b"/device_check.o "$b"/l3gpu.o "$b"/cpu.o "$b"/codec_*.o -lpthread -lm
else
    $CC -o "$b/l3gpu_devcheck" "$b"/device_check.o "$b"/cpu.o "$b"/codec_*.o -pthread -lm
fi
echo "device_check: built in $(( $(date +%s) - t0 )) s"

args=("$dc")
[ $cpu_only = 1 ] && args+=(--cpu-only)
set +e
"$b/l3gpu_devcheck" "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

# Optional: the Python module on CUDA with torch (needs Python headers + numpy + torch).
if [ $cpu_only = 0 ] && [ $rc = 0 ] && command -v python3 >/dev/null &&
   python3 -c 'import numpy, torch, sysconfig, os; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' 2>/dev/null; then
    pyinc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    npinc=$(python3 -c 'import numpy; print(numpy.get_include())')
    ext=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    mkdir -p "$b/py/l3" "$b/pyext"
    cp python/l3/*.py "$b/py/l3/"
    for f in python/ext/*.c; do
        $CC "${cflags[@]}" -fno-strict-aliasing -DL3_HAVE_CUDA=1 -I"$pyinc" -I"$npinc" -Ipython/ext \
            -c "$f" -o "$b/pyext/$(basename "$f" .c).o"
    done
    "$NVCC" -shared -Xcompiler -fPIC -o "$b/py/l3/_l3$ext" "$b"/pyext/*.o "$b/l3gpu.o" "$b/cpu.o" "$b"/codec_*.o -lpthread -lm
    PYTHONPATH="$b/py" python3 gpu/bench/torch_check.py "$dc" 2>&1 | tee -a "$log" || rc=1
else
    echo "device_check: Python/torch part skipped (needs a GPU build, python3 with Python.h, numpy and torch)" | tee -a "$log"
fi
echo "device_check: total $(( $(date +%s) - t0 )) s, exit $rc"
exit $rc
