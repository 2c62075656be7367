#!/usr/bin/env bash
# Installs every Debian package corescape needs to build, test and run its demo.
# Idempotent: packages already present are skipped, so a second run is a no-op.
set -euo pipefail

PACKAGES=(
  # build
  bazel-bootstrap g++ protobuf-compiler protobuf-compiler-grpc
  libgrpc++-dev libprotobuf-dev libabsl-dev libgoogle-glog-dev libgflags-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  libucx-dev ucx-utils libopenblas-dev libsqlite3-dev libssl-dev
  # fuzzing (libFuzzer) and sanitizer builds
  clang-14 libfuzzer-14-dev
  # tests: an independent gRPC client, process tools
  python3 python3-grpcio python3-protobuf procps iproute2
  # model reference checks (PyTorch, CPU) and the demo corpus
  python3-torch fortunes
  # deployment: the container image, systemd units, Kubernetes manifests
  buildah podman systemd python3-yaml python3-seccomp
  # operations: metrics, the status page, and the real Prometheus and Chromium its tests drive
  prometheus-cpp-dev libcpp-httplib-dev prometheus chromium
)
# Commands that other packages may already provide (a newer kubectl, a
# NodeSource node with its own npm): installed from Debian only if missing.
declare -A COMMAND_PACKAGES=([kubectl]=kubernetes-client [node]=nodejs [npm]=npm)
# The Kubernetes API schemas for the manifests' offline validation, in the
# checkout (git ignores .cache/).
readonly NODE_PACKAGES=(kubernetes-models@4.5.1)
readonly NODE_PREFIX="$(cd "$(dirname "$0")/.." && pwd)/.cache/node"

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
for command in "${!COMMAND_PACKAGES[@]}"; do
  command -v "$command" > /dev/null || missing+=("${COMMAND_PACKAGES[$command]}")
done

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "setup: done"
fi

# Debian's kubectl 1.20 (kustomize 2.0.3) beside a newer kubectl, unpacked
# into the checkout: the manifests test renders with both.
readonly LEGACY_KUBECTL_DIR="$(dirname "$NODE_PREFIX")/kubernetes-client"
if ! kubectl version --client 2> /dev/null | grep -q 'v1\.20\.' &&
   [[ ! -x $LEGACY_KUBECTL_DIR/usr/bin/kubectl ]]; then
  echo "setup: unpacking Debian's kubernetes-client into $LEGACY_KUBECTL_DIR"
  download="$(mktemp -d)"
  (cd "$download" && { apt-get download -qq kubernetes-client 2> /dev/null ||
                       { $SUDO apt-get update -qq && apt-get download -qq kubernetes-client; }; })
  mkdir -p "$LEGACY_KUBECTL_DIR"
  dpkg-deb -x "$download"/kubernetes-client_*.deb "$LEGACY_KUBECTL_DIR"
  rm -rf "$download"
fi

node_missing=()
for p in "${NODE_PACKAGES[@]}"; do
  [[ -d $NODE_PREFIX/node_modules/${p%@*} ]] || node_missing+=("$p")
done
if ((${#node_missing[@]} > 0)); then
  echo "setup: installing npm packages into $NODE_PREFIX: ${node_missing[*]}"
  mkdir -p "$NODE_PREFIX"
  npm install --prefix "$NODE_PREFIX" --no-audit --no-fund --loglevel=error "${node_missing[@]}"
fi
