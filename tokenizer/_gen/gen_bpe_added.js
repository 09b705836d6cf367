// Makes testdata/roberta-base/added_tokens.json and added_golden.json: an
// added_tokens.json beside roberta-base's vocab.json and merges.txt, and
// what Hugging Face's Rust tokenizers (npm @anush008/tokenizers 0.6.0,
// Rust tokenizers 0.22.2) give on texts that hold its tokens.
//
// The tokenizer is roberta-base's tokenizer.json (as gen_bpe.js lays it
// out from the two files) with the added tokens appended where
// transformers 4.31's from_pretrained puts them for a folder without
// tokenizer.json (RobertaTokenizerFast made from the slow files): sorted
// by id, each at the tokenizer's size so far (vocab.json's 50,262
// entries, then one more each), not special (no special token's name),
// so normalized, no lstrip or rstrip, as tokenizers' add_tokens makes a
// plain string. (The ids are written into tokenizer.json here: the Rust
// tokenizers of 4.31's time, 0.13, numbered new tokens vocabulary size +
// added so far, which 0.22 no longer does where vocab.json's ids have
// holes; what is compared is how the tokens are split out and encoded.)
//
// usage: NODE_PATH=<dir with @anush008/tokenizers> node gen_bpe_added.js ../testdata/roberta-base
const fs = require("fs");
const os = require("os");
const path = require("path");
const zlib = require("zlib");
const { Tokenizer } = require("@anush008/tokenizers");

const added = { "<ent>": 50262, "</ent>": 50263 };

const texts = [
  "<ent>Paris</ent> is in France.", "I met <ent> Bob </ent> yesterday", "x<ent>y", "<ent><ent>", " <ent>", "<ent> ",
  "hello <mask> <ent>", "< ent > <ENT> <ent", "<s><ent></s>", "naïve <ent>café</ent> 😀", "  <ent>  </ent>  ",
];
const pairs = [["<ent>a</ent>", "b <ent>"], ["plain", "</ent>"]];

(async () => {
  const dir = process.argv[2];
  const base = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(dir, "tokenizer.json.gz"))).toString("utf8"));
  const vocabSize = Object.keys(base.model.vocab).length;
  const sorted = Object.entries(added).sort((a, b) => a[1] - b[1]);
  sorted.forEach(([content, id], i) => {
    if (id !== vocabSize + i) throw new Error(`${content}: id ${id}, transformers 4.31 wants ${vocabSize + i}`);
    base.added_tokens.push({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: true, special: false });
  });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gen-bpe-added-"));
  const file = path.join(tmp, "tokenizer.json");
  fs.writeFileSync(file, JSON.stringify(base));
  const tok = Tokenizer.fromFile(file);
  tok.disablePadding();
  tok.disableTruncation();
  const cases = [];
  for (const [a, b] of texts.map((t) => [t, null]).concat(pairs)) {
    const enc = await tok.encode(a, b, { addSpecialTokens: true });
    const ids = Array.from(enc.getIds());
    const c = {
      text: a, ids, type_ids: Array.from(enc.getTypeIds()), tokens: enc.getTokens(),
      offsets: enc.getOffsets(), special: Array.from(enc.getSpecialTokensMask()),
    };
    if (b !== null) c.text_pair = b;
    const plain = await tok.encode(a, b, { addSpecialTokens: false });
    c.ids_plain = Array.from(plain.getIds());
    c.offsets_plain = plain.getOffsets();
    c.decode_keep = await tok.decode(ids, false);
    c.decode_skip = await tok.decode(ids, true);
    cases.push(c);
  }
  fs.writeFileSync(path.join(dir, "added_tokens.json"), JSON.stringify(added) + "\n");
  const out = {
    note: "HF Rust tokenizers 0.22.2 (npm @anush008/tokenizers 0.6.0) on tokenizer.json.gz with added_tokens.json's tokens appended as transformers 4.31 adds them; made by ../../_gen/gen_bpe_added.js",
    cases,
  };
  fs.writeFileSync(path.join(dir, "added_golden.json"), JSON.stringify(out, null, 1) + "\n");
  fs.rmSync(tmp, { recursive: true });
})().catch((e) => { console.error(e); process.exit(1); });
