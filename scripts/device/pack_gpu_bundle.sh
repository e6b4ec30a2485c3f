#!/usr/bin/env bash
# Packs GPU test binaries built HERE (full build with gRPC, no BLAS, so nothing beyond gRPC's
# libraries needs carrying) with the shared libraries they link that the GPU machine lacks into
# build-device/gpu-bundle.tar.xz (git-ignored; env GPU_BUNDLE: another path), for
# scripts/device/cuda_checks.sh: m3-engine (serve
# included), cuda_test, cuda_serve_test and m3-make-random-checkpoint (cuda_test runs it), stripped, and lib/ (gRPC, protobuf, abseil, re2,
# c-ares, ...). Left out: glibc, libstdc++, libgcc_s, zlib, OpenSSL and the CUDA libraries,
# which the machine has. The binaries keep their build directory's absolute test paths
# (M3_TEST_DATA under /work/main, M3_BIN_DIR under BUILD), which the device script recreates.
# Usage: scripts/device/pack_gpu_bundle.sh BUILD_DIR
#   BUILD_DIR configured with -DM3_CUDA=ON -DM3_USE_BLAS=OFF and built with
#   --target m3-engine cuda_test cuda_serve_test
#   env EXTRA_BINS: more programs of BUILD/bin to pack (e.g. "m3-bench-serve")
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "$1" && pwd)"
STAGE="$(mktemp -d)"
mkdir -p "$STAGE/bin" "$STAGE/lib"
echo "$BUILD" >"$STAGE/BUILD_DIR"
for b in m3-engine cuda_test cuda_serve_test m3-make-random-checkpoint ${EXTRA_BINS:-}; do
  strip -o "$STAGE/bin/$b" "$BUILD/bin/$b"
done
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libz\.|libssl\.|libcrypto\.|libcublas|libcudart)'
for b in "$STAGE"/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  cp -L "$path" "$STAGE/lib/$name"
done
strip --strip-unneeded "$STAGE"/lib/* 2>/dev/null || true
GPU_BUNDLE="${GPU_BUNDLE:-$ROOT/build-device/gpu-bundle.tar.xz}"
mkdir -p "$(dirname "$GPU_BUNDLE")"
tar -C "$STAGE" -cJf "$GPU_BUNDLE" BUILD_DIR bin lib
rm -rf "$STAGE"
ls -l "$GPU_BUNDLE"
