#!/usr/bin/env bash
# Fills build-device/sysroot (git-ignored; env SYSROOT: another path) with copies of this
# machine's Debian headers and libraries that device builds need, for the GPU machine, which has a compiler but no Debian -dev packages:
# nlohmann-json and doctest (header-only; engine/kernel tests), PCRE2 and utf8proc (the tokenizer,
# scripts/device/bench_tokenizer.sh), libjpeg-turbo (m3_image and m3-bench-jpeg,
# scripts/device/bench_images.sh).
# Run HERE, from anywhere: scripts/device/make_sysroot.sh; then carry build-device/sysroot.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SYSROOT="${SYSROOT:-$ROOT/build-device/sysroot}"
LIBDIR=/usr/lib/x86_64-linux-gnu
rm -rf "$SYSROOT"
mkdir -p "$SYSROOT/include" "$SYSROOT/lib"

cp -r /usr/include/nlohmann /usr/include/doctest "$SYSROOT/include/"
cp /usr/include/pcre2.h /usr/include/utf8proc.h "$SYSROOT/include/"
# libjpeg-turbo (libjpeg62-turbo-dev): Debian keeps jconfig.h under the multiarch directory; one
# include directory holds all four here. Only the static archive (SIMD code built in) is copied,
# so CMake's FindJPEG picks it and the binary needs no libjpeg.so at run time.
cp /usr/include/jpeglib.h /usr/include/jmorecfg.h /usr/include/jerror.h \
  /usr/include/x86_64-linux-gnu/jconfig.h "$SYSROOT/include/"
cp "$LIBDIR/libjpeg.a" "$SYSROOT/lib/"

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
