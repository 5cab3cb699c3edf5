#!/usr/bin/env bash
# scripts/run-fuzz.sh BUILD_DIR SECONDS — runs every libFuzzer harness for a
# bounded time and fails on any finding (crash, sanitizer report, leak,
# timeout, out-of-memory).
#
# BUILD_DIR is a fuzz build: CC=clang meson setup BUILD_DIR -Dfuzz=true ...
# Seeds are made fresh from the repository's sample images (data/) and, when
# present, PngSuite from the corpus cache ($L3_CORPUS or /var/cache/l3fs-corpus);
# corpora grown by earlier runs are kept in BUILD_DIR/fuzz-work/corpus; every
# harness also starts from fuzz/regressions/ (hand-built corrupt inputs).
# Crash inputs land in BUILD_DIR/fuzz-work/artifacts.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
secs=$2
root=$(cd "$(dirname "$0")/.." && pwd)
corpus_cache=${L3_CORPUS:-/var/cache/l3fs-corpus}
work=$build/fuzz-work
for h in fuzz_l3_decode fuzz_l3_simd fuzz_l3_encode fuzz_png make_seeds; do
  [ -x "$build/fuzz/$h" ] || { echo "run-fuzz: $build/fuzz/$h missing (configure with -Dfuzz=true)" >&2; exit 1; }
done
rm -rf "$work/seeds"
mkdir -p "$work/seeds" "$work/corpus/l3" "$work/corpus/png" "$work/artifacts"
sources=("$root/data")
[ -d "$corpus_cache/png/pngsuite" ] && sources+=("$corpus_cache/png/pngsuite")
ASAN_OPTIONS=detect_leaks=0 "$build/fuzz/make_seeds" "$work/seeds/l3" "$work/seeds/png" "${sources[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
run() { # harness corpus-name
  local h=$1 c=$2 log="$work/$1.log" rc=0
  echo "run-fuzz: $h for ${secs}s (seeds: $(ls "$work/seeds/$c" | wc -l), corpus: $(ls "$work/corpus/$c" | wc -l))"
  "$build/fuzz/$h" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=5 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/$h-" \
    "$work/corpus/$c" "$work/seeds/$c" "$root/fuzz/regressions" >"$log" 2>&1 || rc=$?
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    echo "run-fuzz: $h FAILED (exit $rc) after ${execs:-?} runs; log $log:" >&2
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written|#[0-9]+ 0x' "$log" | head -40 >&2 || tail -40 "$log" >&2
    status=1
  else
    echo "run-fuzz: $h ok: ${execs:-?} runs, $(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1) MB peak RSS, corpus now $(ls "$work/corpus/$c" | wc -l) files"
  fi
}
run fuzz_l3_decode l3
run fuzz_l3_simd l3   # SIMD vs reference decoder: same status, same samples
run fuzz_l3_encode png # encoder kernels vs reference: same bytes, lossless
run fuzz_png png
exit $status
