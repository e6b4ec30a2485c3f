#!/usr/bin/env bash
# Packs the header-only libraries a device build of the engine core and its GPU tests needs
# (nlohmann-json, doctest; the GPU machine has a compiler but no Debian -dev packages) into
# .dev/device-headers.tar.xz (git-ignored, about 150 KiB): small enough to carry beside the
# working tree, which nearly fills the device's 64 MiB transfer limit on its own.
# Run HERE: scripts/device/pack_headers.sh; then carry .dev/device-headers.tar.xz.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$ROOT/.dev"
tar -C /usr/include -cJf "$ROOT/.dev/device-headers.tar.xz" nlohmann doctest
ls -l "$ROOT/.dev/device-headers.tar.xz"
