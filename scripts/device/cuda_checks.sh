#!/usr/bin/env bash
# One device run of the CUDA backend's checks (GPU machine: CMake, g++, CUDA, no Debian -dev
# packages; carry .dev/sysroot from scripts/device/make_sysroot.sh for the nlohmann-json and
# doctest headers). Builds the engine core and cuda_test without gRPC (unless BUILD already holds
# a cuda_test built elsewhere), then runs: the GPU tests (kernels against their CPU twins, the
# goldens and chat-e2e on --device cuda), the no-GPU path (CUDA_VISIBLE_DEVICES empty: exit 77),
# and compute-sanitizer memcheck (model-level tests) and racecheck (decoder and vision kernels).
# Logs under $OUT.
# Usage (repo root): bash scripts/device/cuda_checks.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/cuda_checks_out}"
BUILD="${1:-/tmp/b-cuda}"
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
step() { echo "== $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
  if [ ! -x "$BUILD/bin/cuda_test" ]; then
    step "configure + build (engine core, CUDA kernels, cuda_test)"
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DM3_GATEWAY=OFF -DM3_WERROR=ON \
      -DM3_CUDA=ON -DCMAKE_INCLUDE_PATH="$PWD/.dev/sysroot/include" >"$OUT/configure.log" 2>&1 ||
      { tail -30 "$OUT/configure.log"; exit 1; }
    cmake --build "$BUILD" -j "$(nproc)" --target cuda_test >"$OUT/build.log" 2>&1 ||
      { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
  fi
  step "cuda_test"
  "$BUILD/bin/cuda_test" -d 2>&1 | tee "$OUT/cuda_test.log"
  echo "cuda_test rc=${PIPESTATUS[0]}"
  step "no visible GPU: expect a clear message and exit 77"
  CUDA_VISIBLE_DEVICES= "$BUILD/bin/cuda_test"
  echo "no-GPU rc=$?"
  if command -v compute-sanitizer >/dev/null; then
    # memcheck over the model-level tests; racecheck over the batched test (every decoder kernel
    # on m3-tiny) and the vision kernel test, cuBLAS's own kernels (nvjet*) excluded.
    step "compute-sanitizer memcheck (m3-tiny goldens, chat-e2e, batched)"
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/bin/cuda_test" \
      -tc='m3-tiny*,chat-e2e*,GPU:*' >"$OUT/memcheck.log" 2>&1
    echo "memcheck rc=$? (9: sanitizer errors)"
    grep -E "ERROR SUMMARY|========= (Invalid|Error)|test cases" "$OUT/memcheck.log" | head -8
    step "compute-sanitizer racecheck (batched decoder steps, vision attention)"
    timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
      --kernel-name-exclude kns=nvjet "$BUILD/bin/cuda_test" \
      -tc='GPU:*,vision segment*' >"$OUT/racecheck.log" 2>&1
    echo "racecheck rc=$? (9: sanitizer errors)"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|========= (Error|Race)|test cases|rror" \
      "$OUT/racecheck.log" | head -8
  fi
  step "done"
} 2>&1 | tee "$OUT/cuda_checks.log"
