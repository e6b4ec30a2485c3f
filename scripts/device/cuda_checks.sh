#!/usr/bin/env bash
# One device run of the CUDA backend's checks (GPU machine: CMake, g++, CUDA, no Debian -dev
# packages). Headers: carry .dev/device-headers.tar.xz (scripts/device/pack_headers.sh) or
# .dev/sysroot (scripts/device/make_sysroot.sh), else copies found on the machine. Builds the
# engine core, the runtime, m3-engine and cuda_test without gRPC (unless BUILD holds them; no
# doctest header: m3-engine alone), then runs: the demo model through the CLI on both devices
# (scripts/device/demo_parity.py), the GPU tests
# (kernels against their CPU twins, the goldens, the demo model against the CPU engine, the
# serving runtime on the CUDA runner), the no-GPU path (CUDA_VISIBLE_DEVICES empty: exit 77),
# compute-sanitizer memcheck (model-level and runtime tests) and racecheck (decoder and vision
# kernels). Each step has a time limit so the whole run ends inside the device's 10 minutes.
# Logs under $OUT. Usage (repo root): bash scripts/device/cuda_checks.sh [BUILD_DIR] [TESTS]
#   TESTS: a doctest -tc filter for the cuda_test run (default: every case)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/cuda_checks_out}"
BUILD="${1:-/tmp/b-cuda}"
TESTS="${2:-*}"
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
step() { echo "== $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
  echo "g++: $(g++ --version | head -1); nvcc: $(nvcc --version | tail -1); cmake: $(cmake --version | head -1)"
  # Header-only dependencies: carried, else whatever copies the machine's images hold.
  include="$PWD/.dev/sysroot/include"
  if [ -f .dev/device-headers.tar.xz ]; then
    include=/tmp/m3-device-headers
    mkdir -p "$include" && tar -C "$include" -xJf .dev/device-headers.tar.xz
  elif [ ! -d "$include" ]; then
    include=""
    for h in nlohmann/json.hpp doctest/doctest.h; do
      f="$(timeout 60 find /usr /opt /root -path "*/$h" 2>/dev/null | head -1)"
      echo "found $h: ${f:-none}"
      [ -n "$f" ] && include="$include;${f%/$h}"
    done
    include="${include#;}"
  fi
  tests=ON
  [ -n "$(find ${include//;/ } -path '*/doctest/doctest.h' 2>/dev/null | head -1)" ] || tests=OFF
  if [ ! -x "$BUILD/bin/cuda_test" ] && [ ! -x "$BUILD/bin/m3-engine" ]; then
    step "configure + build (engine core, runtime, CUDA kernels, m3-engine; cuda_test: tests $tests)"
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    # -Werror is CI's (Debian's GCC); the device's compiler may know other warnings.
    cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DM3_GATEWAY=OFF -DM3_WERROR=OFF \
      -DM3_TESTS=$tests -DM3_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_INCLUDE_PATH="$include" \
      >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
    targets=(m3-engine)
    [ "$tests" = ON ] && targets+=(cuda_test)
    timeout 300 cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}" >"$OUT/build.log" 2>&1 ||
      { grep -E "error|Error" "$OUT/build.log" | head -40; tail -5 "$OUT/build.log"; exit 1; }
  fi
  step "demo model through the m3-engine CLI: CPU f32 against CUDA bf16"
  timeout 150 python3 scripts/device/demo_parity.py "$BUILD/bin/m3-engine" . /tmp/demo-parity 2>&1 |
    tee "$OUT/demo_parity.log"
  echo "demo_parity rc=${PIPESTATUS[0]}"
  [ -x "$BUILD/bin/cuda_test" ] || { step "no cuda_test (no doctest header): done"; exit 0; }
  step "cuda_test -tc='$TESTS'"
  timeout 240 "$BUILD/bin/cuda_test" -d -tc="$TESTS" 2>&1 | tee "$OUT/cuda_test.log"
  echo "cuda_test rc=${PIPESTATUS[0]}"
  step "no visible GPU: expect a clear message and exit 77"
  CUDA_VISIBLE_DEVICES= "$BUILD/bin/cuda_test"
  echo "no-GPU rc=$?"
  if command -v compute-sanitizer >/dev/null; then
    # memcheck over the model-level and runtime tests; racecheck over the batched test (every
    # decoder kernel on m3-tiny) and the vision kernel test, cuBLAS's own kernels (nvjet*)
    # excluded.
    step "compute-sanitizer memcheck (m3-tiny goldens, demo model, batched, serving runtime)"
    timeout "${MEMCHECK_S:-150}" compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$BUILD/bin/cuda_test" -tc='m3-tiny*,demo model*,GPU*' >"$OUT/memcheck.log" 2>&1
    echo "memcheck rc=$? (9: sanitizer errors, 124: time limit)"
    grep -E "ERROR SUMMARY|========= (Invalid|Error)|test cases|assertions" "$OUT/memcheck.log" | head -8
    step "compute-sanitizer racecheck (batched decoder steps, vision attention)"
    timeout "${RACECHECK_S:-120}" compute-sanitizer --tool racecheck --error-exitcode 9 \
      --kernel-name-exclude kns=nvjet "$BUILD/bin/cuda_test" \
      -tc='GPU: two*,vision segment*' >"$OUT/racecheck.log" 2>&1
    echo "racecheck rc=$? (9: sanitizer errors, 124: time limit)"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|========= (Error|Race)|test cases|rror" \
      "$OUT/racecheck.log" | head -8
  else
    echo "compute-sanitizer: not found"
  fi
  step "done"
} 2>&1 | tee "$OUT/cuda_checks.log"
