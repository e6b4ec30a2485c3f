#!/usr/bin/env bash
# Fills .dev/sysroot (git-ignored) with copies of this machine's Debian headers and libraries
# the tokenizer needs (nlohmann-json, PCRE2, utf8proc), so scripts/device/bench_tokenizer.sh can
# build on the GPU machine, which has a compiler but no Debian -dev packages.
# Run HERE, from anywhere: scripts/device/make_sysroot.sh; then carry .dev/sysroot.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SYSROOT="$ROOT/.dev/sysroot"
LIBDIR=/usr/lib/x86_64-linux-gnu
rm -rf "$SYSROOT"
mkdir -p "$SYSROOT/include" "$SYSROOT/lib"

cp -r /usr/include/nlohmann "$SYSROOT/include/"
cp /usr/include/pcre2.h /usr/include/utf8proc.h "$SYSROOT/include/"

# Each library: its static archive (what the device build links), and the shared object under
# its soname plus the linker name, for a dynamic build.
for lib in pcre2-8 utf8proc; do
  cp "$LIBDIR/lib$lib.a" "$SYSROOT/lib/"
  real="$(readlink -f "$LIBDIR/lib$lib.so")"
  soname="$(objdump -p "$real" | awk '/SONAME/ {print $2}')"
  cp "$real" "$SYSROOT/lib/$soname"
  ln -sf "$soname" "$SYSROOT/lib/lib$lib.so"
done
du -sh "$SYSROOT"
ls -l "$SYSROOT/lib"
