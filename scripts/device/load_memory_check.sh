#!/usr/bin/env bash
# Loading from files on the GPU machine (issue 36: "a 4-layer real-width checkpoint in each
# format, written as several shards with an index, loads with peak host memory at most 2 GB above
# its largest shard"): for each format, m3-make-random-checkpoint writes a 4-layer checkpoint at
# the real widths (1 dense + 3 MoE layers; bf16 ~49 GB, mxfp8 ~25 GB, nvfp4 / mixed ~14-16 GB) in
# the released layout as shards of MAX_SHARD with model.safetensors.index.json; `m3-engine
# serve --device cuda` loads it; once it listens, the process's peak resident memory (VmHWM,
# mmapped checkpoint pages included; the "weights loaded" lines' figure if larger) must stay
# within the largest shard + 2 GiB. Prints a table and exits non-zero when a format fails the bound or does not load.
# Binaries: the GPU bundle (scripts/device/pack_gpu_bundle.sh), carried at BUNDLE (default
# build-device/gpu-bundle.tar.xz); checkpoints on /dev/shm when it has room, else /tmp, one at a
# time (deleted after).
# Usage (repo root): bash scripts/device/load_memory_check.sh [FORMATS]
#   FORMATS: space-separated, default "bf16 mxfp8 nvfp4 mixed"
#   env: MAX_SHARD (default 5G: m3-make-random-checkpoint --max-shard-size), LOAD_S bounds
#   each load (seconds), EXTRA_SERVE_ARGS (e.g. --tensor-parallel 2); for a dry run of the
#   script itself: BIN (binaries already unpacked), DEVICE (cuda), CKPT_ARGS (narrower widths)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/load_memory_check_out}"
FORMATS="${1:-bf16 mxfp8 nvfp4 mixed}"
BUNDLE="${BUNDLE:-build-device/gpu-bundle.tar.xz}"
MAX_SHARD="${MAX_SHARD:-5G}"
mkdir -p "$OUT"
step() { echo "== $* ($(date +%T))"; }
fail=0
{
  nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>&1
  if [ -z "${BIN:-}" ]; then
    step "unpacking $BUNDLE"
    mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf "$BUNDLE"
    BIN=/tmp/gpu-bundle/bin
  fi
  export LD_LIBRARY_PATH="/tmp/gpu-bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
  free -g | head -2
  shm_gb=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
  ROOT=/tmp
  [ "${shm_gb:-0}" -gt 60 ] && ROOT=/dev/shm
  TABLE="$OUT/table.md"
  echo "| format | shards | largest shard GiB | total GiB | peak RSS GiB | bound (largest + 2) GiB | load s | verdict |" >"$TABLE"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |" >>"$TABLE"
  port=50171
  for f in $FORMATS; do
    dir="$ROOT/m3-load-$f"
    rm -rf "$dir"
    step "$f: a 4-layer real-width checkpoint in shards of $MAX_SHARD into $dir"
    timeout 300 "$BIN/m3-make-random-checkpoint" --out "$dir" --format "$f" --layers 4 \
      --max-shard-size "$MAX_SHARD" ${CKPT_ARGS:-} 2>&1 | tee "$OUT/make-$f.log"
    largest=$(grep -o 'largest_shard_bytes=[0-9]*' "$OUT/make-$f.log" | cut -d= -f2)
    total=$(grep -o 'total_bytes=[0-9]*' "$OUT/make-$f.log" | cut -d= -f2)
    shards=$(ls "$dir"/model-*.safetensors 2>/dev/null | wc -l)
    if [ -z "$largest" ] || [ ! -f "$dir/model.safetensors.index.json" ]; then
      echo "$f: the checkpoint was not written"
      echo "| $f | | | | | | | not written |" >>"$TABLE"
      fail=1
      continue
    fi
    step "$f: m3-engine serve --device ${DEVICE:-cuda} (load only)"
    log="$OUT/serve-$f.log"
    start=$(date +%s.%N)
    "$BIN/m3-engine" serve --model "$dir" --device "${DEVICE:-cuda}" --port $port --host 127.0.0.1 \
      --max-num-seqs 8 --max-batched-tokens 2048 ${EXTRA_SERVE_ARGS:-} >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 $((2 * ${LOAD_S:-240}))); do
      grep -q "listening on port" "$log" 2>/dev/null && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.5
    done
    secs=$(python3 -c "import time; print('%.1f' % (time.time() - $start))")
    hwm_kb=$(grep VmHWM /proc/$pid/status 2>/dev/null | tr -dc 0-9)
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    grep -E "weights loaded|error|Error" "$log" | head -5
    # The process's high-water mark once every rank has loaded (VmHWM), else the largest the
    # ranks' "weights loaded" lines report.
    peak_mib=$(grep -o 'peak resident [0-9]* MiB' "$log" | tr -dc '0-9\n' | sort -n | tail -1)
    [ -n "$peak_mib" ] && [ -n "$hwm_kb" ] && [ $((hwm_kb / 1024)) -gt "$peak_mib" ] &&
      peak_mib=$((hwm_kb / 1024))
    if [ -z "$peak_mib" ]; then
      echo "$f: did not load (see $log)"
      echo "| $f | $shards | | | | | | did not load |" >>"$TABLE"
      fail=1
    else
      echo "$f: VmHWM when stopped: $((${hwm_kb:-0} / 1024)) MiB"
      python3 - "$f" "$shards" "$largest" "$total" "$peak_mib" "$secs" >>"$TABLE" <<'EOF'
import sys
f, shards, largest, total, peak_mib, secs = sys.argv[1:]
gib = 1 << 30
largest, total, peak = int(largest) / gib, int(total) / gib, int(peak_mib) / 1024
bound = largest + 2
print("| %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s |" % (
    f, shards, largest, total, peak, bound, secs, "ok" if peak <= bound else "OVER"))
EOF
      grep -q "OVER" <(tail -1 "$TABLE") && fail=1
    fi
    rm -rf "$dir"
    port=$((port + 1))
  done
  step "peak host memory while loading (bound: the largest shard + 2 GiB)"
  cat "$TABLE"
  echo "load_memory_check: $([ $fail = 0 ] && echo PASS || echo FAIL)"
} 2>&1 | tee "$OUT/load_memory_check.log"
grep -q "load_memory_check: PASS" "$OUT/load_memory_check.log"
