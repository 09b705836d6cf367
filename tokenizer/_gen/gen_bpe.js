// Makes testdata/roberta-base/tokenizer.json.gz and golden.json.gz: the
// byte-level BPE goldens of Hugging Face's Rust tokenizers (npm
// @anush008/tokenizers 0.6.0, Rust tokenizers 0.22.2).
//
// tokenizer.json is built from roberta-base's vocab.json and merges.txt
// (kept gzipped, as vocab.json.gz and merges.txt.gz)
// with the settings transformers' RobertaConverter gives them (the layout
// of roberta-base's tokenizer.json on the Hugging Face Hub: ByteLevel
// pre-tokenizer, RobertaProcessing, ByteLevel decoder, <mask> with lstrip).
// Each variant below edits that file the way the Go test edits it, and
// records, for every text (and pair) of ../../../shared/golden/tokenizers/
// sentences.json plus a few of our own, the ids, type ids, tokens, offsets
// (in characters) and special-tokens mask, and the decode of the ids with
// and without special tokens.
//
// usage: NODE_PATH=<dir with @anush008/tokenizers> node gen_bpe.js \
//          ../testdata/roberta-base /work/shared/golden/tokenizers/sentences.json
const fs = require("fs");
const os = require("os");
const path = require("path");
const zlib = require("zlib");
const { Tokenizer } = require("@anush008/tokenizers");

function baseJSON(dir) {
  const gunzip = (name) => zlib.gunzipSync(fs.readFileSync(path.join(dir, name))).toString("utf8");
  const vocab = JSON.parse(gunzip("vocab.json.gz"));
  const lines = gunzip("merges.txt.gz").split("\n");
  const merges = lines.filter((l, i) => !(i === 0 && l.startsWith("#version")) && l !== "");
  const sp = (id, content, lstrip) => ({ id, content, single_word: false, lstrip, rstrip: false, normalized: true, special: true });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [sp(0, "<s>", false), sp(1, "<pad>", false), sp(2, "</s>", false), sp(3, "<unk>", false), sp(50264, "<mask>", true)],
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true },
    post_processor: { type: "RobertaProcessing", sep: ["</s>", 2], cls: ["<s>", 0], trim_offsets: true, add_prefix_space: false },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, vocab, merges },
  };
}

// The variants; the Go test (bpe_test.go, bpeVariant) makes the same edits.
const variants = {
  base: (j) => j,
  prefix: (j) => { j.pre_tokenizer.add_prefix_space = true; j.post_processor.add_prefix_space = true; return j; },
  notrim: (j) => { j.post_processor.trim_offsets = false; return j; },
  bytelevel_post: (j) => {
    j.pre_tokenizer.add_prefix_space = true;
    j.post_processor = { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true };
    return j;
  },
  noregex: (j) => { j.pre_tokenizer.use_regex = false; j.post_processor = null; return j; },
};

const extra = [
  "Hello <mask>!", "Hello<mask>", "<mask> <mask>  <mask>", "<s>hello</s> <pad>", " <mask>",
  "I'm here, she's, we'll, they'd, you've, we're, isn't. SHE'S I'M 'sa ''s",
  "a \nb", "a  \n\n  b", "  \n\n  x", "x   ", "   x", "a\u00a0\u00a0b", "a \u3000 b",
  "1234567890 ４２ ²³ ½", "e\u0301 a\u0300\u0301 \u0301x",
  "don't'sX ?'s .'t", "the   quick\t\tbrown\r\n\r\nfox",
  "b".repeat(600), "ab".repeat(400) + " " + "é".repeat(300), "😀".repeat(150),
  "Ġ Ċ ĉ Ā ÿ Ã©", "\u00ad\u200b\ufeff", "a\u0085b\u2028c",
];

(async () => {
  const dir = process.argv[2];
  const shared = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
  const items = shared.sentences.map((s) => [s, null]).concat(extra.map((s) => [s, null]), shared.pairs.map(([a, b]) => [a, b]));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gen-bpe-"));
  const base = baseJSON(dir);
  fs.writeFileSync(path.join(dir, "tokenizer.json.gz"), zlib.gzipSync(Buffer.from(JSON.stringify(base)), { level: 9 }));
  const out = {
    note: "HF Rust tokenizers 0.22.2 (npm @anush008/tokenizers 0.6.0) on tokenizer.json.gz in this folder and its variants; made by ../../_gen/gen_bpe.js",
    variants: {},
  };
  for (const [name, edit] of Object.entries(variants)) {
    const file = path.join(tmp, name + ".json");
    fs.writeFileSync(file, JSON.stringify(edit(JSON.parse(JSON.stringify(base)))));
    const tok = Tokenizer.fromFile(file);
    tok.disablePadding();
    tok.disableTruncation();
    const cases = [];
    for (const [a, b] of items) {
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
      if (name === "base") {
        c.decode_keep = await tok.decode(ids, false);
        c.decode_skip = await tok.decode(ids, true);
        // Cut ids: lists that may end or start inside a character.
        if (ids.length > 3) {
          const cut = ids.slice(2, ids.length - 2);
          c.cut_ids = cut;
          c.decode_cut = await tok.decode(cut, false);
        }
      }
      cases.push(c);
    }
    out.variants[name] = cases;
  }
  // The newer pair form of merges must read the same.
  const pairs = JSON.parse(JSON.stringify(base));
  pairs.model.merges = pairs.model.merges.map((m) => m.split(" "));
  fs.writeFileSync(path.join(tmp, "pairs.json"), JSON.stringify(pairs));
  const tp = Tokenizer.fromFile(path.join(tmp, "pairs.json"));
  for (const c of out.variants.base) {
    const e = await tp.encode(c.text, c.text_pair === undefined ? null : c.text_pair, { addSpecialTokens: true });
    if (JSON.stringify(Array.from(e.getIds())) !== JSON.stringify(c.ids)) throw new Error("pair-form merges differ on " + c.text);
  }
  fs.writeFileSync(path.join(dir, "golden.json.gz"), zlib.gzipSync(Buffer.from(JSON.stringify(out)), { level: 9 }));
  fs.rmSync(tmp, { recursive: true });
})().catch((e) => { console.error(e); process.exit(1); });
