#!/usr/bin/env bash
# Installs every Debian 12 package m3serve needs to build, test and run (idempotent; run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" != 0 ]; then echo "install-deps.sh: run as root (apt-get)" >&2; exit 1; fi
PKGS=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  python3 python3-jinja2 python3-numpy python3-grpcio python3-protobuf
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libboost-dev libssl-dev
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev ffmpeg
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  doctest-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libopenblas-dev libpcre2-dev libutf8proc-dev
  libjpeg62-turbo-dev libjpeg-turbo-progs libpng-dev libwebp-dev webp zlib1g-dev
  nodejs npm docker-compose busybox jq coreutils
)
# A name an installed package Provides counts as present: NodeSource's nodejs, for one, carries
# npm and conflicts with Debian's npm package, which apt would otherwise try to install beside it.
provided=" $(dpkg-query -W -f='${db:Status-Abbrev}|${Provides}\n' 2>/dev/null |
  awk -F'|' '$1 ~ /^ii/ {print $2}' | tr ',' '\n' | sed 's/(.*)//; s/ //g' | tr '\n' ' ') "
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    [[ "$provided" == *" $p "* ]] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
