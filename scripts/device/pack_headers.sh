#!/usr/bin/env bash
# Packs the header-only libraries a device build of the engine core and its GPU tests needs
# (nlohmann-json, doctest; the GPU machine has a compiler but no Debian -dev packages) into
# build-device/device-headers.tar.xz (git-ignored, about 150 KiB; env DEVICE_HEADERS: another
# path): small enough to carry beside the working tree, which nearly fills the device's 64 MiB
# transfer limit on its own.
# Run HERE: scripts/device/pack_headers.sh; then carry build-device/device-headers.tar.xz.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEVICE_HEADERS="${DEVICE_HEADERS:-$ROOT/build-device/device-headers.tar.xz}"
mkdir -p "$(dirname "$DEVICE_HEADERS")"
tar -C /usr/include -cJf "$DEVICE_HEADERS" nlohmann doctest
ls -l "$DEVICE_HEADERS"
