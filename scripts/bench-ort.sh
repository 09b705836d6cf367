#!/usr/bin/env bash
# bench-ort.sh: optional benchmark of int8bert against ONNX Runtime 1.30 on CPU.
#
# Not part of scripts/test.sh or CI: it needs tools the project does not (see
# docs/DESIGN.md section 7.4). BERT-base shapes, random weights, on a grid of
# cells (batch x seq x threads; default batch 1, 8 and 32, seq 32 and 128, 1 and
# 2 threads: 12 cells), both runtimes on the same CPUs, interleaved cell by cell
# for ROUNDS rounds. The target (issue 30) is ours INT8 at 1.5x ONNX Runtime's
# dynamic INT8 or more in every cell, median of rounds.
#
# Needs:
#   node + npm               apt-get install -y nodejs npm (NodeSource's nodejs
#                            bundles npm)
#   torch 1.13, onnx 1.12    apt-get install -y python3-torch python3-onnx (Debian 12;
#                            found with /usr/bin/python3, or set PYTHON)
#   go, and oneDNN for cgo   scripts/setup.sh
#   onnxruntime-node 1.30    installed here into .build/ort/node on the first run
#                            (ONNXRUNTIME_NODE_INSTALL=skip npm install --ignore-scripts;
#                            its CPU library is bundled in the package)
#
# First run: exports the FP32 graph with dynamic batch and seq axes
# (scripts/ort/export.py), writes its dynamic INT8 form (scripts/ort/quantize.py)
# and checks both in ONNX Runtime at batch 1 x seq 128 and batch 3 x seq 40 (the
# INT8 last hidden state's cosine against FP32 > 0.99); cached in
# .build/ort/graphs-KEY, KEY a hash of export.py and quantize.py, so a change to
# either (or the old fixed-shape graphs) is never reused. Then each round runs,
# for each cell, `int8bert bench model` (FP32, INT8-static, INT8-dynamic) and
# scripts/ort/run.js (FP32, INT8-dynamic) next to each other, alternating which
# goes first from cell to cell and from round to round, and scripts/ort/table.js
# prints one row per cell (ms, ratios per round and their median) and writes
# all of it to .build/ort/results-TIER/bench-ort.json.
#
# Threads: a 1-thread cell runs both under taskset -c FIRST_CPU (bench model
# pins its thread to that CPU and says so; the run stops if it did not); a
# 2-thread cell runs both under taskset -c FIRST_TWO_CPUS, ours with --threads 2
# (bench model pins no thread then: its workers stay within the two CPUs),
# ONNX Runtime with intraOpNumThreads 2 and one inter-op thread (no affinity of
# its own). Ours runs with OMP_WAIT_POLICY=passive (oneDNN's OpenMP, FP32).
#
# usage: scripts/bench-ort.sh [-b BATCHES] [-s SEQS] [-T THREADS] [-r ROUNDS]
#                             [-t MIN_TIME_S] [-c CPUS] [--avx2]
#   -b BATCHES   comma-separated batch sizes (default 1,8,32)
#   -s SEQS      comma-separated sequence lengths, at most 512 (default 32,128)
#   -T THREADS   comma-separated thread counts (default 1,2)
#   -r ROUNDS    rounds (default 3)
#   -t SECONDS   least timing per precision, each runtime, each cell (default 3)
#   -c CPUS      comma-separated CPUs (ranges A-B allowed); a T-thread cell runs
#                on the first T of them (default 0,1)
#   --avx2       ours on its AVX2 tier (INT8BERT_CPU_DISABLE=avx512,avxvnni
#                DNNL_MAX_CPU_ISA=AVX2); ONNX Runtime has no such cap and stays on
#                its best path, so that table is "ours on AVX2 vs ORT at its best".
# A small check of the whole path: scripts/bench-ort.sh -r 1 -t 0.3 -b 1,8 -s 32 -T 1
set -euo pipefail

BATCHES=1,8,32 SEQS=32,128 THREADS=1,2 ROUNDS=3 MIN_TIME=3 CPUS=0,1 AVX2=0
while [ $# -gt 0 ]; do
  case "$1" in
    -b) BATCHES="$2"; shift 2 ;;
    -s) SEQS="$2"; shift 2 ;;
    -T) THREADS="$2"; shift 2 ;;
    -r) ROUNDS="$2"; shift 2 ;;
    -t) MIN_TIME="$2"; shift 2 ;;
    -c) CPUS="$2"; shift 2 ;;
    --avx2) AVX2=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-ort.sh: unknown argument $1 (see -h)" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.build/ort
mkdir -p "$CACHE"

die() { echo "bench-ort.sh: $*" >&2; exit 1; }

# --- the grid and the CPUs -------------------------------------------------------
# list ARRAY FLAG VALUE MAX: ARRAY gets VALUE's comma-separated positive
# integers, each at most MAX.
list() {
  local -n arr=$1
  local v
  arr=()
  for v in ${3//,/ }; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] && [ "$v" -le "$4" ] || die "$2: $v is not an integer in 1..$4"
    arr+=("$v")
  done
}
list B_LIST -b "$BATCHES" 4096
list S_LIST -s "$SEQS" 512
list T_LIST -T "$THREADS" 1024
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "-r: $ROUNDS is not a positive integer"
[[ "$MIN_TIME" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "-t: $MIN_TIME is not a number of seconds"
[ ${#B_LIST[@]} -gt 0 ] && [ ${#S_LIST[@]} -gt 0 ] && [ ${#T_LIST[@]} -gt 0 ] || die "an empty -b, -s or -T"
CPU_LIST=()
for c in ${CPUS//,/ }; do
  if [[ "$c" =~ ^([0-9]+)-([0-9]+)$ ]]; then
    for ((k = BASH_REMATCH[1]; k <= BASH_REMATCH[2]; k++)); do CPU_LIST+=("$k"); done
  elif [[ "$c" =~ ^[0-9]+$ ]]; then CPU_LIST+=("$c")
  else die "-c: $c is not a CPU number or range"; fi
done
MAX_T=$(printf '%s\n' "${T_LIST[@]}" | sort -n | tail -1)
[ ${#CPU_LIST[@]} -ge "$MAX_T" ] ||
  die "-c $CPUS gives ${#CPU_LIST[@]} CPU(s), -T $THREADS needs $MAX_T: give more CPUs (-c 0,1) or fewer threads (-T 1)"
# cpus_for T: the first T CPUs of -c, comma-separated.
cpus_for() { local IFS=,; echo "${CPU_LIST[*]:0:$1}"; }
CELLS=()
for t in "${T_LIST[@]}"; do for b in "${B_LIST[@]}"; do for q in "${S_LIST[@]}"; do
  CELLS+=("b$b-s$q-t$t")
done; done; done

# --- what it needs -----------------------------------------------------------
command -v node >/dev/null || die "node is missing (apt-get install -y nodejs npm)"
command -v taskset >/dev/null || die "taskset is missing (apt-get install -y util-linux)"
command -v go >/dev/null || die "go is missing"
for c in "${CPU_LIST[@]:0:$MAX_T}"; do
  taskset -c "$c" true 2>/dev/null || die "cannot run on CPU $c (taskset -c $c); see -c"
done
# The graphs' cache key: what writes them. A change to either script, or the
# fixed-shape graphs of before (.build/ort/{fp32,int8}.onnx), is never reused.
KEY=$(cat scripts/ort/export.py scripts/ort/quantize.py | sha256sum | cut -c1-12)
GRAPHS=$CACHE/graphs-$KEY
for old in "$CACHE"/fp32.onnx "$CACHE"/int8.onnx "$CACHE"/check.json "$CACHE"/graphs-*; do
  [ -e "$old" ] && [ "$old" != "$GRAPHS" ] || continue
  echo "removing $old (graphs of another export.py or quantize.py)" >&2
  rm -rf "$old"
done
PYTHON_CANDIDATES=${PYTHON:-/usr/bin/python3 python3}
PYTHON=
for p in $PYTHON_CANDIDATES; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch, onnx' 2>/dev/null; then PYTHON=$p; break; fi
done
need_graphs=0
[ -f "$GRAPHS/fp32.onnx" ] && [ -f "$GRAPHS/int8.onnx" ] && [ -f "$GRAPHS/check.json" ] || need_graphs=1
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
FIRST_CPU=${CPU_LIST[0]}
if [ "$need_graphs" = 1 ]; then
  rm -rf "$GRAPHS.tmp"; mkdir -p "$GRAPHS.tmp"
  echo "exporting BERT-base (dynamic batch and seq) to ONNX (about a minute)" >&2
  (cd "$GRAPHS.tmp" && taskset -c "$FIRST_CPU" "$PYTHON" "$ROOT/scripts/ort/export.py" fp32.onnx >&2)
  (cd "$GRAPHS.tmp" && "$PYTHON" "$ROOT/scripts/ort/quantize.py" fp32.onnx int8.onnx >&2)
  echo "checking the INT8 graph against FP32 in ONNX Runtime at batch 1 x seq 128 and batch 3 x seq 40" >&2
  for shape in 1x128 3x40; do
    taskset -c "$FIRST_CPU" node "$ROOT/scripts/ort/run.js" --batch "${shape%x*}" --seq "${shape#*x}" \
      --min-time 0 --check fp32="$GRAPHS.tmp/fp32.onnx" int8="$GRAPHS.tmp/int8.onnx" >"$GRAPHS.tmp/check-$shape.json"
    cos=$(node -e 'console.log(require(process.argv[1]).results[1].cosine_vs_first)' "$GRAPHS.tmp/check-$shape.json")
    node -e 'process.exit(Number(process.argv[1]) > 0.99 ? 0 : 1)' "$cos" ||
      die "INT8 graph's cosine against FP32 at $shape is $cos (<= 0.99): quantize.py is wrong"
    echo "INT8 vs FP32 cosine of the last hidden state at $shape: $cos" >&2
  done
  node -e 'const [d, ...s] = process.argv.slice(1); const o = {};
    for (const x of s) o[x] = require(`${d}/check-${x}.json`).results[1].cosine_vs_first;
    console.log(JSON.stringify({ cosine_int8_vs_fp32: o }))' "$GRAPHS.tmp" 1x128 3x40 >"$GRAPHS.tmp/check.json"
  rm -rf "$GRAPHS"; mv "$GRAPHS.tmp" "$GRAPHS"
fi
CHECK=$(node -e 'const c = require(process.argv[1]).cosine_int8_vs_fp32;
  console.log(Object.entries(c).map(([k, v]) => `${k} ${v.toFixed(5)}`).join(", "))' "$GRAPHS/check.json")

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

# ours CELL ROUND B S T: one `bench model` of the cell.
ours() {
  local f=$OUT/$1/ours-$2 cpus
  cpus=$(cpus_for "$5")
  env "${OURS_ENV[@]}" taskset -c "$cpus" "$CACHE/int8bert" bench model --arch bert-base \
    --batch "$3" --seq "$4" --threads "$5" --min-time "${MIN_TIME}s" -json >"$f.json" 2>"$f.log" ||
    { cat "$f.log" >&2; die "int8bert bench model failed ($1, round $2)"; }
  # With one thread bench model pins it to the first CPU of its mask, the
  # one node runs on; with more it pins none (taskset bounds them).
  if [ "$5" = 1 ]; then
    grep -q "pinned to CPU $cpus" "$f.log" || die "ours did not pin to CPU $cpus (see $f.log)"
  fi
}
# theirs CELL ROUND B S T: one run.js of the cell.
theirs() {
  taskset -c "$(cpus_for "$5")" node "$ROOT/scripts/ort/run.js" --batch "$3" --seq "$4" --threads "$5" \
    --min-time "$MIN_TIME" fp32="$GRAPHS/fp32.onnx" int8="$GRAPHS/int8.onnx" >"$OUT/$1/ort-$2.json" ||
    die "run.js failed ($1, round $2)"
}

COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo '+dirty')"
INFO=$(env "${OURS_ENV[@]}" "$CACHE/int8bert" info 2>/dev/null | grep -E '^(cpu|paths):' | sed 's/: */: /; s/^paths:/ours paths:/' || true)
echo "$INFO"
echo "CPUs: $(cpus_for "$MAX_T") (a T-thread cell on the first T)"
echo "commit: $COMMIT, onnxruntime-node $ORT_VERSION, ours tier: $TAG"
echo "INT8 graph check, cosine vs FP32: $CHECK"
echo "grid: batch $BATCHES x seq $SEQS x threads $THREADS = ${#CELLS[@]} cells, $ROUNDS round(s), ${MIN_TIME}s per precision:" \
  "at least $(node -e 'console.log(Math.ceil(process.argv[1] * process.argv[2] * 5 * process.argv[3] / 60))' \
  "${#CELLS[@]}" "$ROUNDS" "$MIN_TIME") min of timing, plus loads, warm-ups and first-time tuning"
INFO="$INFO" COMMIT="$COMMIT" ORT_VERSION="$ORT_VERSION" TAG="$TAG" CPUS_USED="$(cpus_for "$MAX_T")" \
  BATCHES="$BATCHES" SEQS="$SEQS" THREADS="$THREADS" ROUNDS="$ROUNDS" MIN_TIME="$MIN_TIME" \
  node -e 'const e = process.env; console.log(JSON.stringify({
    date: new Date().toISOString(), commit: e.COMMIT, onnxruntime_node: e.ORT_VERSION, ours_tier: e.TAG,
    info: e.INFO.split("\n").filter(Boolean), cpus: e.CPUS_USED, batches: e.BATCHES, seqs: e.SEQS,
    threads: e.THREADS, rounds: Number(e.ROUNDS), min_time_s: Number(e.MIN_TIME),
    graph_check: require(process.argv[1]) }, null, 2))' "$GRAPHS/check.json" >"$OUT/meta.json"

for cell in "${CELLS[@]}"; do mkdir -p "$OUT/$cell"; done
for r in $(seq 1 "$ROUNDS"); do
  i=0
  for cell in "${CELLS[@]}"; do
    b=${cell#b}; b=${b%%-*}; q=${cell#*-s}; q=${q%%-*}; t=${cell##*-t}
    i=$((i + 1))
    echo "round $r/$ROUNDS, cell $i/${#CELLS[@]}: batch $b, seq $q, $t thread(s)" >&2
    # Which runtime goes first alternates from cell to cell and round to round.
    if [ $(((r + i) % 2)) = 0 ]; then
      echo '{"first":"ours"}' >"$OUT/$cell/order-$r.json"
      ours "$cell" "$r" "$b" "$q" "$t"; theirs "$cell" "$r" "$b" "$q" "$t"
    else
      echo '{"first":"ort"}' >"$OUT/$cell/order-$r.json"
      theirs "$cell" "$r" "$b" "$q" "$t"; ours "$cell" "$r" "$b" "$q" "$t"
    fi
  done
done
node "$ROOT/scripts/ort/table.js" "$OUT" "$ROUNDS" "$OUT/bench-ort.json" "${CELLS[@]}" | tee "$OUT/table.md"
if [ "$AVX2" = 1 ]; then
  echo "ours ran on its AVX2 tier; ONNX Runtime has no switch to cap its ISA and ran on its best path."
fi
echo "round files: $OUT; all of it as JSON: $OUT/bench-ort.json"
