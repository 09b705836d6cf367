#!/bin/sh
# The project's main job: installs what is missing, builds the CLI, reports
# what the CPU and oneDNN offer, then quantizes a small real SST-2 model that
# ships in assets/ (or the Hugging Face model given as the first argument,
# downloaded when not cached) with SmoothQuant, and compares FP32, INT8-static
# and INT8-dynamic: predictions, SST-2 dev accuracy and speed.
#
#   scripts/demo.sh                      # assets/sst2-xlmr-mini, no download
#   scripts/demo.sh distilbert-base-uncased-finetuned-sst-2-english
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh
export PKG_CONFIG_PATH="$PWD/.build/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
mkdir -p bin
go build -o bin/int8bert ./cmd/int8bert
bin/int8bert info
if [ $# -gt 0 ]; then
	model=$1
	shift
	exec bin/int8bert demo --model "$model" "$@"
fi
exec bin/int8bert demo
