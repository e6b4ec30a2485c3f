#!/usr/bin/env bash
# Runs one Node test script of tests/sdk against the built binaries, with the pinned `openai` and
# `@anthropic-ai/sdk` packages installed (npm ci from package-lock.json) into the build tree.
# Exits 77 (skipped) only when node is not installed; scripts/test.sh installs it, so CI always
# runs the tests.
# Usage: run_node_test.sh SOURCE_DIR WORK_DIR BIN_DIR TEST_DATA SCRIPT.mjs
set -euo pipefail
SRC=$1 WORK=$2 BIN=$3 DATA=$4 SCRIPT=$5
NODE="/usr/bin/node"
NPM="/usr/bin/npm"
if [ ! -x "$NODE" ]; then
  echo "SKIP: node is not installed (bash scripts/install-deps.sh installs nodejs and npm)"
  exit 77
fi
# npm trusts only node's bundled roots unless told otherwise; the system store is where a machine
# behind a TLS-inspecting proxy keeps that proxy's CA (ca-certificates is installed).
if [ -z "${npm_config_cafile:-}" ] && [ -z "${NODE_EXTRA_CA_CERTS:-}" ] &&
  [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  export npm_config_cafile=/etc/ssl/certs/ca-certificates.crt
fi
mkdir -p "$WORK"
# The scripts run from the work directory so that their imports find node_modules.
cp "$SRC"/*.mjs "$WORK"/
want=$(sha256sum <"$SRC/package-lock.json")
installed() { [ "$(cat "$WORK/node_modules/.m3-lock" 2>/dev/null || true)" = "$want" ]; }
if ! installed; then
  # Two tests may arrive here at once (ctest -j): one installs, the other waits for it.
  exec 9>"$WORK/.npm-install.lock"
  flock 9
  if ! installed; then
    cp "$SRC/package.json" "$SRC/package-lock.json" "$WORK"/
    (cd "$WORK" && "$NPM" ci --no-audit --no-fund --loglevel=error)
    echo "$want" >"$WORK/node_modules/.m3-lock"
  fi
  flock -u 9
fi
cd "$WORK"
M3_BIN_DIR=$BIN M3_TEST_DATA=$DATA M3_WORK_DIR=$WORK exec "$NODE" "$WORK/$SCRIPT"
