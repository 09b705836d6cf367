// run.js: times ONNX Runtime (the npm package onnxruntime-node) on ONNX graphs.
//
// Part of scripts/bench-ort.sh. For each graph given: one session with
// intraOpNumThreads THREADS (the calling thread and THREADS-1 pool threads),
// interOpNumThreads 1, sequential execution and all graph optimizations;
// inputs of BATCH sequences of SEQ tokens (input_ids from a fixed seed, each
// row its own, [CLS] first and [SEP] last; attention_mask all ones); warm-up
// runs (at least one, up to 3 or 1 s), then runs until MIN_TIME seconds have
// passed (at least 3), and their median, minimum and maximum. Prints one JSON
// object. The caller pins the process (taskset -c CPUS); ONNX Runtime sets no
// affinity of its own, so with 2 threads both float over the CPUs given.
//
// usage: node run.js [--batch B] [--seq N] [--threads T] [--min-time S] [--check]
//                    NAME=GRAPH.onnx ...
// --check: also prints the cosine similarity of each graph's last hidden state
// against the first graph's (the FP32 one), on the same input.
'use strict';
const ort = require('onnxruntime-node');

function inputs(batch, seq) {
  const ids = new BigInt64Array(batch * seq);
  let s = 12345;
  for (let b = 0; b < batch; b++) {
    for (let i = 0; i < seq; i++) {
      s = (s * 1103515245 + 12345) % 2147483648;
      ids[b * seq + i] = BigInt(1000 + (s % 29000));
    }
    ids[b * seq] = 101n; // [CLS]
    ids[b * seq + seq - 1] = 102n; // [SEP]
  }
  return {
    input_ids: new ort.Tensor('int64', ids, [batch, seq]),
    attention_mask: new ort.Tensor('int64', new BigInt64Array(batch * seq).fill(1n), [batch, seq]),
  };
}

function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
}

const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;

async function main() {
  const args = process.argv.slice(2);
  let minTime = 3, seq = 128, batch = 1, threads = 1, check = false;
  const graphs = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--min-time') minTime = Number(args[++i]);
    else if (args[i] === '--seq') seq = Number(args[++i]);
    else if (args[i] === '--batch') batch = Number(args[++i]);
    else if (args[i] === '--threads') threads = Number(args[++i]);
    else if (args[i] === '--check') check = true;
    else if (args[i].includes('=')) { const j = args[i].indexOf('='); graphs.push([args[i].slice(0, j), args[i].slice(j + 1)]); }
    else throw new Error(`unknown argument ${args[i]}`);
  }
  for (const [k, v] of [['--batch', batch], ['--seq', seq], ['--threads', threads]]) {
    if (!Number.isInteger(v) || v < 1) throw new Error(`${k} must be a positive integer`);
  }
  const opts = {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  };
  const out = { ort_version: ort.env.versions.common, threads, batch, seq, results: [] };
  let ref = null;
  const feeds = inputs(batch, seq);
  for (const [name, path] of graphs) {
    const t0 = process.hrtime.bigint();
    const sess = await ort.InferenceSession.create(path, opts);
    const loadS = seconds(t0);
    const w0 = process.hrtime.bigint();
    let warm = 0;
    do { await sess.run(feeds); warm++; } while (warm < 3 && seconds(w0) < 1);
    const times = [];
    const start = process.hrtime.bigint();
    while (times.length < 3 || seconds(start) < minTime) {
      const a = process.hrtime.bigint();
      await sess.run(feeds);
      times.push(Number(process.hrtime.bigint() - a) / 1e6);
    }
    const sorted = [...times].sort((x, y) => x - y);
    // The upper median for an even count, as ours (bench.SpreadOf).
    const ms = sorted[Math.floor(sorted.length / 2)];
    const r = {
      graph: name, batch, seq, threads, ms_per_batch: ms, seq_per_s: 1000 * batch / ms,
      min_ms: sorted[0], max_ms: sorted[sorted.length - 1], runs: times.length, warmup_runs: warm,
      load_s: loadS, passes_ms: times,
    };
    if (check) {
      const y = (await sess.run(feeds)).last_hidden_state;
      if (y.dims.join(',') !== [batch, seq, 768].join(',')) throw new Error(`${name}: output shape ${y.dims}`);
      if (ref === null) ref = y.data; else r.cosine_vs_first = cosine(ref, y.data);
    }
    out.results.push(r);
    await sess.release();
  }
  console.log(JSON.stringify(out, null, 2));
}

main().catch((e) => { console.error('run.js: ' + (e && e.stack || e)); process.exit(1); });
