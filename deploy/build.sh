#!/usr/bin/env bash
# Configures and builds Ember (Release, Ninja, ccache when installed) into build/ (or $EMBER_BUILD_DIR).
#
#   deploy/build.sh [CMAKE_ARGS...]           everything: `ember`, the CUDA plugin when nvcc is
#                                             found, every test, benchmark and fuzzer
#   deploy/build.sh --serve [CMAKE_ARGS...]   only what `ember` serves with: the binary, and the
#                                             CUDA plugin when this host has an NVIDIA GPU
#
# Extra arguments go to CMake, e.g. deploy/build.sh -DEMBER_CUDA=OFF. Safe to run again: it rebuilds
# only what changed, and a full build after a --serve one reuses what that built.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${EMBER_BUILD_DIR:-build}
JOBS=${EMBER_JOBS:-$(nproc)}
if [ "${1:-}" = "--serve" ]; then
  shift
  # Tests and benchmarks are not configured: their dependencies (GoogleTest, clang's libFuzzer) may
  # be absent after `deploy/setup.sh --serve`.
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DEMBER_BENCH=OFF "$@"
  targets=(ember)
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
     cmake --build "$BUILD_DIR" --target help | grep -q '^ember_cuda:'; then
    targets+=(ember_cuda)
  fi
  cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
  exit 0
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DEMBER_BENCH=ON "$@"
cmake --build "$BUILD_DIR" -j "$JOBS"
