#!/usr/bin/env bash
# Checks the docker/ stack without a docker engine: `docker-compose config` accepts the compose
# file and names the engine and gateway services; environment variables reach the ports, the
# model volume and the gateway's engine address; the default model volume is the bundled demo
# model; every file the Dockerfiles COPY from the repository exists; the entrypoints parse.
# Usage: compose_config_test.sh REPO_ROOT
set -uo pipefail
ROOT=${1:?usage: compose_config_test.sh REPO_ROOT}
COMPOSE="/usr/bin/docker-compose"
FILE="$ROOT/docker/docker-compose.yml"
fail=0
problem() { echo "FAIL: $*" >&2; fail=1; }
# A scratch directory as the working directory, so no .env file of the caller leaks in.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
env_clean=(env -u M3_MODEL_DIR -u M3_GATEWAY_PORT -u M3_ENGINE_PORT -u M3_ENGINE_ADDR -u M3_DEVICE
  -u M3_API_KEY -u M3_SERVED_MODEL_NAME -u M3_ALLOW_MEDIA_HOSTS -u M3_ENGINE_ARGS -u M3_GATEWAY_ARGS
  -u M3_ENGINE_API_KEY)

if ! "${env_clean[@]}" "$COMPOSE" -f "$FILE" config >"$WORK/default.yml" 2>"$WORK/err"; then
  cat "$WORK/err" >&2
  problem "docker-compose config rejects $FILE"
fi
services=$("${env_clean[@]}" "$COMPOSE" -f "$FILE" config --services 2>/dev/null | sort | tr '\n' ' ')
[ "$services" = "engine gateway " ] || problem "services are '$services', expected 'engine gateway'"
grep -q "$ROOT/tests/data/demo-model/model:/models/model:ro" "$WORK/default.yml" ||
  problem "the default model volume is not the bundled demo model"
[ -f "$ROOT/tests/data/demo-model/model/config.json" ] || problem "the demo model is missing"
grep -q "published: 8000" "$WORK/default.yml" || problem "the gateway is not published on 8000"
grep -q "condition: service_healthy" "$WORK/default.yml" ||
  problem "the gateway does not wait for a healthy engine"
[ "$(grep -c 'healthcheck:' "$WORK/default.yml")" = 2 ] || problem "both services need a health check"
grep -q "GET /ready" "$WORK/default.yml" || problem "the gateway health check does not ask /ready"

# Configuration by environment.
M3_MODEL_DIR=/srv/models/m3 M3_GATEWAY_PORT=18080 M3_ENGINE_ADDR=gpu-a:7000,gpu-b:7000 \
  M3_API_KEY=sekrit M3_DEVICE=cuda:1 M3_ENGINE_API_KEY=enginekey "$COMPOSE" -f "$FILE" config >"$WORK/env.yml" 2>"$WORK/err" ||
  { cat "$WORK/err" >&2; problem "docker-compose config fails with the environment set"; }
grep -q "/srv/models/m3:/models/model:ro" "$WORK/env.yml" || problem "M3_MODEL_DIR is not the volume"
grep -q "published: 18080" "$WORK/env.yml" || problem "M3_GATEWAY_PORT is not the published port"
grep -q "M3_ENGINES: gpu-a:7000,gpu-b:7000" "$WORK/env.yml" ||
  problem "M3_ENGINE_ADDR does not reach the gateway"
grep -q "M3_API_KEY: sekrit" "$WORK/env.yml" || problem "M3_API_KEY does not reach the gateway"
grep -q "M3_DEVICE: cuda:1" "$WORK/env.yml" || problem "M3_DEVICE does not reach the engine"
[ "$(grep -c "M3_ENGINE_API_KEY: enginekey" "$WORK/env.yml")" = 2 ] ||
  problem "M3_ENGINE_API_KEY does not reach both the engine and the gateway"

# The images' build inputs: each COPY source (outside --from stages) exists in the repository.
for df in "$ROOT"/docker/*.Dockerfile; do
  [ -f "$df" ] || continue
  while read -r src; do
    [ -e "$ROOT/$src" ] || problem "$(basename "$df") copies $src, which does not exist"
  done < <(grep -E '^COPY ' "$df" | grep -v -- '--from=' | awk '{for (i = 2; i < NF; i++) print $i}')
done
grep -q "dockerfile: docker/gateway.Dockerfile" "$WORK/default.yml" &&
  grep -q "dockerfile: docker/engine.Dockerfile" "$WORK/default.yml" ||
  problem "the services do not build docker/gateway.Dockerfile and docker/engine.Dockerfile"
for s in "$ROOT"/docker/*-entrypoint.sh; do
  bash -n "$s" || problem "$s does not parse"
done
# The entrypoint turns the environment into the server's command line.
argv=$(M3_ENGINES=a:1,b:2 M3_API_KEY=k M3_ALLOW_MEDIA_HOSTS=img.example:8080 \
  M3_GATEWAY_ARGS="--max-num-images 4" bash -c \
  'exec() { shift; printf "%s|" "$@"; }; f=$1; shift; source "$f"' _ "$ROOT/docker/gateway-entrypoint.sh")
expected="serve|--model|/models/model|--host|0.0.0.0|--port|8000|--engine|a:1|--engine|b:2|--api-key|k|--allow-media-host|img.example:8080|--max-num-images|4|"
[ "$argv" = "$expected" ] || problem "gateway entrypoint runs '$argv', expected '$expected'"

[ $fail = 0 ] && echo "compose config: engine and gateway services, environment and build inputs OK"
exit $fail
