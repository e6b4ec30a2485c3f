#!/usr/bin/env bash
# The engine container's entrypoint: `m3-engine serve` configured from the environment.
#   M3_MODEL_DIR          model directory inside the container (default /models/model)
#   M3_ENGINE_PORT        gRPC port (default 50051), bound on all interfaces (--host 0.0.0.0:
#                         the gateway is another container)
#   M3_DEVICE             cpu, cuda or cuda:N (default cuda)
#   M3_SERVED_MODEL_NAME  the model name the engine reports (default: the directory's name)
#   M3_ENGINE_API_KEY     when set, every gRPC call needs it (read by m3-engine itself)
#   M3_ENGINE_ARGS        further `m3-engine serve` options, split on spaces
#                         (e.g. "--max-num-seqs 128 --gpu-memory-fraction 0.8")
# Arguments given to the container are appended.
set -euo pipefail
args=(serve --model "${M3_MODEL_DIR:-/models/model}" --host 0.0.0.0
  --port "${M3_ENGINE_PORT:-50051}" --device "${M3_DEVICE:-cuda}")
if [ -n "${M3_SERVED_MODEL_NAME:-}" ]; then args+=(--served-model-name "$M3_SERVED_MODEL_NAME"); fi
read -r -a extra <<<"${M3_ENGINE_ARGS:-}"
exec /usr/local/bin/m3-engine "${args[@]}" "${extra[@]}" "$@"
