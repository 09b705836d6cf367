#!/bin/sh
# The project's main job on this machine: installs what is missing, builds the
# CLI, prints what the CPU and oneDNN offer, and benchmarks the GEMMs of BERT.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh
export PKG_CONFIG_PATH="$PWD/.build/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
mkdir -p bin
go build -o bin/int8bert ./cmd/int8bert
bin/int8bert info -peak
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} bin/int8bert bench gemm "$@"
