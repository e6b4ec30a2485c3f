#!/usr/bin/env bash
# Issue 41 on a machine with 2+ GPUs (nvidia-h200-x2; nvidia-h200-x4 adds TP 4): the peer
# all-reduce's tests, its parity with NCCL on whole models, and the decode-step benchmark.
#   1. cuda_peer_all_reduce_test: the peer kernels (plain and fused with the RMSNorm) against the
#      exact host sum and NCCL, graph replays, abort (about 1 min);
#   2. cuda_parallel_test -tc="*peer all-reduce*": the runner with --all-reduce custom against
#      --all-reduce nccl, greedy tokens and logits (demo model / m3-tiny and the random 4-layer
#      real-width checkpoint; about 2-4 min with the checkpoint's loads);
#   3. m3-bench-tp-step: TP 1, 2 (and 4) x batch 1, 4, 16, 64 on random real-width checkpoints of
#      4 and 8 layers, NCCL and the peer all-reduce side by side, with --breakdown (time in
#      collectives per MoE layer) and --sweep (the all-reduce alone by size: the crossover that
#      sets kPeerAllReduceMaxBytes). Loading dominates: ~4 loads per TP size.
# Checkpoints go to /dev/shm (made once per machine, kept between calls: KEEP=0 removes them).
# The 8-layer checkpoint at 128 experts is ~107 GB, too much beside the 4-layer one in a
# 2-GPU machine's /dev/shm: EXPERTS (default: 128 when /dev/shm has 180 GB free, else 32) sets
# the expert count of both (per-layer decode bytes at batch 1 do not depend on it: each token
# reads its top-4 experts either way; at batch 64 fewer experts mean fewer distinct ones).
# Binaries from the bundle (scripts/device/pack_gpu_bundle.sh), built here with
#   cmake --build B --target m3-engine cuda_test cuda_serve_test cuda_parallel_test \
#     cuda_peer_all_reduce_test m3-make-random-checkpoint m3-bench-tp-step
#   EXTRA_BINS="cuda_parallel_test cuda_peer_all_reduce_test m3-bench-tp-step" \
#     scripts/device/pack_gpu_bundle.sh B
# carried at build-device/gpu-bundle.tar.xz (env GPU_BUNDLE). Env: STEPS="1 2 3" (which parts),
# PARITY_CASES (step 2's test cases, default "*peer all-reduce*": the 2- and the 4-GPU case),
# TP (default "1 2 4"), BATCH (default 1,4,16,64), BENCH_ARGS (more m3-bench-tp-step flags).
# A device command has 10 minutes: on 4 GPUs run the parts in separate calls (the checkpoints
# stay in /dev/shm while the machine is held), e.g. STEPS="1 2" PARITY_CASES="2 GPUs: peer*",
# then STEPS=2 PARITY_CASES="4 GPUs: peer*", then STEPS=3 TP="2 4", then STEPS=3 TP=1.
# Logs and the benchmark's JSON under $OUT. Usage (repo root): bash scripts/device/tp_step_bench.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/tp_step_bench_out}"
GPU_BUNDLE="${GPU_BUNDLE:-build-device/gpu-bundle.tar.xz}"
STEPS="${STEPS:-1 2 3}"
mkdir -p "$OUT"
. scripts/device/nccl_dir.sh
step() { echo "== $* ($(date +%T))"; }
export NCCL_NVLS_ENABLE=0
{
  nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -12
  mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf "$GPU_BUNDLE"
  BUILD="$(cat /tmp/gpu-bundle/BUILD_DIR)"
  mkdir -p "$BUILD" && cp -r /tmp/gpu-bundle/bin "$BUILD/"
  [ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
  (cd tests/data && find . -name '*.tar.xz' | while read -r a; do
    mkdir -p "$BUILD/test-data/$(dirname "$a")" && tar -C "$BUILD/test-data/$(dirname "$a")" -xJf "$a"
  done)
  export LD_LIBRARY_PATH="/tmp/gpu-bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$(nccl_dir):${LD_LIBRARY_PATH:-}"
  shm_gb=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
  experts="${EXPERTS:-}"
  if [ -z "$experts" ]; then
    experts=32
    [ "${shm_gb:-0}" -ge 180 ] && experts=128
  fi
  # The 4-layer checkpoint (1 dense + 3 MoE) for steps 2 and 3, the 8-layer one for step 3.
  make_ckpt() {
    local layers=$1 dir=$2
    if [ ! -f "$dir/config.json" ]; then
      step "random $layers-layer checkpoint at the real widths, $experts experts, into $dir"
      timeout 300 "$BUILD/bin/m3-make-random-checkpoint" --out "$dir" --layers "$layers" \
        --experts "$experts" | tail -1
    fi
  }
  ck4=/dev/shm/m3-tp-4l-e$experts
  ck8=/dev/shm/m3-tp-8l-e$experts
  make_ckpt 4 "$ck4"
  if [[ " $STEPS " == *" 1 "* ]]; then
    step "cuda_peer_all_reduce_test"
    timeout 300 "$BUILD/bin/cuda_peer_all_reduce_test" 2>&1 | grep -vE "^[IW] [0-9:.]+ "
    echo "cuda_peer_all_reduce_test exit ${PIPESTATUS[0]}"
  fi
  if [[ " $STEPS " == *" 2 "* ]]; then
    step "cuda_parallel_test -tc='${PARITY_CASES:-*peer all-reduce*}'"
    M3_PARALLEL_CHECKPOINT="$ck4" timeout 560 "$BUILD/bin/cuda_parallel_test" \
      -tc="${PARITY_CASES:-*peer all-reduce*}" 2>&1 | grep -vE "^[IW] [0-9:.]+ "
    echo "cuda_parallel_test exit ${PIPESTATUS[0]}"
  fi
  if [[ " $STEPS " == *" 3 "* ]]; then
    make_ckpt 8 "$ck8"
    gpus=$(nvidia-smi -L | wc -l)
    tps=""
    for t in ${TP:-1 2 4}; do [ "$t" -le "$gpus" ] && tps="$tps${tps:+,}$t"; done
    step "m3-bench-tp-step --tp $tps"
    timeout 560 "$BUILD/bin/m3-bench-tp-step" --checkpoints "$ck4,$ck8" --tp "$tps" \
      --batch "${BATCH:-1,4,16,64}" --breakdown --sweep --json "$OUT/tp_step.jsonl" \
      ${BENCH_ARGS:-} 2>&1 | grep -vE "^[IW] [0-9:.]+ |^json "
    echo "m3-bench-tp-step exit ${PIPESTATUS[0]}"
  fi
  [ "${KEEP:-1}" = 1 ] || rm -rf "$ck4" "$ck8"
  step "done"
} 2>&1 | tee "$OUT/tp_step_bench.log"
