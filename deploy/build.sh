#!/usr/bin/env bash
# Configures and builds Ember (Release, Ninja, ccache when installed) into build/ (or $EMBER_BUILD_DIR).
# Extra arguments go to CMake, e.g. deploy/build.sh -DEMBER_CUDA=OFF. Safe to run again: it rebuilds
# only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${EMBER_BUILD_DIR:-build}
JOBS=${EMBER_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD_DIR" -j "$JOBS"
