// table.js: prints the comparison table of scripts/bench-ort.sh.
//
// Reads the round files the driver wrote (ours-N.json from `int8bert bench model
// -json`, ort-N.json from run.js) in DIR and prints, per round and as the median
// over rounds, seq/s of FP32 and INT8 for both, INT8/FP32 for each, and ours/ORT
// for FP32 and for INT8 (ours static and dynamic, both against ORT's dynamic
// INT8). Ratios are taken within a round (the two ran next to each other), then
// their median is taken; seq/s medians are over rounds.
//
// usage: node table.js DIR ROUNDS
'use strict';
const fs = require('fs');
const path = require('path');

const [dir, rounds] = [process.argv[2], Number(process.argv[3])];
const rows = [];
for (let r = 1; r <= rounds; r++) {
  const ours = JSON.parse(fs.readFileSync(path.join(dir, `ours-${r}.json`)));
  const ort = JSON.parse(fs.readFileSync(path.join(dir, `ort-${r}.json`)));
  const o = {}; for (const x of ours.results) o[x.precision] = x.seq_per_s;
  const t = {}; for (const x of ort.results) t[x.graph] = x.seq_per_s;
  rows.push({
    round: String(r),
    ours_fp32: o['fp32'], ours_s8: o['int8-static'], ours_d8: o['int8-dynamic'],
    ort_fp32: t['fp32'], ort_d8: t['int8'],
    ours_s8_fp32: o['int8-static'] / o['fp32'], ours_d8_fp32: o['int8-dynamic'] / o['fp32'],
    ort_d8_fp32: t['int8'] / t['fp32'],
    fp32_vs: o['fp32'] / t['fp32'], s8_vs: o['int8-static'] / t['int8'], d8_vs: o['int8-dynamic'] / t['int8'],
  });
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const keys = Object.keys(rows[0]).filter((k) => k !== 'round');
const med = { round: 'median' }; for (const k of keys) med[k] = median(rows.map((r) => r[k]));
const head = ['round', 'ours FP32', 'ours INT8-s', 'ours INT8-d', 'ORT FP32', 'ORT INT8-d',
  'ours s/FP32', 'ours d/FP32', 'ORT d/FP32', 'FP32 ours/ORT', 'INT8 s ours/ORT', 'INT8 d ours/ORT'];
console.log('seq/s, batch 1, seq ' + (process.env.SEQ || 128) + ', one thread; ratios are speed ratios (higher: first is faster)');
console.log('| ' + head.join(' | ') + ' |');
console.log('|' + head.map(() => ' --- ').join('|') + '|');
for (const r of [...rows, med]) {
  console.log('| ' + [r.round, ...keys.map((k) => r[k].toFixed(2))].join(' | ') + ' |');
}
