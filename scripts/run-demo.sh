#!/usr/bin/env bash
# The main job (for now): install packages, build, and run the whole request path on the bundled
# demo model (tests/data/demo-model: a tiny MiniMax-M3 VL trained to name the colour and form of
# a shape in a picture). For each sample picture, `m3-gateway prepare` renders the model's chat
# template, preprocesses the picture and tokenizes the prompt; `m3-engine generate` runs the
# vision tower, projector and sparse-attention MoE decoder greedily; `m3-gateway detokenize`
# prints the answer. Usage (as root): bash scripts/run-demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh; fi
BUILD=${M3_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j "$(nproc)" --target m3-engine m3-gateway
MODEL=tests/data/demo-model/model
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ask() {  # ask PICTURE QUESTION
  printf '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "%s"}}, {"type": "text", "text": "%s"}]}]}' \
    "$PWD/$1" "$2" >"$WORK/request.json"
  "$BUILD/bin/m3-gateway" prepare --model "$MODEL" --request "$WORK/request.json" \
    --output "$WORK/inputs.safetensors" >/dev/null
  "$BUILD/bin/m3-engine" generate --model "$MODEL" --inputs "$WORK/inputs.safetensors" \
    --max-new-tokens 24 2>/dev/null | tail -n 1 | sed 's/.*"tokens":\(\[[0-9,]*\]\).*/\1/' >"$WORK/ids.json"
  answer=$("$BUILD/bin/m3-gateway" detokenize --tokenizer "$MODEL/tokenizer.json" \
    --ids-file "$WORK/ids.json" --skip-special-tokens)
  printf '%-40s %-30s -> %s\n' "$1" "$2" "$(echo $answer)"
}
echo "== the demo model ($MODEL) answering questions about its sample pictures"
for i in 0 3 4 6; do ask "tests/data/demo-model/samples/sample$i.png" "What colour is the shape?"; done
for i in 2 7; do ask "tests/data/demo-model/samples/sample$i.png" "What shape is this?"; done
ask tests/data/demo-model/samples/sample1.png "Describe the image."
