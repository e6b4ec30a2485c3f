#!/usr/bin/env bash
# The main job: the local stack on the bundled demo model (tests/data/demo-model, a tiny
# MiniMax-M3 VL trained to name the colour and form of a shape in a picture). Installs the
# packages (as root), builds m3-engine and m3-gateway, starts `m3-engine serve` on the demo model
# and `m3-gateway serve` (the OpenAI API) in front of it on loopback, serves the sample pictures
# and a short clip made from them from a local HTTP server (busybox httpd, allowlisted explicitly
# in the gateway's SSRF guard), then asks the API, streaming:
#   1. the colour of samples/sample3.png by its http URL (the reference answers "The shape is red."),
#   2. about the clip by its video URL (the model never saw video: the words mean nothing, the
#      path is what runs),
# printing each reply as it streams and its usage. Every process started here is stopped on exit.
# Usage (as root for the packages): bash scripts/run-demo.sh
#   M3_BUILD_DIR   build directory (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh; fi
BUILD=${M3_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j "$(nproc)" --target m3-engine m3-gateway
MODEL=tests/data/demo-model/model
SAMPLES=tests/data/demo-model/samples

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "run-demo: $*" >&2
  for log in "$WORK"/*.log; do [ -s "$log" ] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }; done
  exit 1
}
# Waits until FILE has a line matching REGEX (printing its first capture group), while PID lives.
wait_for() {  # wait_for PID FILE REGEX SECONDS WHAT
  local deadline=$((SECONDS + $4))
  while [ $SECONDS -lt $deadline ]; do
    kill -0 "$1" 2>/dev/null || fail "$5 exited"
    local m
    m=$(sed -nE "s/.*$3.*/\\1/p" "$2" | head -n 1)
    [ -n "$m" ] && { echo "$m"; return; }
    sleep 0.1
  done
  fail "$5 did not start in $4 s"
}

# The media: the sample pictures and a 4-second clip of them (2 frames a second, 112x112).
mkdir -p "$WORK/media"
cp "$SAMPLES"/sample*.png "$WORK/media/"
ffmpeg -loglevel error -y -framerate 2 -i "$SAMPLES/sample%d.png" \
  -vf "scale=112:112:force_original_aspect_ratio=decrease,pad=112:112:-1:-1:color=white,format=yuv420p" \
  -c:v libx264 "$WORK/media/clip.mp4"
# busybox httpd cannot bind port 0, so try ports until one binds.
for MEDIA_PORT in $(shuf -i 20000-60000 -n 20); do
  busybox httpd -f -p "127.0.0.1:$MEDIA_PORT" -h "$WORK/media" 2>>"$WORK/httpd.log" &
  pid=$!
  sleep 0.2
  if kill -0 "$pid" 2>/dev/null; then PIDS+=("$pid"); break; fi
  MEDIA_PORT=
done
[ -n "$MEDIA_PORT" ] || fail "busybox httpd found no free port"
MEDIA=http://127.0.0.1:$MEDIA_PORT

echo "== starting m3-engine serve on $MODEL (CPU)"
"$BUILD/bin/m3-engine" serve --model "$MODEL" --host 127.0.0.1 --port 0 >"$WORK/engine.log" 2>&1 &
PIDS+=($!)
ENGINE_PORT=$(wait_for $! "$WORK/engine.log" 'listening on port ([0-9]+)' 180 "m3-engine serve")
echo "== starting m3-gateway serve (engine 127.0.0.1:$ENGINE_PORT, media from $MEDIA allowlisted)"
"$BUILD/bin/m3-gateway" serve --model "$MODEL" --host 127.0.0.1 --port 0 \
  --engine "127.0.0.1:$ENGINE_PORT" --allow-media-host "127.0.0.1:$MEDIA_PORT" \
  --served-model-name demo >"$WORK/gateway.log" 2>&1 &
PIDS+=($!)
GATEWAY_PORT=$(wait_for $! "$WORK/gateway.log" 'http=[^ ]*:([0-9]+)' 60 "m3-gateway serve")
API=http://127.0.0.1:$GATEWAY_PORT
for _ in $(seq 100); do
  curl -sf "$API/ready" >/dev/null && break
  sleep 0.1
done
curl -sf "$API/ready" >/dev/null || fail "the gateway is not ready"
echo "== OpenAI API on $API (GET /v1/models: $(curl -s "$API/v1/models" | jq -c '[.data[].id]'))"

# ask NAME PART_JSON QUESTION: one streaming chat request; prints the reply as it arrives (the
# answer's leading blank lines dropped), then the usage.
ask() {
  local body
  body=$(jq -n --argjson part "$2" --arg q "$3" '{model: "demo", stream: true,
    stream_options: {include_usage: true}, temperature: 0, max_tokens: 32,
    messages: [{role: "user", content: [$part, {type: "text", text: $q}]}]}')
  printf '\n$ curl -N %s/v1/chat/completions   # %s: %s\n> ' "$API" "$1" "$3"
  curl -sN "$API/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" |
    sed -un 's/^data: //p' | tee "$WORK/$1.sse" | grep --line-buffered -v '^\[DONE\]$' |
    jq -n --unbuffered -rj 'foreach (inputs | .choices[0].delta.content // "") as $c
      ({on: false, out: ""};
       if .on then .out = $c else ($c | sub("^\n+"; "")) as $s | .out = $s | .on = ($s != "") end;
       .out)'
  echo
  grep -q '"error"' "$WORK/$1.sse" && fail "the request failed: $(grep '"error"' "$WORK/$1.sse")"
  printf 'usage: %s\n' "$(grep -v '^\[DONE\]$' "$WORK/$1.sse" | jq -sc 'map(select(.usage)) | last.usage')"
}

ask picture "{\"type\": \"image_url\", \"image_url\": {\"url\": \"$MEDIA/sample3.png\"}}" \
  "What colour is the object in the picture?"
echo "(the reference answers: The shape is red.)"
ask video "{\"type\": \"video_url\", \"video_url\": {\"url\": \"$MEDIA/clip.mp4\"}}" \
  "What do you see?"
echo "(a model trained on pictures only: the words mean nothing, the video path ran)"
