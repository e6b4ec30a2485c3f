#!/usr/bin/env bash
# One device run (GPU machine, no Debian -dev packages): builds the engine core, kernels and their
# tests with only CMake + g++ (+ CUDA when present) and the carried headers in build-device/sysroot
# (scripts/device/make_sysroot.sh; env SYSROOT: another path), runs them, then the tokenizer
# benchmark against the `tokenizers` library and the reference image processor timing. Results
# under $OUT. Usage (repo root): bash scripts/device/gpu_checks.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/gpu_checks_out}"
export SYSROOT="${SYSROOT:-$PWD/build-device/sysroot}"
mkdir -p "$OUT"
{
  echo "== engine core build (no gateway, no BLAS package)"
  cmake -S . -B /tmp/b-engine -DCMAKE_BUILD_TYPE=Release -DM3_GATEWAY=OFF -DM3_WERROR=ON \
    -DCMAKE_INCLUDE_PATH="$SYSROOT/include" &&
    cmake --build /tmp/b-engine -j 16 &&
    (cd /tmp/b-engine && ctest --output-on-failure)
  echo "engine rc=$?"
} 2>&1 | tee "$OUT/engine_build.log" | tail -25
bash scripts/device/bench_tokenizer.sh 2>&1 | tail -40
python3 tests/bench/torch/hf_image_processor_bench.py "$OUT/hf_image_processor.json" 2>&1 | tail -30
