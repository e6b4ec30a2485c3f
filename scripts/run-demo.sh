#!/usr/bin/env bash
# The main job (for now): install packages, build, and run the engine on the bundled demo model
# (tests/data/m3-tiny, a complete MiniMax-M3 VL checkpoint with random weights): one image
# prompt is prefilled through the vision tower, projector and sparse-attention MoE decoder, then
# decoded greedily with the KV and index-key caches. Usage (as root): bash scripts/run-demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh; fi
BUILD=${M3_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j "$(nproc)" --target m3-engine m3-gateway
MODEL=tests/data/m3-tiny/model
INPUTS=tests/data/demo/image_prompt.safetensors
echo "== m3-engine generate: $MODEL, one 224x224 image + text, 12 greedy tokens"
"$BUILD/bin/m3-engine" generate --model "$MODEL" --inputs "$INPUTS" --max-new-tokens 12 --ignore-eos
echo "== m3-engine generate: the same prompt sampled (temperature 0.8, top-p 0.9, seed 7)"
"$BUILD/bin/m3-engine" generate --model "$MODEL" --inputs "$INPUTS" --max-new-tokens 12 \
  --temperature 0.8 --top-p 0.9 --seed 7 --ignore-eos
