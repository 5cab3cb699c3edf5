#!/usr/bin/env bash
# vectors.sh — computes the known-answer vectors of tests/cache/test_vectors.c
# from docs/CACHE.md ("Keys", "Source index") with xxhsum (Debian package
# xxhash), without the cache's code: the parameter block, the key input and
# the index records are laid out here byte by byte. Not run by the tests
# (their vectors are constants); run it to check or extend them.
#   tests/cache/vectors.sh [SOURCE_ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
le() { # value bytes: little-endian bytes as \x escapes (two's complement)
  local v=$1 n=$2 out="" i
  [ "$v" -lt 0 ] && v=$(( v + (1 << 32) ))
  for ((i = 0; i < n; i++)); do out+=$(printf '\\x%02x' $(( (v >> (8 * i)) & 255 ))); done
  printf '%s' "$out"
}
hexle() { # 16 hex digits of a u64 -> its little-endian bytes as \x escapes
  local h=$1 out="" i
  for ((i = 14; i >= 0; i -= 2)); do out+="\\x${h:i:2}"; done
  printf '%s' "$out"
}
hexbytes() { local h=$1 out="" i; for ((i = 0; i < ${#h}; i += 2)); do out+="\\x${h:i:2}"; done; printf '%s' "$out"; }
xxh128() { xxhsum -H2 "$1" | cut -d' ' -f1; }
xxh64() { xxhsum -H3 "$1" | sed 's/.* = //'; }
pblock() { # file fv tw th effort size: the 32-byte parameter block
  printf 'l3cache1%b%b%b%b%b' "$(le "$2" 4)" "$(le "$3" 4)" "$(le "$4" 4)" "$(le "$5" 4)" \
    "$(le "$6" 8)" > "$1"
}
key() { # source fv tw th effort: key of the source file
  local n; n=$(stat -c %s "$1")
  pblock "$tmp/p" "$2" "$3" "$4" "$5" "$n"
  cat "$1" "$tmp/p" > "$tmp/kin"
  xxh128 "$tmp/kin"
}
printf 'L3 cache key vector' > "$tmp/s1"
: > "$tmp/s0"
cp "$root/tests/golden/rgb8.png" "$tmp/s2"
echo "key s0 (empty) fv 1 64x64 e0:    $(key "$tmp/s0" 1 64 64 0)"
echo "key s1 fv 1 64x64 e0:            $(key "$tmp/s1" 1 64 64 0)"
echo "key s1 fv 1 32x16 e2:            $(key "$tmp/s1" 1 32 16 2)"
echo "key s1 fv 1 64x64 e-1:           $(key "$tmp/s1" 1 64 64 -1)"
echo "key rgb8.png fv 1 64x64 e0:      $(key "$tmp/s2" 1 64 64 0)"
pblock "$tmp/p0" 1 64 64 0 0
pid=$(xxh64 "$tmp/p0")
echo "params_id fv 1 64x64 e0:         $pid"
# entry record: dev 0x0102030405060708, ino 4242, size 898, mtime 1700000000123456789,
# ctime -5, key = key s1 (fv 1 64x64 e0), encoded size 2072, params id above
k1=$(key "$tmp/s1" 1 64 64 0)
printf 'L3CI\x01\x01%b%b%b%b%b%b%b%b%b' "$(le 88 2)" "$(hexle 0102030405060708)" "$(le 4242 8)" \
  "$(le 898 8)" "$(hexle "$(printf %016x 1700000000123456789)")" "$(hexle fffffffffffffffb)" "$(hexbytes "$k1")" \
  "$(le 2072 8)" "$(hexle "$pid")" > "$tmp/e"
printf '%b' "$(hexle "$(xxh64 "$tmp/e")")" >> "$tmp/e"
echo "entry record:   $(od -An -tx1 -v "$tmp/e" | tr -d ' \n')"
# statistics record: instance 0x1122334455667788, counters 1..11 in their order
printf 'L3CI\x01\x02%b%b' "$(le 112 2)" "$(hexle 1122334455667788)" > "$tmp/s"
for i in 1 2 3 4 5 6 7 8 9 10 11; do printf '%b' "$(le $((i * 1000 + i)) 8)" >> "$tmp/s"; done
printf '%b' "$(hexle "$(xxh64 "$tmp/s")")" >> "$tmp/s"
echo "stats record:   $(od -An -tx1 -v "$tmp/s" | tr -d ' \n')"
# version 2 (written since the birth time joined the identity): the entry
# above with birth time 1600000000987654321 after ctime (96 bytes); the
# statistics record with 14 counters 1..14 (136 bytes)
printf 'L3CI\x02\x01%b%b%b%b%b%b%b%b%b%b' "$(le 96 2)" "$(hexle 0102030405060708)" "$(le 4242 8)" \
  "$(le 898 8)" "$(hexle "$(printf %016x 1700000000123456789)")" "$(hexle fffffffffffffffb)" \
  "$(hexle "$(printf %016x 1600000000987654321)")" "$(hexbytes "$k1")" \
  "$(le 2072 8)" "$(hexle "$pid")" > "$tmp/e2"
printf '%b' "$(hexle "$(xxh64 "$tmp/e2")")" >> "$tmp/e2"
echo "entry record v2: $(od -An -tx1 -v "$tmp/e2" | tr -d ' \n')"
printf 'L3CI\x02\x02%b%b' "$(le 136 2)" "$(hexle 1122334455667788)" > "$tmp/s2"
for i in $(seq 14); do printf '%b' "$(le $((i * 1000 + i)) 8)" >> "$tmp/s2"; done
printf '%b' "$(hexle "$(xxh64 "$tmp/s2")")" >> "$tmp/s2"
echo "stats record v2: $(od -An -tx1 -v "$tmp/s2" | tr -d ' \n')"
