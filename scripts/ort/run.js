// run.js: times ONNX Runtime (the npm package onnxruntime-node) on ONNX graphs.
//
// Part of scripts/bench-ort.sh. For each graph given: one session with
// intraOpNumThreads 1, interOpNumThreads 1, sequential execution and all graph
// optimizations; batch-1 inputs of --seq tokens (128; input_ids from a
// fixed seed, attention_mask all ones); warm-up runs, then runs until MIN_TIME
// seconds have passed (at least 3), and the median. Prints one JSON object.
// The caller pins the process (taskset -c CPU).
//
// usage: node run.js [--seq N] [--min-time S] [--check] NAME=GRAPH.onnx ...
// --check: also prints the cosine similarity of each graph's last hidden state
// against the first graph's (the FP32 one), on the same input.
'use strict';
const ort = require('onnxruntime-node');

function inputs(seq) {
  const ids = new BigInt64Array(seq);
  let s = 12345;
  for (let i = 0; i < seq; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    ids[i] = BigInt(1000 + (s % 29000));
  }
  ids[0] = 101n; // [CLS]
  ids[seq - 1] = 102n; // [SEP]
  return {
    input_ids: new ort.Tensor('int64', ids, [1, seq]),
    attention_mask: new ort.Tensor('int64', new BigInt64Array(seq).fill(1n), [1, seq]),
  };
}

function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
}

async function main() {
  const args = process.argv.slice(2);
  let minTime = 3, seq = 128, check = false;
  const graphs = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--min-time') minTime = Number(args[++i]);
    else if (args[i] === '--seq') seq = Number(args[++i]);
    else if (args[i] === '--check') check = true;
    else { const j = args[i].indexOf('='); graphs.push([args[i].slice(0, j), args[i].slice(j + 1)]); }
  }
  const opts = {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  };
  const out = { ort_version: ort.env.versions.common, threads: 1, batch: 1, results: [] };
  let ref = null;
  for (const [name, path] of graphs) {
    const t0 = process.hrtime.bigint();
    const sess = await ort.InferenceSession.create(path, opts);
    const loadS = Number(process.hrtime.bigint() - t0) / 1e9;
    const feeds = inputs(seq);
    for (let i = 0; i < 3; i++) await sess.run(feeds); // warm-up
    const times = [];
    const start = process.hrtime.bigint();
    while (times.length < 3 || Number(process.hrtime.bigint() - start) / 1e9 < minTime) {
      const a = process.hrtime.bigint();
      await sess.run(feeds);
      times.push(Number(process.hrtime.bigint() - a) / 1e6);
    }
    times.sort((x, y) => x - y);
    const ms = times[Math.floor(times.length / 2)];
    const r = { graph: name, seq, ms_per_batch: ms, seq_per_s: 1000 / ms, runs: times.length, load_s: loadS };
    if (check) {
      const y = (await sess.run(feeds)).last_hidden_state.data;
      if (ref === null) ref = y; else r.cosine_vs_first = cosine(ref, y);
    }
    out.results.push(r);
    await sess.release();
  }
  console.log(JSON.stringify(out, null, 2));
}

main().catch((e) => { console.error('run.js: ' + (e && e.stack || e)); process.exit(1); });
