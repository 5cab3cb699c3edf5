#!/usr/bin/env bash
# The one command for a GPU machine: gpu/bench/device_check.sh (no arguments).
#
# Needs only cc, g++/nvcc (CUDA toolkit), and for the Python step python3 with
# Python.h, numpy and torch: no meson build, no libpng/libfuse/xxHash dev
# files, no network. The xxHash header (used header-only) and real photos
# come pre-encoded in .devcheck/ (gpu/bench/devcheck_prep.sh, run on a normal
# machine); without photos, photo-like images are generated.
#
# Steps (each one PASS, FAIL or NOT RUN with the reason, all in one table):
#   build     the codec core (without the PNG side), the CPU batch decoder,
#             gpu/l3gpu.cu with nvcc for this GPU's architecture; registers,
#             spills and stack per kernel from ptxas
#   check     CPU: generated images (every colour model, bit depth, palette,
#             tRNS, edge-tile shape, LZ planes) decode to their samples, photos
#             to their reference pixels, the CPU batch to convert(decode) for
#             every format; GPU: bytes and statuses == CPU for every format x
#             pageable/pinned/device inputs, broken images, two streams
#   sanitizer compute-sanitizer memcheck, racecheck, initcheck on a small batch
#   ncu       one Nsight Compute pass per kernel
#   timing    batch 1, 8, 64, 256 of 2048x1024 RGB: decode and convert kernel
#             times, device-resident, pinned and pageable inputs, next to this
#             run's device-to-device copy bandwidth
#   pybuild   the l3 module built by hand against this build (needs Python.h
#             and numpy), its CPU path checked
#   python    with torch: torch.from_dlpack == CPU path, current device and
#             stream, DLPack/CAI stream semantics, Python-input timing
# Output: everything under $OUT (default build-devcheck/out): the log, ptxas
# report, sanitizer and ncu reports, summary.txt.
# Exit: 0 every step ran and passed; 1 a failure (a mismatch, an error);
# 2 setup problem (.devcheck/ missing); 3 no usable GPU (printed with the
# reason; every CPU step passed); 4 incomplete (a required step could not
# run, e.g. no Python.h or out of time). Never 0 unless everything ran.
# Time: each step is bounded so that the whole run stays under 8 minutes.
# Environment: OUT, NVCC, CC, L3_GPU_ARCHS (e.g. "90"), PYTHON (python3);
# for tests: L3_DEVCHECK_DIR, L3_DEVCHECK_BUILD, L3_DEVCHECK_SECONDS.
set -uo pipefail
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LIMIT=${L3_DEVCHECK_SECONDS:-470}
dc=${L3_DEVCHECK_DIR:-.devcheck}  # test hooks: another prepared folder,
b=${L3_DEVCHECK_BUILD:-build-devcheck}  # another build folder (git-ignored by default)
out=${OUT:-$b/out}
mkdir -p "$b" "$out"
log=$out/device_check.log
: > "$log"
exec 3>&1 > >(tee -a "$log" >&3) 2>&1
teepid=$!

declare -a STEPS
step_field() { local s; for s in "${STEPS[@]}"; do [ "${s%%|*}" = "$1" ] && { IFS='|' read -r _ a b <<<"$s"; [ "$2" = 1 ] && echo "$a" || echo "$b"; return; }; done; }
step_status() { step_field "$1" 1; }
step_detail() { step_field "$1" 2; }
step() { # name status detail
    STEPS+=("$1|$2|$3")
    printf '== %-10s %-8s %s\n' "$1" "$2" "$3"
}
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
budget() { # wanted seconds -> seconds allowed now (0: none left)
    local l; l=$(left); [ "$l" -lt 15 ] && { echo 0; return; }
    [ "$1" -lt "$l" ] && echo "$1" || echo "$l"
}

summary() {
    local rc=$1
    {
        echo
        echo "==== device check summary ($(date -u +%Y-%m-%dT%H:%MZ), $(( $(date +%s) - T0 )) s) ===="
        local s
        for s in "${STEPS[@]}"; do
            IFS='|' read -r n st d <<<"$s"
            printf '%-10s %-8s %s\n' "$n" "$st" "$d"
        done
        [ -s "$out/registers.txt" ] && { echo; cat "$out/registers.txt"; }
        [ -s "$out/table.txt" ] && { echo; cat "$out/table.txt"; }
        [ -s "$out/python-timing.txt" ] && { echo; cat "$out/python-timing.txt"; }
        echo
        case $rc in
        0) echo "device check: every step ran and passed (exit 0)" ;;
        1) echo "device check: FAILURES (exit 1)" ;;
        3) echo "device check: no usable GPU: ${NOGPU_WHY}; every CPU step passed (exit 3)" ;;
        4) echo "device check: INCOMPLETE: a required step did not run (exit 4)" ;;
        *) echo "device check: exit $rc" ;;
        esac
        echo "output: $out"
    } | tee "$out/summary.txt"
    exec >&- 2>&-   # let tee write the rest before the exit status is seen
    wait "$teepid" 2>/dev/null
    exit "$rc"
}

# ---------------- setup ----------------
xxh=$dc/include/xxhash.h
if [ ! -f "$xxh" ]; then
    echo "device_check: $xxh is missing: run gpu/bench/devcheck_prep.sh on a normal machine" \
         "(it prepares .devcheck/, at most 60 MiB) and carry .devcheck/ with the tree"
    step setup FAIL "no $xxh"
    summary 2
fi
CC=${CC:-cc}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PY=${PYTHON:-python3}
have_nvcc=0
[ -x "$NVCC" ] && have_nvcc=1
NOGPU_WHY=""
ver=$(sed -n "s/^ *version *: *'\([0-9.]*\)'.*/\1/p" meson.build | head -1)
IFS=. read -r vmaj vmin vpat <<<"$ver"
mkdir -p "$b/gen"
sed -e "s/@L3_VERSION_MAJOR@/$vmaj/" -e "s/@L3_VERSION_MINOR@/$vmin/" \
    -e "s/@L3_VERSION_PATCH@/$vpat/" -e "s/@L3_VERSION_STRING@/$ver/" \
    codec/l3_version.h.in > "$b/gen/l3_version.h"
step setup PASS "tree version $ver; $(nproc) CPUs; nvcc: $([ $have_nvcc = 1 ] && echo "$NVCC, $("$NVCC" --version | tail -1)" || echo none)"

# ---------------- build ----------------
tb=$(date +%s)
cflags=(-O2 -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -fPIC -pthread -Wall
        -Icodec -Igpu -I"$b/gen" -I"$dc/include" -DXXH_INLINE_ALL -ffp-contract=off)
srcs=()
for f in codec/*.c; do
    case $f in codec/png.c|codec/png_write.c|codec/transcode.c) ;; *) srcs+=("$f") ;; esac  # the PNG side needs libpng
done
srcs+=(gpu/*.c gpu/bench/devcheck_inputs.c gpu/bench/devcheck_cpu.c)  # the CPU batch decoder
objs=()
build_ok=1
pids=()
cuda_def=()
if [ $have_nvcc = 1 ]; then
    # the CUDA headers as nvcc uses them (nvcc may be a wrapper elsewhere on PATH)
    if cuda_dirs=$(gpu/cuda_paths.sh "$NVCC"); then
        cuda_inc=${cuda_dirs%%$'\n'*}
        cuda_def=(-DL3_HAVE_CUDA=1 -isystem "$cuda_inc")
        echo "device_check: $NVCC; CUDA headers in $cuda_inc"
    else
        step build FAIL "nvcc at $NVCC, but no CUDA runtime headers and library (gpu/cuda_paths.sh)"
        summary 1
    fi
fi
for f in "${srcs[@]}" gpu/bench/device_check.c; do
    o=$b/$(echo "$f" | tr / _).o
    objs+=("$o")
    extra=()
    case $f in gpu/bench/device_check.c) extra=("${cuda_def[@]}") ;; esac
    $CC "${cflags[@]}" "${extra[@]}" -c "$f" -o "$o" 2>"$o.err" & pids+=($!)
done
if [ $have_nvcc = 1 ]; then
    o=$b/devcheck_gpu.o
    objs+=("$o")
    $CC "${cflags[@]}" "${cuda_def[@]}" -c gpu/bench/devcheck_gpu.c -o "$o" 2>"$o.err" & pids+=($!)
    archs=${L3_GPU_ARCHS:-}
    if [ -z "$archs" ] && command -v nvidia-smi >/dev/null 2>&1; then
        archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
    fi
    archs=${archs:-80 90}
    gencode=()
    for a in $archs; do gencode+=("-gencode=arch=compute_$a,code=sm_$a"); done
    echo "device_check: nvcc for sm_${archs// /, sm_}"
    "$NVCC" -std=c++17 -O3 -lineinfo -Xcompiler -fPIC,-Wall,-Wextra -Werror all-warnings \
        -Xptxas -v -Icodec -Igpu -I"$b/gen" "${gencode[@]}" \
        -c gpu/l3gpu.cu -o "$b/l3gpu.o" > "$out/ptxas.txt" 2>&1 & pids+=($!)
fi
for p in "${pids[@]}"; do wait "$p" || build_ok=0; done
cat "$b"/*.err 2>/dev/null | head -40
if [ $build_ok = 1 ]; then
    if [ $have_nvcc = 1 ]; then
        "$NVCC" -o "$b/l3gpu_devcheck" "${objs[@]}" "$b/l3gpu.o" -lpthread -lm || build_ok=0
    else
        $CC -o "$b/l3gpu_devcheck" "${objs[@]}" -pthread -lm || build_ok=0
    fi
fi
if [ $build_ok = 0 ]; then
    cat "$out/ptxas.txt" 2>/dev/null | tail -30
    step build FAIL "compile or link failed (log above)"
    summary 1
fi
if [ $have_nvcc = 1 ]; then
    # ptxas -v: "Compiling entry function '<mangled>' for 'sm_90'", then
    # "N bytes stack frame, N bytes spill stores, N bytes spill loads" and
    # "Used N registers, ..."
    awk '
        /Compiling entry function/ { k = ""
                                     if ($0 ~ /l3g_decode_planes/) k = "l3g_decode_planes"
                                     else if ($0 ~ /l3g_convertILi/) {  # l3g_convert<layout,dtype,channels>
                                         t = $0; sub(/.*l3g_convertILi/, "", t); split(t, p, "ELi")
                                         sub(/E.*/, "", p[3]); k = "l3g_convert<" p[1] "," p[2] "," p[3] ">" }
                                     else if ($0 ~ /l3g_convert/) k = "l3g_convert"
                                     a = $0; sub(/.*for .sm_/, "sm_", a); sub(/.$/, "", a) }
        /stack frame/ { st = $0; sub(/^[^0-9]*/, "", st) }
        /Used [0-9]+ registers/ { r = $0; sub(/^.*Used /, "", r); sub(/ registers.*/, "", r)
                                  if (k != "") printf "%-22s %-7s %4s registers, %s\n", k, a, r, st
                                  k = "" }
' "$out/ptxas.txt" | sort -u > "$out/registers.txt"
    sed -i '1i kernel                 arch    ptxas -v' "$out/registers.txt"
    nk=$(grep -c '^l3g_' "$out/registers.txt" || true)
    [ "$nk" -ge 2 ] || { step build FAIL "ptxas report has $nk kernel entries"; summary 1; }
fi
step build PASS "$(( $(date +%s) - tb )) s$([ $have_nvcc = 1 ] && echo ", CUDA for sm_${archs// /,sm_}" || echo ", CPU only (no nvcc)")"
bin=$b/l3gpu_devcheck

# ---------------- pybuild: the l3 module against this build (CPU side) ----------------
py_reason=""
if ! command -v "$PY" >/dev/null 2>&1; then
    py_reason="no $PY"
elif ! "$PY" -c 'import numpy' 2>/dev/null; then
    py_reason="$PY cannot import numpy"
else
    pyinc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    [ -f "$pyinc/Python.h" ] || py_reason="no Python.h under $pyinc"
fi
if [ -n "$py_reason" ]; then
    step pybuild "NOT RUN" "$py_reason"
else
    npinc=$("$PY" -c 'import numpy; print(numpy.get_include())')
    ext=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    rm -rf "$b/py" && mkdir -p "$b/py/l3"
    cp python/l3/*.py "$b/py/l3/"
    pobjs=()
    pok=1
    pydef=()
    [ $have_nvcc = 1 ] && pydef=(-DL3_HAVE_CUDA=1)
    for f in python/ext/*.c; do
        o=$b/py_$(basename "$f" .c).o
        pobjs+=("$o")
        $CC "${cflags[@]}" -fno-strict-aliasing -DL3PY_NO_PNG "${pydef[@]}" -Ipython/ext \
            -I"$pyinc" -I"$npinc" \
            -c "$f" -o "$o" || pok=0
    done
    core=()
    for o in "${objs[@]}"; do
        case $o in *device_check*|*devcheck_*) ;; *) core+=("$o") ;; esac
    done
    if [ $pok = 1 ] && [ $have_nvcc = 1 ]; then
        "$NVCC" -shared -Xcompiler -fPIC -o "$b/py/l3/_l3$ext" "${pobjs[@]}" "${core[@]}" \
            "$b/l3gpu.o" -lpthread -lm || pok=0
    elif [ $pok = 1 ]; then
        $CC -shared -o "$b/py/l3/_l3$ext" "${pobjs[@]}" "${core[@]}" -pthread -lm || pok=0
    fi
    # the CPU path of the hand-built module: a generated image round trip
    [ $pok = 1 ] && PYTHONPATH="$b/py" "$PY" -c '
import numpy as np, l3
a = (np.arange(45 * 70 * 3, dtype=np.uint32) * 7919 % 251).astype(np.uint8).reshape(45, 70, 3)
e = l3.encode(a, tile=32)
assert np.array_equal(l3.decode(e), a)
b = np.from_dlpack(l3.decode_batch([e, e], device="cpu", layout="NHWC"))
assert b.shape == (2, 45, 70, 3) and np.array_equal(b[1], a)
print("l3 module: CPU round trip ok; built_with_cuda", l3.built_with_cuda, "cuda_available", l3.cuda_available())
' || pok=0
    if [ $pok = 1 ]; then
        step pybuild PASS "$($PY -c 'import sys; print("Python %d.%d" % sys.version_info[:2])'), CPU round trip"
    else
        step pybuild FAIL "building or importing the l3 module failed"
    fi
fi

# ---------------- check (CPU, then GPU) ----------------
t=$(budget 200)
if [ "$t" = 0 ]; then step check "NOT RUN" "out of time"; summary 4; fi
timeout "$t" "$bin" check "$dc" > "$out/check.txt" 2>&1
rc=$?
cat "$out/check.txt"
sed -n '/^==== l3 batch decode/,$p' "$out/check.txt" | tail -n +2 > "$out/table.txt"
cpu_st=$(grep -q '^STEP cpu-checks: PASS' "$out/check.txt" && echo PASS || echo FAIL)
step cpu "$cpu_st" "generated + photo inputs on the CPU decoder and CPU batch decoder"
gpu_present=0
case $rc in
0) gpu_present=1; step gpu PASS "GPU == CPU, every format x pageable/pinned/device" ;;
3) NOGPU_WHY=$(sed -n 's/^no usable GPU: //p' "$out/check.txt" | head -1)
   [ $have_nvcc = 0 ] && NOGPU_WHY="no nvcc, so no CUDA build (${NOGPU_WHY})"
   step gpu "NOT RUN" "no usable GPU: $NOGPU_WHY" ;;
124) step gpu FAIL "timed out after $t s" ;;
*) grep -q '^GPU: ' "$out/check.txt" && gpu_present=1
   step gpu FAIL "exit $rc (see FAIL lines in check.txt)" ;;
esac
if [ "$cpu_st" != PASS ] || [ "$(step_status pybuild)" = FAIL ]; then summary 1; fi
if [ $gpu_present = 0 ]; then
    [ $rc = 3 ] && summary 3
    summary 1
fi

# ---------------- compute-sanitizer, ncu ----------------
cs=$(command -v compute-sanitizer || ls "$(dirname "$NVCC")/compute-sanitizer" 2>/dev/null || true)
for tool in memcheck racecheck initcheck; do
    if [ -z "$cs" ]; then step "$tool" "NOT RUN" "compute-sanitizer not installed"; continue; fi
    t=$(budget 90)
    [ "$t" = 0 ] && { step "$tool" "NOT RUN" "out of time"; continue; }
    extra=()
    [ $tool = memcheck ] && extra=(--leak-check full)
    timeout "$t" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 9 "$bin" small "$dc" \
        > "$out/sanitizer-$tool.txt" 2>&1
    r=$?
    summ=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY" "$out/sanitizer-$tool.txt" | tr '\n' ' ')
    if [ $r = 0 ] && grep -q '^STEP gpu-small: PASS' "$out/sanitizer-$tool.txt"; then
        step "$tool" PASS "${summ:-no errors}"
    else
        step "$tool" FAIL "exit $r ${summ}"
    fi
done
ncu=$(command -v ncu || ls "$(dirname "$NVCC")/ncu" 2>/dev/null || true)
for k in l3g_decode_planes l3g_convert; do
    if [ -z "$ncu" ]; then step "ncu:${k#l3g_}" "NOT RUN" "ncu not installed"; continue; fi
    t=$(budget 90)
    [ "$t" = 0 ] && { step "ncu:${k#l3g_}" "NOT RUN" "out of time"; continue; }
    timeout "$t" "$ncu" --kernel-name "regex:$k" --launch-count 1 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section Occupancy "$bin" small "$dc" \
        > "$out/ncu-$k.txt" 2>&1
    r=$?
    if grep -q "ERR_NVGPUCTRPERM" "$out/ncu-$k.txt"; then
        step "ncu:${k#l3g_}" "NOT RUN" "no permission for GPU performance counters"
    elif [ $r = 0 ] && grep -q "$k" "$out/ncu-$k.txt"; then
        step "ncu:${k#l3g_}" PASS "$(grep -E 'Memory Throughput|Duration' "$out/ncu-$k.txt" | head -2 | tr -s ' ' | tr '\n' ';')"
    else
        step "ncu:${k#l3g_}" FAIL "exit $r"
    fi
done

# ---------------- timing ----------------
t=$(budget 150)
if [ "$t" = 0 ]; then
    step timing "NOT RUN" "out of time"
else
    timeout "$t" "$bin" timing "$dc" > "$out/timing.txt" 2>&1
    r=$?
    cat "$out/timing.txt"
    sed -n '/^==== l3 batch decode/,$p' "$out/timing.txt" | tail -n +2 >> "$out/table.txt"
    if [ $r = 0 ] && grep -q '^STEP gpu-timing: PASS' "$out/timing.txt"; then
        step timing PASS "$(grep -c '^TIMING ' "$out/timing.txt") rows"
    else
        step timing FAIL "exit $r"
    fi
fi

# ---------------- python (GPU part; built in the pybuild step) ----------------
if [ "$(step_status pybuild)" != PASS ]; then
    step python "NOT RUN" "no Python module ($(step_detail pybuild))"
elif ! "$PY" -c 'import torch' 2>/dev/null; then
    step python "NOT RUN" "$PY cannot import torch"
else
    t=$(budget 150)
    if [ "$t" = 0 ]; then
        step python "NOT RUN" "out of time"
    else
        PYTHONPATH="$b/py" timeout "$t" "$PY" gpu/bench/torch_check.py "$dc" \
            "$out/python-timing.txt" > "$out/python.txt" 2>&1
        r=$?
        cat "$out/python.txt"
        if [ $r = 0 ] && grep -q '^STEP python: PASS' "$out/python.txt"; then
            step python PASS "torch.from_dlpack == CPU, stream semantics, timing"
        else
            step python FAIL "exit $r"
        fi
    fi
fi

# ---------------- result ----------------
final=0
for s in "${STEPS[@]}"; do
    IFS='|' read -r n st d <<<"$s"
    case $st in
    FAIL) final=1 ;;
    "NOT RUN")
        case $n in memcheck|racecheck|initcheck|ncu:*) case $d in *"not installed"*|*permission*) continue ;; esac ;; esac
        [ $final = 0 ] && final=4 ;;
    esac
done
summary $final
