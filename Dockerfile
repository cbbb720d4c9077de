# Ember's container image: Debian 12 (the distribution Ember is built and tested on), the Debian
# packages the ember binary links, the binary, and on GPU builds its CUDA plugin with cuBLAS.
#
# It packages the binary deploy/build.sh built on this (Debian 12) host rather than building inside
# the image: the CUDA toolkit Ember compiles against (nvcc 13, /usr/local/cuda) is not a Debian
# package. deploy/image.sh stages the plugin and cuBLAS and runs `docker build`:
#   deploy/build.sh && deploy/image.sh ember:0.1.0
# The NVIDIA container toolkit injects the driver (libcuda) into GPU pods; nothing else is needed.
FROM debian:12-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libcaf-core0.17 libcaf-io0.17 libcaf-openssl0.17 libucx0 libcapnp-0.9.2 libspdlog1.10 libfmt9 \
      libyaml-cpp0.7 libcpp-httplib0.11 libgrpc++1.51 libprotobuf32 libedit2 libopenblas0-openmp libgomp1 \
      libssl3 libpcre2-8-0 libutf8proc2 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/ember --create-home ember

COPY build/bin/ember /usr/local/bin/ember
# The CUDA plugin (found at ../lib/ember beside the binary) and cuBLAS; empty on a CPU-only build.
COPY build/image/lib/ /usr/local/lib/ember/
ENV LD_LIBRARY_PATH=/usr/local/lib/ember

USER ember
WORKDIR /var/lib/ember
# KServe v2 over HTTP, gRPC, metrics (Triton's ports); manager control and repository data; node
# control and data.
EXPOSE 8000 8001 8002 7070 7071 7201 7301
ENTRYPOINT ["/usr/local/bin/ember"]
CMD ["serve", "--repository", "/models", "--http", "0.0.0.0:8000", "--grpc", "0.0.0.0:8001", "--metrics", "0.0.0.0:8002"]
