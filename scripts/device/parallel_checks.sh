#!/usr/bin/env bash
# Tensor / expert parallelism on a machine with 2+ GPUs (nvidia-h200-x2): runs cuda_parallel_test
# (tests/parallel: tp 2, ep 2, tp 2 + ep 2 against one GPU on m3-tiny, m3-alt and the demo
# model) and `m3-engine serve --tensor-parallel 2` up to its listening line, from the carried
# bundle: build here with
#   cmake -S . -B B -G Ninja -DCMAKE_BUILD_TYPE=Release -DM3_CUDA=ON -DM3_USE_BLAS=OFF
#   cmake --build B --target m3-engine cuda_test cuda_serve_test cuda_parallel_test
#   EXTRA_BINS=cuda_parallel_test scripts/device/pack_gpu_bundle.sh B
# and carry .dev/gpu-bundle.tar.xz. NCCL comes from the CUDA toolkit or PyTorch's nvidia-nccl
# wheel (libnccl.so.2 is loaded at run time); NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
# Logs under $OUT. Usage (repo root): bash scripts/device/parallel_checks.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/parallel_checks_out}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
{
  nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>&1
  mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf .dev/gpu-bundle.tar.xz
  BUILD="$(cat /tmp/gpu-bundle/BUILD_DIR)"
  mkdir -p "$BUILD" && cp -r /tmp/gpu-bundle/bin "$BUILD/"
  [ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
  (cd tests/data && find . -name '*.tar.xz' | while read -r a; do
    mkdir -p "$BUILD/test-data/$(dirname "$a")" && tar -C "$BUILD/test-data/$(dirname "$a")" -xJf "$a"
  done)
  nccl="$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null)"
  [ -f "$nccl/libnccl.so.2" ] || nccl="$(dirname "$(find /usr/local /usr/lib /opt -name libnccl.so.2 2>/dev/null | head -1)")"
  echo "NCCL from: $nccl"
  export LD_LIBRARY_PATH="/tmp/gpu-bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${nccl}:${LD_LIBRARY_PATH:-}"
  echo "== cuda_parallel_test ($(date +%T))"
  timeout 600 "$BUILD/bin/cuda_parallel_test"
  echo "cuda_parallel_test exit $?"
  echo "== m3-engine serve --device cuda --tensor-parallel 2 ($(date +%T))"
  timeout 120 "$BUILD/bin/m3-engine" serve --model tests/data/demo-model/model --port 0 \
    --device cuda --tensor-parallel 2 --expert-parallel 2 >"$OUT/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 120); do grep -q "listening on port" "$OUT/serve.log" && break; sleep 1; done
  grep -E "listening|error" "$OUT/serve.log"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
} 2>&1 | tee "$OUT/parallel_checks.log"
