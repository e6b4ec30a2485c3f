#!/usr/bin/env bash
# One device call of the MSA benchmark (docs/PERF.md, issue 13): m3-bench-cuda-msa (our indexer,
# block-sparse and dense attention) then scripts/device/torch_msa_dense_bench.py (PyTorch SDPA
# flash on the same GPU), which prints both side by side. Binaries are built on the dev machine
# (CUDA, -DM3_USE_BLAS=OFF: they need only glibc, libstdc++ and the machine's CUDA libraries)
# and carried. Usage (repo root): bash scripts/device/msa_bench.sh BIN_DIR [bench args...]
#   BIN_DIR holds m3-bench-cuda-msa; results and logs under $OUT (default /tmp/msa_bench_out).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN="${1:?usage: msa_bench.sh BIN_DIR [m3-bench-cuda-msa args]}"
shift
OUT="${OUT:-/tmp/msa_bench_out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
timeout "${BENCH_S:-200}" "$BIN/m3-bench-cuda-msa" "$@" --json "$OUT/m3.json" 2>&1 | tee "$OUT/bench.log"
echo "m3-bench-cuda-msa rc=${PIPESTATUS[0]}"
# SDPA's decode data rotates as the bench's does, unless the bench was asked for --warm-l2.
warm=()
for a in "$@"; do [ "$a" = --warm-l2 ] && warm=(--warm-l2); done
timeout "${SDPA_S:-150}" python3 scripts/device/torch_msa_dense_bench.py --json "$OUT/sdpa.json" \
  --m3-json "$OUT/m3.json" "${warm[@]}" 2>&1 | tee "$OUT/sdpa.log"
echo "torch_msa_dense_bench rc=${PIPESTATUS[0]}"
