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
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
