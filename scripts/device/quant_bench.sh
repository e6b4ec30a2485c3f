#!/usr/bin/env bash
# One device call of m3-bench-quant-gemm (tests/bench/cuda_quant_gemm_bench.cu): the MXFP8 /
# NVFP4 weight kernels against cuBLAS bf16 with the HBM bandwidth and bf16 dense peak measured in
# the same run (issue 36's kernel goals). The binary is built on the dev machine
# (-DM3_CUDA=ON -DM3_USE_BLAS=OFF) and carried.
# Usage (repo root): bash scripts/device/quant_bench.sh BIN_DIR [--quick]
#   The table goes to stdout and $OUT/quant_bench.log (OUT default /tmp/quant_bench_out);
#   env BENCH_S bounds the run (default 500 s).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: quant_bench.sh BIN_DIR [--quick]" >&2; exit 2; }
BIN="$(realpath "$1")"
shift
[ -x "$BIN/m3-bench-quant-gemm" ] || { echo "quant_bench.sh: no m3-bench-quant-gemm in $BIN" >&2; exit 2; }
OUT="${OUT:-/tmp/quant_bench_out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
timeout "${BENCH_S:-500}" "$BIN/m3-bench-quant-gemm" "$@" 2>&1 | tee "$OUT/quant_bench.log"
rc=${PIPESTATUS[0]}
echo "m3-bench-quant-gemm rc=$rc"
exit "$rc"
