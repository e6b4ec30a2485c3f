#!/usr/bin/env bash
# One device call of a GPU kernel benchmark and its PyTorch side-by-side on the same GPU
# (docs/PERF.md): the m3 benchmark first, then its PyTorch twin in tests/bench/torch/, which
# prints both side by side where it reads the m3 figures.
#   attention: m3-bench-cuda-attention, then sdpa_bench.py (PyTorch SDPA flash)
#   msa:       m3-bench-cuda-msa (indexer, block-sparse and dense attention), then
#              msa_dense_bench.py (PyTorch SDPA flash, with the ratios to the byte roofline)
#   layer:     m3-bench-cuda-layer (one MSA + MoE decoder layer), then layer_bench.py (the same
#              layer in PyTorch bf16, with the ratios)
# Binaries are built on the dev machine (-DM3_CUDA=ON -DM3_USE_BLAS=OFF: they need only glibc,
# libstdc++ and the machine's CUDA libraries) and carried.
# Usage (repo root): bash scripts/device/kernel_bench.sh attention|msa|layer BIN_DIR [bench args...]
#   BIN_DIR holds the m3 benchmark; the args go to it (attention: --quick goes to both; layer:
#   all but --graphs and --breakdown go to both, e.g. --batches 1,8 --context 32768). Results
#   and logs under $OUT (default /tmp/kernel_bench_out); env BENCH_S, TORCH_S bound the two steps.
set -uo pipefail
usage="usage: kernel_bench.sh attention|msa|layer BIN_DIR [bench args...]"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
KIND="$1" BIN="$(realpath "$2")"
shift 2
cd "$(dirname "$0")/../.."
case "$KIND" in
  attention) BENCH=m3-bench-cuda-attention ;;
  msa) BENCH=m3-bench-cuda-msa ;;
  layer) BENCH=m3-bench-cuda-layer ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
[ -x "$BIN/$BENCH" ] || { echo "kernel_bench.sh: no $BENCH in $BIN" >&2; exit 2; }
OUT="${OUT:-/tmp/kernel_bench_out}"
TORCH=tests/bench/torch
mkdir -p "$OUT"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
bench() {
  timeout "${BENCH_S:-200}" "$BIN/$1" "${@:2}" 2>&1 | tee "$OUT/bench.log"
  echo "$1 rc=${PIPESTATUS[0]}"
}
torch_side() {
  timeout "${TORCH_S:-150}" python3 "$TORCH/$1" "${@:2}" 2>&1 | tee "$OUT/torch.log"
  echo "$1 rc=${PIPESTATUS[0]}"
}
case "$KIND" in
  attention)
    bench "$BENCH" "$@"
    quick=()
    for a in "$@"; do [ "$a" = --quick ] && quick=(--quick); done
    torch_side sdpa_bench.py "${quick[@]}"
    ;;
  msa)
    bench "$BENCH" "$@" --json "$OUT/m3.json"
    # SDPA's decode data rotates as the bench's does, unless the bench was asked for --warm-l2.
    warm=()
    for a in "$@"; do [ "$a" = --warm-l2 ] && warm=(--warm-l2); done
    torch_side msa_dense_bench.py --json "$OUT/sdpa.json" --m3-json "$OUT/m3.json" "${warm[@]}"
    ;;
  layer)
    bench "$BENCH" "$@" --json "$OUT/m3.json"
    # The shapes and iteration counts go to both; --graphs and --breakdown are the m3 bench's.
    shared=()
    for a in "$@"; do [ "$a" = --graphs ] || [ "$a" = --breakdown ] || shared+=("$a"); done
    torch_side layer_bench.py "${shared[@]}" --json "$OUT/torch.json" --cpp-json "$OUT/m3.json"
    ;;
esac
