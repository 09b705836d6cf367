// table.js: prints the comparison table of scripts/bench-ort.sh and writes its JSON.
//
// Reads the round files the driver wrote, one folder per cell (bB-sS-tT:
// ours-R.json from `int8bert bench model -json`, ort-R.json from run.js) and
// meta.json in DIR, and prints one row per cell (batch, seq, threads): the ms
// per batch of ours INT8-static, ours INT8-dynamic, ONNX Runtime's dynamic INT8,
// ONNX Runtime's FP32 and ours FP32, each the median over rounds of that
// round's median pass, with the min-max over rounds; then ORT-INT8/ours-INT8-
// dynamic and ORT-INT8/ours-INT8-static (times, so above 1 ours is faster),
// each taken within a round (the two ran next to each other) and listed per
// round, then their median. A median below TARGET (1.5x, the goal of issue 30)
// is marked "<". A "~" marks a figure that was noisy in some round: ours as
// `bench model` judged it (spread of its passes over 15% of their median, or
// its peak loop moved over 10%), ONNX Runtime's by the same spread rule.
// Everything (meta, every round's figures and spreads, ours' linear, attention
// and other ms of the median pass, the medians and ratios) goes to JSON_OUT.
//
// usage: node table.js DIR ROUNDS JSON_OUT CELL...   (CELL: bB-sS-tT)
'use strict';
const fs = require('fs');
const path = require('path');

const TARGET = 1.5;
const NOISY_SPREAD = 0.15; // bench.NoisySpread
const [dir, rounds, jsonOut, ...cells] = [process.argv[2], Number(process.argv[3]), process.argv[4], ...process.argv.slice(5)];
if (!dir || !(rounds >= 1) || !jsonOut || cells.length === 0) {
  console.error('usage: node table.js DIR ROUNDS JSON_OUT CELL...');
  process.exit(2);
}
const read = (f) => JSON.parse(fs.readFileSync(f));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const meta = fs.existsSync(path.join(dir, 'meta.json')) ? read(path.join(dir, 'meta.json')) : {};

// The columns: [key, header, where it comes from].
const COLS = [
  ['ours_int8_static', 'ours INT8-s', 'ours', 'int8-static'],
  ['ours_int8_dynamic', 'ours INT8-d', 'ours', 'int8-dynamic'],
  ['ort_int8_dynamic', 'ORT INT8-d', 'ort', 'int8'],
  ['ort_fp32', 'ORT FP32', 'ort', 'fp32'],
  ['ours_fp32', 'ours FP32', 'ours', 'fp32'],
];
const RATIOS = [
  ['ort_int8_over_ours_int8_dynamic', 'ORT-INT8/ours-d', 'ours_int8_dynamic'],
  ['ort_int8_over_ours_int8_static', 'ORT-INT8/ours-s', 'ours_int8_static'],
];

const report = { meta, target: TARGET, rounds, cells: [] };
for (const name of cells) {
  const m = /^b(\d+)-s(\d+)-t(\d+)$/.exec(name);
  if (!m) throw new Error(`cell ${name}: want bB-sS-tT`);
  const cell = { batch: Number(m[1]), seq: Number(m[2]), threads: Number(m[3]), rounds: [] };
  for (let r = 1; r <= rounds; r++) {
    const ours = read(path.join(dir, name, `ours-${r}.json`));
    const ort = read(path.join(dir, name, `ort-${r}.json`));
    for (const [who, x] of [['ours', ours], ['ORT', ort]]) {
      if (x.batch !== cell.batch || x.seq !== cell.seq || x.threads !== cell.threads) {
        throw new Error(`${name} round ${r}: ${who} ran batch ${x.batch}, seq ${x.seq}, ${x.threads} thread(s)`);
      }
    }
    const round = { round: r, first: read(path.join(dir, name, `order-${r}.json`)).first };
    for (const [key, , side, prec] of COLS) {
      if (side === 'ours') {
        const x = ours.results.find((y) => y.precision === prec);
        if (!x) throw new Error(`${name} round ${r}: ours has no ${prec}`);
        round[key] = { ms: x.ms_per_batch, min_ms: x.spread.min_ms, max_ms: x.spread.max_ms, passes: x.passes,
          noisy: !!(x.noise && x.noise.noisy), noise: x.noise,
          linear_ms: x.linear_ms, attention_ms: x.attention_ms, other_ms: x.other_ms };
      } else {
        const x = ort.results.find((y) => y.graph === prec);
        if (!x) throw new Error(`${name} round ${r}: ORT has no ${prec}`);
        round[key] = { ms: x.ms_per_batch, min_ms: x.min_ms, max_ms: x.max_ms, passes: x.runs,
          noisy: (x.max_ms - x.min_ms) / x.ms_per_batch > NOISY_SPREAD };
      }
    }
    for (const [key, , of] of RATIOS) round[key] = round.ort_int8_dynamic.ms / round[of].ms;
    cell.rounds.push(round);
  }
  cell.median = {};
  for (const [key] of COLS) {
    const ms = cell.rounds.map((x) => x[key].ms);
    cell.median[key] = { ms: median(ms), min_ms: Math.min(...ms), max_ms: Math.max(...ms),
      seq_per_s: 1000 * cell.batch / median(ms), noisy: cell.rounds.some((x) => x[key].noisy) };
  }
  for (const [key] of RATIOS) {
    const v = median(cell.rounds.map((x) => x[key]));
    cell.median[key] = v;
    cell[key.replace('ort_int8_over_', 'below_target_')] = v < TARGET;
  }
  report.cells.push(cell);
}

const fmtMs = (x) => (x.noisy ? '~' : '') + (x.ms < 100 ? x.ms.toFixed(2) : x.ms.toFixed(1)) +
  (report.rounds > 1 ? ` (${x.min_ms.toFixed(x.ms < 100 ? 2 : 1)}-${x.max_ms.toFixed(x.ms < 100 ? 2 : 1)})` : '');
const head = ['batch', 'seq', 'thr', ...COLS.map((c) => c[1] + ' ms'),
  ...RATIOS.flatMap((c) => [c[1] + ' per round', c[1] + ' median'])];
console.log(`ms per batch: median over ${rounds} round(s) of each round's median pass` +
  (rounds > 1 ? ' (min-max over rounds)' : '') +
  `; ratios ORT-INT8 ms / ours ms within a round (above 1: ours faster); "<": median below ${TARGET}x; "~": noisy in some round`);
console.log('| ' + head.join(' | ') + ' |');
console.log('|' + head.map(() => ' ---: ').join('|') + '|');
for (const c of report.cells) {
  const row = [c.batch, c.seq, c.threads, ...COLS.map(([k]) => fmtMs(c.median[k]))];
  for (const [k] of RATIOS) {
    row.push(c.rounds.map((x) => x[k].toFixed(2)).join(', '));
    // Three digits where two would round a short median up to the target.
    const v = c.median[k], digits = v < TARGET && v.toFixed(2) === TARGET.toFixed(2) ? 3 : 2;
    row.push((v < TARGET ? '<' : '') + v.toFixed(digits) + 'x');
  }
  console.log('| ' + row.join(' | ') + ' |');
}
for (const [k, h, of] of RATIOS) {
  const short = report.cells.filter((c) => c.median[k] < TARGET);
  report[`cells_below_target_vs_${of}`] = short.map((c) => `b${c.batch}-s${c.seq}-t${c.threads}`);
  console.log(`${h}: ${report.cells.length - short.length} of ${report.cells.length} cells at ${TARGET}x or more` +
    (short.length ? `; below: ${short.map((c) => `batch ${c.batch} seq ${c.seq} ${c.threads}T (${c.median[k].toFixed(2)}x)`).join(', ')}` : ''));
}
fs.writeFileSync(jsonOut, JSON.stringify(report, null, 2) + '\n');
