#!/usr/bin/env bash
# Builds Ember's container image (Dockerfile) from this host's build: run deploy/build.sh first.
# Stages the CUDA plugin and the cuBLAS it loads (when the build has them) into build/image/lib,
# then runs `docker build`. Usage: deploy/image.sh [TAG]   (default ember:latest)
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-ember:latest}"
[ -x build/bin/ember ] || { echo "image.sh: build/bin/ember is missing: run deploy/build.sh first" >&2; exit 1; }
rm -rf build/image && mkdir -p build/image/lib
if [ -f build/bin/libember_cuda.so ]; then
  cp build/bin/libember_cuda.so build/image/lib/
  # cuBLAS as the plugin resolves it on this host (ldd), copied with its real contents.
  ldd build/bin/libember_cuda.so | awk '/libcublas/ {print $3}' | while read -r lib; do cp -L "$lib" build/image/lib/; done
fi
docker build -t "$tag" -f Dockerfile .
echo "image.sh: built $tag"
