#!/usr/bin/env bash
# bench-ort.sh: optional benchmark of int8bert against ONNX Runtime 1.30 on CPU.
#
# Not part of scripts/test.sh or CI: it needs tools the project does not (see
# docs/DESIGN.md section 7.4). BERT-base shapes, random weights, batch 1, seq 128,
# one thread, both runtimes pinned to the same CPU, interleaved for ROUNDS rounds.
#
# Needs:
#   node + npm               apt-get install -y nodejs npm
#   torch 1.13, onnx 1.12    apt-get install -y python3-torch python3-onnx (Debian 12;
#                            found with /usr/bin/python3, or set PYTHON)
#   go, and oneDNN for cgo   scripts/setup.sh
#   onnxruntime-node 1.30    installed here into .build/ort/node on the first run
#                            (ONNXRUNTIME_NODE_INSTALL=skip npm install --ignore-scripts;
#                            its CPU library is bundled in the package)
#
# First run: exports the FP32 graph (scripts/ort/export.py), writes its dynamic INT8
# form (scripts/ort/quantize.py) and checks it against FP32 in ONNX Runtime (cosine
# of the last hidden state > 0.99); all cached in .build/ort. Then each round runs
# `int8bert bench model` (FP32, INT8-static, INT8-dynamic) and scripts/ort/run.js
# (FP32, INT8-dynamic), alternating which goes first, and prints a table
# (scripts/ort/table.js).
#
# usage: scripts/bench-ort.sh [-r ROUNDS] [-t MIN_TIME_S] [-c CPU] [--avx2]
#   -r ROUNDS    rounds (default 3)
#   -t SECONDS   least timing per precision, each runtime (default 3)
#   -c CPU       the CPU both are pinned to (default 0)
#   --avx2       ours on its AVX2 tier (INT8BERT_CPU_DISABLE=avx512,avxvnni
#                DNNL_MAX_CPU_ISA=AVX2); ONNX Runtime has no such cap and stays on
#                its best path, so that table is "ours on AVX2 vs ORT at its best".
set -euo pipefail

ROUNDS=3 MIN_TIME=3 PIN_CPU=0 AVX2=0 SEQ=128
while [ $# -gt 0 ]; do
  case "$1" in
    -r) ROUNDS="$2"; shift 2 ;;
    -t) MIN_TIME="$2"; shift 2 ;;
    -c) PIN_CPU="$2"; shift 2 ;;
    --avx2) AVX2=1; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-ort.sh: unknown argument $1 (see -h)" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.build/ort
mkdir -p "$CACHE"

die() { echo "bench-ort.sh: $*" >&2; exit 1; }

# --- what it needs -----------------------------------------------------------
command -v node >/dev/null || die "node is missing (apt-get install -y nodejs npm)"
command -v taskset >/dev/null || die "taskset is missing (apt-get install -y util-linux)"
command -v go >/dev/null || die "go is missing"
PYTHON_CANDIDATES=${PYTHON:-/usr/bin/python3 python3}
PYTHON=
for p in $PYTHON_CANDIDATES; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch, onnx' 2>/dev/null; then PYTHON=$p; break; fi
done
need_graphs=0
[ -f "$CACHE/fp32.onnx" ] && [ -f "$CACHE/int8.onnx" ] && [ -f "$CACHE/check.json" ] || need_graphs=1
if [ "$need_graphs" = 1 ] && [ -z "$PYTHON" ]; then
  die "torch and onnx are missing (apt-get install -y python3-torch python3-onnx; or set PYTHON)"
fi
export NODE_PATH=$CACHE/node/node_modules
if ! node -e 'require("onnxruntime-node")' 2>/dev/null; then
  command -v npm >/dev/null || die "npm is missing (apt-get install -y nodejs npm)"
  echo "installing onnxruntime-node 1.30 into $CACHE/node" >&2
  mkdir -p "$CACHE/node"
  (cd "$CACHE/node" && ONNXRUNTIME_NODE_INSTALL=skip npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30 >&2)
fi
ORT_VERSION=$(node -e 'console.log(require("onnxruntime-node").env.versions.common)' 2>/dev/null) ||
  die "onnxruntime-node does not load: its native binding (bin/napi-v*/linux/$(uname -m)) is missing?"
case "$ORT_VERSION" in 1.30.*) ;; *) echo "bench-ort.sh: warning: onnxruntime-node $ORT_VERSION, not 1.30" >&2 ;; esac

# --- the graphs, once ----------------------------------------------------------
if [ "$need_graphs" = 1 ]; then
  echo "exporting BERT-base (seq $SEQ) to ONNX (about a minute)" >&2
  (cd "$CACHE" && taskset -c "$PIN_CPU" "$PYTHON" "$ROOT/scripts/ort/export.py" fp32.tmp.onnx "$SEQ" >&2)
  (cd "$CACHE" && "$PYTHON" "$ROOT/scripts/ort/quantize.py" fp32.tmp.onnx int8.tmp.onnx >&2)
  echo "checking the INT8 graph against FP32 in ONNX Runtime" >&2
  taskset -c "$PIN_CPU" node "$ROOT/scripts/ort/run.js" --seq "$SEQ" --min-time 0 --check \
    fp32="$CACHE/fp32.tmp.onnx" int8="$CACHE/int8.tmp.onnx" >"$CACHE/check.tmp.json"
  cos=$(node -e 'console.log(require(process.argv[1]).results[1].cosine_vs_first)' "$CACHE/check.tmp.json")
  node -e 'process.exit(Number(process.argv[1]) > 0.99 ? 0 : 1)' "$cos" ||
    die "INT8 graph's cosine against FP32 is $cos (<= 0.99): quantize.py is wrong"
  echo "INT8 vs FP32 cosine of the last hidden state: $cos" >&2
  mv "$CACHE/fp32.tmp.onnx" "$CACHE/fp32.onnx"; mv "$CACHE/int8.tmp.onnx" "$CACHE/int8.onnx"
  mv "$CACHE/check.tmp.json" "$CACHE/check.json"
fi

# --- ours ------------------------------------------------------------------------
go build -o "$CACHE/int8bert" ./cmd/int8bert
OURS_ENV=(OMP_WAIT_POLICY=passive INT8BERT_TUNING_CACHE="$CACHE/tuning-cache")
TAG=best
if [ "$AVX2" = 1 ]; then
  OURS_ENV=(OMP_WAIT_POLICY=passive INT8BERT_TUNING_CACHE="$CACHE/tuning-cache-avx2"
    INT8BERT_CPU_DISABLE=avx512,avxvnni DNNL_MAX_CPU_ISA=AVX2)
  TAG=avx2
fi
OUT=$CACHE/results-$TAG
rm -rf "$OUT"; mkdir -p "$OUT"

ours() {
  # bench model pins its thread to the first CPU of its affinity mask: under
  # taskset -c CPU that is CPU, the one node runs on.
  env "${OURS_ENV[@]}" taskset -c "$PIN_CPU" "$CACHE/int8bert" bench model --arch bert-base \
    --seq "$SEQ" --min-time "${MIN_TIME}s" -json >"$OUT/ours-$1.json" 2>"$OUT/ours-$1.log" ||
    { cat "$OUT/ours-$1.log" >&2; die "int8bert bench model failed"; }
  grep -q "pinned to CPU $PIN_CPU" "$OUT/ours-$1.log" || die "ours did not pin to CPU $PIN_CPU (see $OUT/ours-$1.log)"
}
theirs() {
  taskset -c "$PIN_CPU" node "$ROOT/scripts/ort/run.js" --seq "$SEQ" --min-time "$MIN_TIME" \
    fp32="$CACHE/fp32.onnx" int8="$CACHE/int8.onnx" >"$OUT/ort-$1.json"
}

env "${OURS_ENV[@]}" "$CACHE/int8bert" info 2>/dev/null | grep -E '^(cpu|paths):' | sed 's/: */: /; s/^paths:/ours paths:/'
echo "pinned to CPU $PIN_CPU"
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo '+dirty'), onnxruntime-node $ORT_VERSION, ours tier: $TAG"
echo "INT8 graph check: cosine vs FP32 $(node -e 'console.log(require(process.argv[1]).results[1].cosine_vs_first.toFixed(5))' "$CACHE/check.json")"
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  if [ $((r % 2)) = 1 ]; then ours "$r"; theirs "$r"; else theirs "$r"; ours "$r"; fi
done
SEQ=$SEQ node "$ROOT/scripts/ort/table.js" "$OUT" "$ROUNDS"
if [ "$AVX2" = 1 ]; then
  echo "ours ran on its AVX2 tier; ONNX Runtime has no switch to cap its ISA and ran on its best path."
fi
echo "round files: $OUT"
