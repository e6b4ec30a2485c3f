# The gateway image: `m3-gateway serve` (OpenAI API, media fetch and preprocessing, tokenizer,
# chat templates) on a Debian 12 slim runtime. Built from the repository root:
#   docker build -f docker/gateway.Dockerfile -t m3serve-gateway .
# Configuration is by environment (docker/gateway-entrypoint.sh lists the variables).

# Build stage: the same package script as development and CI, so the image compiles against
# exactly the libraries the tests ran with.
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DM3_CUDA=OFF -DM3_TESTS=OFF \
 && cmake --build /build -j "$(nproc)" --target m3-gateway

# Runtime stage: only the shared libraries m3-gateway is linked against (readelf -d NEEDED,
# mapped to their Debian 12 packages), plus CA certificates for https media URLs. apt brings
# their own dependencies. The ldd check fails the build if this list ever falls behind the
# binary.
FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libssl3 \
      libavformat59 libavcodec59 libavutil57 libswscale6 \
      libopencv-core406 libopencv-imgproc406 libopencv-imgcodecs406 \
      libjpeg62-turbo libpng16-16 libwebp7 libwebpdemux2 zlib1g \
      libpcre2-8-0 libutf8proc2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/bin/m3-gateway /usr/local/bin/m3-gateway
RUN if ldd /usr/local/bin/m3-gateway | grep "not found"; then exit 1; fi
COPY docker/gateway-entrypoint.sh /usr/local/bin/gateway-entrypoint.sh
# The bundled demo model (6 MB), so the image answers without a volume; compose mounts the
# model directory over /models/model.
COPY tests/data/demo-model/model /models/model
RUN useradd --system --no-create-home m3
USER m3
EXPOSE 8000
ENTRYPOINT ["bash", "/usr/local/bin/gateway-entrypoint.sh"]
