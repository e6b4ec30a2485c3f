#!/usr/bin/env bash
# The test command: installs the Debian packages, builds everything in Release with warnings
# as errors, checks that every program the tests run comes from an installed package, and runs
# every test with CTest. Usage: sudo bash scripts/test.sh  (root for apt-get)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh; fi
# Every program the tests execute must come from a package install-deps.sh names.
bash scripts/check-programs.sh
BUILD=${M3_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DM3_WERROR=ON ${M3_CMAKE_ARGS:-}
cmake --build "$BUILD" -j "$(nproc)"
cd "$BUILD" && ctest --output-on-failure -j "$(nproc)" --timeout 1200
