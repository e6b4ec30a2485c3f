#!/usr/bin/env bash
# Tensor / expert parallelism on a machine with 2+ GPUs (nvidia-h100-x2 / nvidia-h200-x2; the
# 4-rank case needs nvidia-h100-x4 / nvidia-h200-x4, and says so on fewer GPUs): makes random
# checkpoints at the real text widths (m3-make-random-checkpoint, 4 and 2 layers, on /dev/shm),
# runs cuda_parallel_test (tests/parallel: tp 2, ep 2, tp 2 + ep 2 against one GPU on m3-tiny,
# m3-alt, the demo model and those checkpoints; tp 4 / ep 4 / both on m3-tiny and the
# checkpoints; all with the default --all-reduce auto, i.e. the peer all-reduce on NVLink, and
# the peer all-reduce against NCCL alone on the same runner) and `m3-engine serve --tensor-parallel 2` up to its listening line, from the
# carried bundle (env: CASES, TEST_S): build here with
#   cmake -S . -B B -G Ninja -DCMAKE_BUILD_TYPE=Release -DM3_CUDA=ON -DM3_USE_BLAS=OFF
#   cmake --build B --target m3-engine cuda_test cuda_serve_test cuda_parallel_test \
#     m3-make-random-checkpoint m3-bench-serve
#   EXTRA_BINS="cuda_parallel_test m3-make-random-checkpoint m3-bench-serve" \
#     scripts/device/pack_gpu_bundle.sh B
# and carry build-device/gpu-bundle.tar.xz (env GPU_BUNDLE: another path). NCCL comes from the
# CUDA toolkit or PyTorch's nvidia-nccl wheel (libnccl.so.2 is loaded at run time); NVLink
# multicast stays off (NCCL_NVLS_ENABLE=0).
# Logs under $OUT. Usage (repo root): bash scripts/device/parallel_checks.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/parallel_checks_out}"
GPU_BUNDLE="${GPU_BUNDLE:-build-device/gpu-bundle.tar.xz}"
mkdir -p "$OUT"
# The directory holding libnccl.so.2 (PyTorch's nvidia-nccl wheel, or a CUDA / system install),
# for LD_LIBRARY_PATH: the engine loads NCCL at run time.
. scripts/device/nccl_dir.sh
export NCCL_NVLS_ENABLE=0
{
  nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>&1
  mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf "$GPU_BUNDLE"
  BUILD="$(cat /tmp/gpu-bundle/BUILD_DIR)"
  mkdir -p "$BUILD" && cp -r /tmp/gpu-bundle/bin "$BUILD/"
  [ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
  (cd tests/data && find . -name '*.tar.xz' | while read -r a; do
    mkdir -p "$BUILD/test-data/$(dirname "$a")" && tar -C "$BUILD/test-data/$(dirname "$a")" -xJf "$a"
  done)
  nccl="$(nccl_dir)"
  echo "NCCL from: $nccl"
  export LD_LIBRARY_PATH="/tmp/gpu-bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${nccl}:${LD_LIBRARY_PATH:-}"
  # Random checkpoints at the real text widths for the real-width cases (4 layers; 2 layers for
  # the float32 CPU reference), on /dev/shm; made once per machine.
  for layers in 4 2; do
    ckpt=/dev/shm/m3-random; [ "$layers" = 4 ] || ckpt="$ckpt-${layers}l"
    if [ ! -f "$ckpt/config.json" ]; then
      echo "== random $layers-layer checkpoint at the real text widths into $ckpt ($(date +%T))"
      timeout 200 "$BUILD/bin/m3-make-random-checkpoint" --out "$ckpt" --layers "$layers" | tail -1
    fi
  done
  export M3_PARALLEL_CHECKPOINT=/dev/shm/m3-random M3_PARALLEL_CHECKPOINT_2L=/dev/shm/m3-random-2l
  # One process per group of cases, each with its own time limit (CASES: other groups, e.g.
  # CASES="-tc=4 GPUs*" on a 4-GPU machine).
  groups=("-tce=*real widths*" "-tc=*4-layer*" "-tc=*2-layer*" "-tc=2 GPUs: peer all-reduce*"
    "-tc=4 GPUs*")
  [ -n "${CASES:-}" ] && groups=("$CASES")
  for cases in "${groups[@]}"; do
    echo "== cuda_parallel_test $cases ($(date +%T))"
    timeout "${TEST_S:-300}" "$BUILD/bin/cuda_parallel_test" "$cases" 2>&1 | grep -vE "^[IW] [0-9:.]+ "
    echo "cuda_parallel_test $cases exit ${PIPESTATUS[0]}"
  done
  echo "== m3-engine serve --device cuda --tensor-parallel 2 ($(date +%T))"
  timeout 120 "$BUILD/bin/m3-engine" serve --model tests/data/demo-model/model --port 0 \
    --device cuda --tensor-parallel 2 --expert-parallel 2 >"$OUT/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 120); do grep -q "listening on port" "$OUT/serve.log" && break; sleep 1; done
  grep -E "listening|error" "$OUT/serve.log"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
} 2>&1 | tee "$OUT/parallel_checks.log"
