#!/usr/bin/env bash
# Nsight Compute over the block-scaled decode kernels of m3-bench-quant-gemm (issue 36): where
# their time goes (DRAM throughput, issue slots, stall reasons, instruction mix), one ncu pass per
# kernel kind so each profiles the launches it names. Reports go to $OUT/ncu-*.txt.
# Usage (repo root): bash scripts/device/quant_profile.sh BIN_DIR [KIND ...]
#   KIND: gemv-nvfp4 | gemv-mxfp8 | moe-nvfp4 | moe-mxfp8 | moe-bf16 (default: the first four)
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: quant_profile.sh BIN_DIR [KIND ...]" >&2; exit 2; }
BIN="$(realpath "$1")"
shift
OUT="${OUT:-/tmp/quant_profile_out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
NCU="$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
[ -n "$NCU" ] || { echo "quant_profile.sh: no ncu on this machine" >&2; exit 2; }
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(gemv-nvfp4 gemv-mxfp8 moe-nvfp4 moe-mxfp8)
rc=0
for kind in "${kinds[@]}"; do
  case "$kind" in
    gemv-nvfp4) re='GemvKernel<\(m3::kernels::cuda::WeightKind\)2, \((int|bool)\)1,'; count=2 ;;
    gemv-mxfp8) re='GemvKernel<\(m3::kernels::cuda::WeightKind\)1, \((int|bool)\)[01],'; count=2 ;;
    moe-nvfp4) re='(GateUp|Down)(Scaled)?Kernel<\(m3::kernels::cuda::WeightKind\)2'; count=4 ;;
    moe-mxfp8) re='(GateUp|Down)(Scaled)?Kernel<\(m3::kernels::cuda::WeightKind\)1'; count=4 ;;
    moe-bf16) re='(GateUp|Down)Kernel'; count=4 ;;
    *) echo "quant_profile.sh: unknown kind $kind" >&2; exit 2 ;;
  esac
  timeout 240 "$NCU" --clock-control none --kernel-name-base demangled -k "regex:$re" \
    --launch-count "$count" --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section LaunchStats --section InstructionStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --metrics smsp__inst_executed.sum,dram__bytes_read.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_tensor.sum,smsp__inst_executed_pipe_lsu.sum \
    "$BIN/m3-bench-quant-gemm" --quick >"$OUT/ncu-$kind.txt" 2>&1 || rc=$?
  grep -E "Kernel<|Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|inst_executed|dram__bytes|Stall|Warp Cycles Per Issued" "$OUT/ncu-$kind.txt" | head -80
done
exit "$rc"
