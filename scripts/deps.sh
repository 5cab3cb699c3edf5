#!/usr/bin/env bash
# Installs the Debian packages l3fs needs to build and test, only when missing
# (a second run does no apt work). Run as root on Debian 12.
set -euo pipefail
pkgs=(
  build-essential pkg-config meson ninja-build   # g++ too: the C++17 consumer of tests/install
  libpng-dev libxxhash-dev libfuse3-dev fuse3 libcriterion-dev
  nettle-dev                        # SHA-256 of decoded pixels in the golden-file tests
  python3 python3-dev python3-numpy python3-pil
  python3-torch                     # PyTorch loader example and its test (CPU)
  python3-torchvision               # the Pillow plugin under an unchanged ImageFolder (tests/python)
  python3-mesonpy python3-pip python3-venv  # pip install . of the Python package (tests/python/test_installed.sh)
  clang libclang-rt-dev            # fuzzers (libFuzzer) and sanitizer runtimes
  rsync gnuplot-nox                 # filesystem tests; benchmark chart
  prometheus                        # promtool check metrics on a live mount (tests/fs/test_ops.sh)
  help2man groff-base               # man pages l3(1), l3fs(8) from --help; groff checks them
  glusterfs-server glusterfs-client # a real distributed filesystem for the shared-cache tests
  e2fsprogs                         # mkfs.ext4, filefrag: cache objects rotted under ext4 (bit-rot test)
)
missing=()
for p in "${pkgs[@]}" ${L3_EXTRA_PKGS:-}; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "deps: all packages present"
fi
