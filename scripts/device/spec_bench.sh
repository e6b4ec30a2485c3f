#!/usr/bin/env bash
# One device run of speculative decoding's GPU checks and benchmark (issue 37): cuda_test's
# speculative cases (the verify forward against one-by-one decodes and the CPU engine; the
# engine's greedy tokens with and without n-gram speculation), then m3-bench-spec on the demo
# model (its trained EAGLE-3 draft on a picture question, and n-gram drafts: their real
# acceptance) and on a random 4-layer checkpoint at the real
# text widths (m3-make-random-checkpoint; the measuring hook M3_SPEC_FORCE_ACCEPTANCE fixes the
# acceptance rate, as random weights never match): time per output token at 1, 4 and 16
# concurrent with and without speculation in one run, and a verify step of 1 + k rows against a
# plain decode step at batch 1 and a 32K context (CUDA graphs on, and off for the kernels alone).
# Binaries come from a bundle packed here (scripts/device/pack_gpu_bundle.sh with
# EXTRA_BINS="m3-bench-spec m3-make-random-checkpoint"), carried at BUNDLE (default
# build-device/gpu-bundle.tar.xz). Logs and the "json" result lines under $OUT.
# Usage (repo root): bash scripts/device/spec_bench.sh [BUNDLE] [CONC] [K] [ACCEPT]
#   CONC default 1,4,16; K (drafts) default 3; ACCEPT (forced acceptance on the random
#   checkpoint) default 0.76: each draft accepted with that probability, the first rejection
#   ending the step, gives a mean acceptance length 1 + r + r^2 + r^3 = 2.78 at k = 3 (the
#   published figure for MiniMax-M3's EAGLE-3 drafts); env TESTS=0 skips cuda_test, DEMO=0 /
#   RANDOM_CKPT=0 skip a model, CONTEXT (default 32768), OUTPUT (default 128), PROMPT (default
#   512). Each part has a time limit; run them in separate device calls to stay inside 10 minutes.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/spec_bench_out}"
BUNDLE="${1:-build-device/gpu-bundle.tar.xz}"
CONC="${2:-1,4,16}"
K="${3:-3}"
ACCEPT="${4:-0.76}"
mkdir -p "$OUT"
step() { echo "== $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
  step "unpacking $BUNDLE"
  mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf "$BUNDLE"
  BUILD="$(cat /tmp/gpu-bundle/BUILD_DIR)"
  mkdir -p "$BUILD" && cp -r /tmp/gpu-bundle/bin "$BUILD/"
  [ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
  export LD_LIBRARY_PATH="/tmp/gpu-bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
  ldd "$BUILD/bin/m3-bench-spec" | grep "not found"
  if [ "${TESTS:-1}" = 1 ]; then
    (cd tests/data && find . -name '*.tar.xz' | while read -r a; do
      mkdir -p "$BUILD/test-data/$(dirname "$a")" && tar -C "$BUILD/test-data/$(dirname "$a")" -xJf "$a"
    done)
    step "cuda_test -tc='GPU verify*,GPU engine with*'"
    timeout 240 "$BUILD/bin/cuda_test" -tc='GPU verify*,GPU engine with*' 2>&1 |
      tee "$OUT/cuda_spec_test.log" | grep -vE "^I [0-9:.]+ "
    echo "cuda_test rc=${PIPESTATUS[0]}"
  fi
  if [ "${DEMO:-1}" = 1 ]; then
    # Its picture question (prepared here by m3-gateway prepare), answered to its eos.
    step "m3-bench-spec: demo model with its EAGLE-3 draft, real acceptance"
    timeout 200 "$BUILD/bin/m3-bench-spec" --model tests/data/demo-model/model --device cuda \
      --method eagle3 --draft tests/data/demo-model/eagle3 \
      --inputs tests/data/demo-model/bench/sample3_describe.safetensors --eos \
      --conc "$CONC" --k "$K" --force-acceptance -1 --output 64 --context 4096 2>&1 |
      tee "$OUT/demo-eagle3.log" | grep -E "^json|error"
    step "m3-bench-spec: demo model, n-gram, real acceptance"
    timeout 150 "$BUILD/bin/m3-bench-spec" --model tests/data/demo-model/model --device cuda \
      --conc "$CONC" --k "$K" --force-acceptance -1 --prompt 64 --output "${OUTPUT:-128}" \
      --skip-verify 2>&1 | tee "$OUT/demo-ngram.log" | grep -E "^json|error"
  fi
  if [ "${RANDOM_CKPT:-1}" = 1 ]; then
    DIR=/tmp/m3-random-4l
    shm_gb=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
    [ "${shm_gb:-0}" -gt 60 ] && DIR=/dev/shm/m3-random-4l
    if [ ! -f "$DIR/config.json" ]; then
      step "random 4-layer checkpoint at the real text widths into $DIR"
      timeout 200 "$BUILD/bin/m3-make-random-checkpoint" --out "$DIR" --layers 4 \
        --max-position 65536 2>&1 | tail -3
    fi
    for g in on off; do
      step "m3-bench-spec: random 4 layers, forced acceptance $ACCEPT, CUDA graphs $g"
      extra=""
      [ "$g" = off ] && extra="--skip-serving"
      timeout 280 "$BUILD/bin/m3-bench-spec" --model "$DIR" --device cuda --conc "$CONC" \
        --k "$K" --force-acceptance "$ACCEPT" --prompt "${PROMPT:-512}" --output "${OUTPUT:-128}" \
        --context "${CONTEXT:-32768}" --cuda-graphs "$g" $extra 2>&1 |
        tee "$OUT/random-$g.log" | grep -E "^json|error"
    done
  fi
  step "done"
} 2>&1 | tee "$OUT/spec_bench.log"
