// Makes testdata/*/decode_golden.json: Hugging Face's Rust tokenizers'
// decode (npm @anush008/tokenizers 0.6.0, Rust tokenizers 0.22.2) of the
// rust_input_ids of each golden case, with and without special tokens,
// plus a few id lists of our own (ids out of the vocabulary, special
// tokens in the middle).
// usage: NODE_PATH=<dir with @anush008/tokenizers> node gen_decode.js ../testdata/bert-base-uncased
const fs = require("fs");
const path = require("path");
const { Tokenizer } = require("@anush008/tokenizers");
(async () => {
  const dir = process.argv[2];
  const tok = Tokenizer.fromFile(path.join(dir, "tokenizer.json"));
  const golden = JSON.parse(fs.readFileSync(path.join(dir, "golden.json"), "utf8"));
  const lists = golden.cases.map((c) => c.rust_input_ids);
  const n = tok.getVocabSize(true);
  lists.push([n + 5, 7, n, 8], [0, 1, 2, 3], [lists[0][0], lists[0][0], lists[1][1]], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
  const cases = [];
  for (const ids of lists) {
    cases.push({
      ids,
      skip: await tok.decode(ids, true),
      keep: await tok.decode(ids, false),
    });
  }
  const out = { note: "decode of HF Rust tokenizers 0.22.2 (npm @anush008/tokenizers 0.6.0) on tokenizer.json in this folder; made by ../../_gen/gen_decode.js", cases };
  fs.writeFileSync(path.join(dir, "decode_golden.json"), JSON.stringify(out) + "\n");
})().catch((e) => { console.error(e); process.exit(1); });
