# The engine image: `m3-engine serve` (vision tower, projector, MSA sparse-attention MoE decoder;
# gRPC) with the CUDA backend. Built from the repository root:
#   docker build -f docker/engine.Dockerfile -t m3serve-engine .
# Configuration is by environment (docker/engine-entrypoint.sh lists the variables).
#
# Base images: NVIDIA publishes its CUDA images on Ubuntu (and RHEL-family) bases only, none on
# Debian, so the engine builds in the CUDA 13 devel image and runs in the matching runtime image
# (cudart and cuBLAS; the GPU machine the CUDA backend is tested on runs CUDA 13). Ubuntu 24.04
# is the newest base of that release and ships the same gRPC 1.51 / protobuf 3.21 as Debian 12.
# The engine needs none of the gateway's media or text libraries, so the package lists below are
# the engine's alone (M3_GATEWAY=OFF). CUDA_ARCHS defaults to Hopper (H100/H200), as in CMake.
ARG CUDA_VERSION=13.0.1
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
ARG CUDA_ARCHS=90
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      cmake ninja-build pkg-config g++ ca-certificates \
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
      nlohmann-json3-dev libopenblas-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DM3_CUDA=ON -DM3_GATEWAY=OFF \
      -DM3_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS}" \
 && cmake --build /build -j "$(nproc)" --target m3-engine

# Runtime stage: the CUDA runtime image (libcudart is linked statically, cuBLAS comes with the
# image) and the engine's other shared libraries: gRPC, protobuf, OpenBLAS (CPU backend).
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgrpc++1.51t64 libprotobuf32t64 libopenblas0 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/bin/m3-engine /usr/local/bin/m3-engine
RUN if ldd /usr/local/bin/m3-engine | grep "not found"; then exit 1; fi
COPY docker/engine-entrypoint.sh /usr/local/bin/engine-entrypoint.sh
COPY tests/data/demo-model/model /models/model
RUN useradd --system --no-create-home m3
USER m3
EXPOSE 50051
ENTRYPOINT ["bash", "/usr/local/bin/engine-entrypoint.sh"]
