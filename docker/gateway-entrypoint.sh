#!/usr/bin/env bash
# The gateway container's entrypoint: `m3-gateway serve` configured from the environment.
#   M3_MODEL_DIR          model directory inside the container (default /models/model)
#   M3_PORT               HTTP port (default 8000), bound on all interfaces
#   M3_ENGINES            engine addresses, comma-separated HOST:PORT
#                         (default engine:$M3_ENGINE_PORT, the port defaulting to 50051)
#   M3_SERVED_MODEL_NAME  the model name clients send (default: the model directory's name)
#   M3_API_KEY            when set, requests need "Authorization: Bearer $M3_API_KEY"
#   M3_ALLOW_MEDIA_HOSTS  HOST[:PORT] list, comma-separated, exempt from the SSRF guard
#   M3_GATEWAY_ARGS       further `m3-gateway serve` options, split on spaces
# Arguments given to the container are appended.
set -euo pipefail
args=(serve --model "${M3_MODEL_DIR:-/models/model}" --host 0.0.0.0 --port "${M3_PORT:-8000}")
IFS=',' read -r -a engines <<<"${M3_ENGINES:-engine:${M3_ENGINE_PORT:-50051}}"
for e in "${engines[@]}"; do [ -n "$e" ] && args+=(--engine "$e"); done
if [ -n "${M3_SERVED_MODEL_NAME:-}" ]; then args+=(--served-model-name "$M3_SERVED_MODEL_NAME"); fi
if [ -n "${M3_API_KEY:-}" ]; then args+=(--api-key "$M3_API_KEY"); fi
IFS=',' read -r -a hosts <<<"${M3_ALLOW_MEDIA_HOSTS:-}"
for h in "${hosts[@]}"; do [ -n "$h" ] && args+=(--allow-media-host "$h"); done
read -r -a extra <<<"${M3_GATEWAY_ARGS:-}"
exec /usr/local/bin/m3-gateway "${args[@]}" "${extra[@]}" "$@"
