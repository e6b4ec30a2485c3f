#!/usr/bin/env bash
# One device run of the CUDA graph checks and the end-to-end serving benchmark (docs/PERF.md,
# "CUDA graphs and the engine end to end"): the decode-graph tests of cuda_test, then a random
# checkpoint at the real text widths (m3-make-random-checkpoint, on /dev/shm when it has room,
# else the disk) served by `m3-engine serve --device cuda` with --cuda-graphs on and then off,
# each driven by m3-bench-serve over gRPC at the given concurrencies. Binaries come from a
# bundle packed here (scripts/device/pack_gpu_bundle.sh with
# EXTRA_BINS="m3-bench-serve m3-make-random-checkpoint"), carried at BUNDLE (default
# build-device/gpu-bundle.tar.xz, where that script writes it). Logs and results
# under $OUT. Each step has a time limit so the run ends inside the device's 10 minutes.
# Usage (repo root): bash scripts/device/serve_bench.sh [BUNDLE] [CONC] [PROMPT] [OUTPUT]
#   env: BENCH=0 stops after the tests; TESTS=0 skips cuda_test, TESTS_TC picks its cases (default "CUDA graphs*"), TEST_REPEAT
#        runs it that many times; BENCH_REPEAT runs m3-bench-serve that many times per server;
#        GRAPHS="on off" (the order of the two serve runs); RUNS (m3-bench-serve --runs, default
#        1); SERVE_S bounds each bench (seconds); EXTRA_SERVE_ARGS (e.g. --no-prefix-caching,
#        --tensor-parallel 2); KEEP_CHECKPOINT=1 reuses a checkpoint a previous call left and
#        leaves this one's (several server configurations in one device call)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/serve_bench_out}"
BUNDLE="${1:-build-device/gpu-bundle.tar.xz}"
CONC="${2:-1,8,32,64}"
PROMPT="${3:-8192}"
OUTPUT="${4:-64}"
mkdir -p "$OUT"
# The directory holding libnccl.so.2 (PyTorch's nvidia-nccl wheel, or a CUDA / system install),
# for LD_LIBRARY_PATH: the engine loads NCCL at run time.
. scripts/device/nccl_dir.sh
step() { echo "== $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
  step "unpacking $BUNDLE"
  mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf "$BUNDLE"
  BUILD="$(cat /tmp/gpu-bundle/BUILD_DIR)"
  mkdir -p "$BUILD" && cp -r /tmp/gpu-bundle/bin "$BUILD/"
  [ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
  # The test data only for cuda_test.
  [ "${TESTS:-1}" = 1 ] && (cd tests/data && find . -name '*.tar.xz' | while read -r a; do
    mkdir -p "$BUILD/test-data/$(dirname "$a")" && tar -C "$BUILD/test-data/$(dirname "$a")" -xJf "$a"
  done)
  # NCCL for --tensor-parallel / --expert-parallel (loaded at run time); NVLink multicast off.
  export NCCL_NVLS_ENABLE=0
  export LD_LIBRARY_PATH="/tmp/gpu-bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:$(nccl_dir):${LD_LIBRARY_PATH:-}"
  ldd "$BUILD/bin/m3-engine" "$BUILD/bin/m3-bench-serve" | grep "not found"
  if [ "${TESTS:-1}" = 1 ]; then
    for i in $(seq 1 "${TEST_REPEAT:-1}"); do
      step "cuda_test -tc='${TESTS_TC:-CUDA graphs*}' ($i)"
      timeout 150 "$BUILD/bin/cuda_test" -d -tc="${TESTS_TC:-CUDA graphs*}" 2>&1 |
        tee -a "$OUT/cuda_graph_test.log" | grep -vE "^I [0-9:.]+ "
      echo "cuda_test rc=${PIPESTATUS[0]}"
    done
  fi
  if [ "${BENCH:-1}" = 0 ]; then step "done (BENCH=0: no benchmark)"; exit 0; fi
  free -g | head -2
  df -h /dev/shm /tmp | cat
  shm_gb=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
  DIR=/tmp/m3-random
  [ "${shm_gb:-0}" -gt 60 ] && DIR=/dev/shm/m3-random
  if [ "${KEEP_CHECKPOINT:-0}" = 1 ] && [ -f "$DIR/config.json" ]; then
    step "reusing the random checkpoint in $DIR"
  else
    step "random checkpoint at the real text widths into $DIR"
    timeout 200 "$BUILD/bin/m3-make-random-checkpoint" --out "$DIR" 2>&1 | tee "$OUT/checkpoint.log"
  fi
  port=50151
  for g in ${GRAPHS:-on off}; do
    step "m3-engine serve --cuda-graphs $g"
    "$BUILD/bin/m3-engine" serve --model "$DIR" --device cuda --port $port --host 127.0.0.1 \
      --max-num-seqs 64 --max-batched-tokens 8192 --cuda-graphs "$g" ${EXTRA_SERVE_ARGS:-} \
      >"$OUT/serve-$g.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do
      grep -q "listening on port" "$OUT/serve-$g.log" && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.5
    done
    grep -E "listening|engine:|error|Error|weights" "$OUT/serve-$g.log" | head -8
    if grep -q "listening on port" "$OUT/serve-$g.log"; then
      # BENCH_REPEAT > 1: the same prompts again (same --seed) against the same server.
      for i in $(seq 1 "${BENCH_REPEAT:-1}"); do
        timeout "${SERVE_S:-200}" "$BUILD/bin/m3-bench-serve" --address 127.0.0.1:$port \
          --prompt "$PROMPT" --output "$OUTPUT" --conc "$CONC" --label "graphs $g" --runs "${RUNS:-1}" \
          2>&1 | tee -a "$OUT/bench-$g.jsonl"
        echo "m3-bench-serve rc=${PIPESTATUS[0]}"
      done
    fi
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    grep -E "cuda graphs|decode graphs|WARN|warn" "$OUT/serve-$g.log" | sort | uniq -c | head -10
    port=$((port + 1))
  done
  [ "${KEEP_CHECKPOINT:-0}" = 1 ] || rm -rf "$DIR"
  step "done"
} 2>&1 | tee "$OUT/serve_bench.log"
