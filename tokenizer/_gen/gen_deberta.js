// Makes testdata/deberta-v3-spm: a SentencePiece Unigram tokenizer.json in
// DeBERTa-v3's layout, as transformers 4.31's DebertaV2Converter
// (convert_slow_tokenizer.py) writes microsoft/deberta-v3-base's:
//
//   model          Unigram, unk_id 3, the spm pieces in order: [PAD]=0, [CLS]=1,
//                  [SEP]=2, [UNK]=3 (DeBERTa-v3's spm.model holds them as its first
//                  pieces), then the normal pieces; [MASK] an added token after them
//   normalizer     Sequence [Strip(both), Precompiled(charsmap), Replace(" {2,}", " ")]
//                  (do_lower_case: Lowercase first)
//   pre_tokenizer  Sequence [Metaspace(▁, add_prefix_space)] (split_by_punct:
//                  Punctuation(isolated) first)
//   post_processor TemplateProcessing [CLS]:0 $A:0 [SEP]:0 / ... $B:1 [SEP]:1
//   decoder        Metaspace(▁, add_prefix_space)
//
// The pieces, their scores and the charsmap are the project's shared
// SentencePiece Unigram model (../testdata/xlmr-spm-unigram/tokenizer.json,
// trained by the oracle's make_tok_golden.py), pruned to every one-character
// piece and the 2000 most likely longer ones to keep the file small. The
// real spm.model is 2.4 MB; only its layout is copied.
//
// golden.json.gz: HF's Rust tokenizers (npm @anush008/tokenizers 0.6.0,
// tokenizers 0.22.2) on that file and two variants (do_lower_case,
// split_by_punct) over ../../shared/golden/tokenizers/sentences.json and our
// own texts: ids, type ids, tokens, offsets, special-tokens mask, with and
// without the special tokens, and decodes.
//
// usage: NODE_PATH=<node_modules> node gen_deberta.js ../testdata <sentences.json>
const fs = require("fs");
const os = require("os");
const path = require("path");
const zlib = require("zlib");
const { Tokenizer } = require("@anush008/tokenizers");

const LONGER = 2000;

function baseJSON(testdata) {
  const x = JSON.parse(fs.readFileSync(path.join(testdata, "xlmr-spm-unigram", "tokenizer.json"), "utf8"));
  // XLM-R's layout: <s> <pad> </s> <unk>, the spm pieces, <mask>.
  const pieces = x.model.vocab.slice(4, x.model.vocab.length - 1);
  let longer = 0;
  const kept = pieces.filter(([p]) => [...p].length === 1 || longer++ < LONGER);
  const vocab = [["[PAD]", 0], ["[CLS]", 0], ["[SEP]", 0], ["[UNK]", 0]].concat(kept);
  const mask = vocab.length;
  const charsmap = x.normalizer.normalizers.find((n) => n.type === "Precompiled");
  const added = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  const sp = (id, t) => ({ SpecialToken: { id, type_id: t } });
  const seq = (id, t) => ({ Sequence: { id, type_id: t } });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [added(0, "[PAD]"), added(1, "[CLS]"), added(2, "[SEP]"), added(3, "[UNK]"), added(mask, "[MASK]")],
    normalizer: {
      type: "Sequence",
      normalizers: [
        { type: "Strip", strip_left: true, strip_right: true },
        charsmap,
        { type: "Replace", pattern: { Regex: " {2,}" }, content: " " },
      ],
    },
    pre_tokenizer: { type: "Sequence", pretokenizers: [{ type: "Metaspace", replacement: "\u2581", add_prefix_space: true }] },
    post_processor: {
      type: "TemplateProcessing",
      single: [sp("[CLS]", 0), seq("A", 0), sp("[SEP]", 0)],
      pair: [sp("[CLS]", 0), seq("A", 0), sp("[SEP]", 0), seq("B", 1), sp("[SEP]", 1)],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [1], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [2], tokens: ["[SEP]"] },
      },
    },
    decoder: { type: "Metaspace", replacement: "\u2581", add_prefix_space: true },
    model: { type: "Unigram", unk_id: 3, vocab },
  };
}

// The variants the Go test rebuilds (tokenizer/deberta_test.go).
const variants = {
  base: (j) => j,
  lower: (j) => { j.normalizer.normalizers.unshift({ type: "Lowercase" }); return j; },
  punct: (j) => { j.pre_tokenizer.pretokenizers.unshift({ type: "Punctuation", behavior: "Isolated" }); return j; },
};

const extra = [
  "Hello [MASK]!", "Hello[MASK]", "[MASK] [MASK]  [MASK]", "[CLS]hello[SEP] [PAD]", " [MASK]", "[UNK] [unk] [mask]",
  "  leading and trailing  ", "\t\ttabs\tinside\t", "a \nb", "a  \n\n  b", "x   ", "   x", "a\u00a0\u00a0b", "a \u3000 b",
  "1234567890 ４２ ²³ ½ ﬁ ℌ", "e\u0301 a\u0300\u0301 \u0301x", "Straße İstanbul ǅ ΣΑΣ", "¿Qué? ¡Sí! «oui» — “quoted” …",
  "don't'sX ?'s .'t", "the   quick\t\tbrown\r\n\r\nfox", "▁ ▁▁x ▁a", "b".repeat(600), "😀".repeat(50) + " ok",
  "\u00ad\u200b\ufeff", "a\u0085b\u2028c", "ⓐⓑ ㈱ ㌀ ｶﾀｶﾅ", "",
];

(async () => {
  const testdata = process.argv[2];
  const shared = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
  const items = shared.sentences.map((s) => [s, null]).concat(extra.map((s) => [s, null]), shared.pairs.map(([a, b]) => [a, b]));
  const dir = path.join(testdata, "deberta-v3-spm");
  fs.mkdirSync(dir, { recursive: true });
  const base = baseJSON(testdata);
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(base));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gen-deberta-"));
  const out = {
    note: "HF Rust tokenizers 0.22.2 (npm @anush008/tokenizers 0.6.0) on tokenizer.json in this folder and its variants; made by ../../_gen/gen_deberta.js",
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
      }
      cases.push(c);
    }
    out.variants[name] = cases;
  }
  fs.writeFileSync(path.join(dir, "golden.json.gz"), zlib.gzipSync(Buffer.from(JSON.stringify(out)), { level: 9 }));
  fs.rmSync(tmp, { recursive: true });
})().catch((e) => { console.error(e); process.exit(1); });
