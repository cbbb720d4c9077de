#!/usr/bin/env bash
# Installs Ember's dependencies from Debian 12 packages.
#
#   deploy/setup.sh           everything: build, tests, references, benchmarks, deployment checks
#   deploy/setup.sh --serve   only what building and running `ember` needs (README's first command)
#
# Idempotent: packages already present are left alone; `apt-get update` runs once per call.
# Needs root (or sudo). Downloads nothing at build or run time after this.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
SERVE_ONLY=0
case "${1:-}" in
  --serve) SERVE_ONLY=1 ;;
  "") ;;
  *) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

# Building and running `ember` (deploy/build.sh --serve, deploy/demo.sh).
SERVE_PACKAGES=(
  # toolchain
  build-essential cmake pkg-config ninja-build ccache
  # actor runtime and data plane
  libcaf-dev libucx-dev ucx-utils capnproto libcapnp-dev
  # logging, config, CLI, JSON, HTTP
  libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
  # KServe v2 over gRPC (protobuf-compiler-grpc: gRPC's CMake package refuses to configure without it)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # the console's line editing (BSD-licensed editline, not GNU readline)
  libedit-dev
  # `ember model import`: the ONNX schema (onnx.proto, compiled with protoc at build time; no ONNX library is linked)
  libonnx-dev
  # matrix products (the OpenMP build follows the thread count we set)
  libopenblas-openmp-dev
  # deploy/demo.sh's requests
  curl
)

# Everything else: tests, fuzzers, references, benchmarks, deployment checks.
TEST_PACKAGES=(
  # the fuzzers (libFuzzer)
  clang libclang-rt-14-dev
  # tests
  libgtest-dev libgmock-dev
  # gRPC clients of the integration tests (stubs generated at test time with grpc_python_plugin)
  python3-grpcio python3-protobuf
  # the reference we check against and benchmark beside (run with /usr/bin/python3)
  python3 python3-torch python3-torchvision python3-numpy
  # the ONNX node tests (models, inputs, expected outputs) for the op conformance suite of issue 34;
  # the importer's own tests build their ONNX files with protobuf and torch.onnx.export
  libonnx-testdata
  # benchmark plots (bench/autoscale_replay.py)
  python3-matplotlib
  # network-namespace test clusters
  iproute2
  # deployment checks: systemd-analyze verify of deploy/systemd's units; deploy/k8s's manifests
  systemd python3-yaml
  # deploy/cluster.sh over ssh, and its test (an sshd in each network-namespace host)
  openssh-client openssh-server
)

PACKAGES=("${SERVE_PACKAGES[@]}")
if [ "$SERVE_ONLY" = 0 ]; then PACKAGES+=("${TEST_PACKAGES[@]}"); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
