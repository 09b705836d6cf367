#!/usr/bin/python3
"""Golden token-classification pipelines with `stride` (transformers 4.31), on the NER goldens
that make_tasks_golden.py made (models/testdata/tasks/bert-ner and xlmr-ner: their weights and
tokenizer.json are read, not remade).

With `stride`, TokenClassificationPipeline tokenizes with return_overflowing_tokens, padding and
that stride: the text becomes windows of tokenizer.model_max_length tokens sharing `stride`
tokens, each run through the model on its own (padded to the longest window, as the fast
tokenizer pads them), post-processed with the text's offsets, filtered by ignore_labels, and
the entities of all windows merged by aggregate_overlapping_entities. The windows come from
HF's Rust tokenizers through node (npm @anush008/tokenizers: setTruncation with the stride,
getOverflowing), as make_tasks_golden.py's shim encodes; the pipeline's postprocess and its
helpers are taken verbatim from the vendored transformers source (make_tasks_golden's
pipeline_methods).

  DIR/golden_stride.json.gz   per model_max_length, stride, text: the windows (ids, offsets,
                           special-tokens mask) and, per aggregation_strategy and
                           ignore_labels (null, []), the entities

usage: NODE_PATH=.../node_modules /usr/bin/python3 make_ner_stride_golden.py models/testdata/tasks/bert-ner ...
(run from a set-up oracle copy holding make_tasks_golden.py)
"""
import gzip, json, os, subprocess, sys, warnings

import oracle_env  # noqa: F401
import torch
from transformers import AutoModelForTokenClassification

import make_tasks_golden as mtg

NODE = r"""
const readline = require("readline");
const { Tokenizer } = require("@anush008/tokenizers");
const tok = Tokenizer.fromFile(process.argv[2]);
tok.disablePadding();
const rl = readline.createInterface({ input: process.stdin });
const q = [];
let busy = false;
const enc = (e) => ({ ids: Array.from(e.getIds()), types: Array.from(e.getTypeIds()), tokens: e.getTokens(),
                      offsets: e.getOffsets(), special: Array.from(e.getSpecialTokensMask()) });
async function pump() {
  if (busy) return; busy = true;
  while (q.length) {
    const r = JSON.parse(q.shift());
    tok.setTruncation(r.max, { stride: r.stride });
    const e = await tok.encode(r.text, null, { addSpecialTokens: true });
    const out = [enc(e)].concat(e.getOverflowing().map(enc));
    process.stdout.write(JSON.stringify(out) + "\n");
  }
  busy = false;
}
rl.on("line", (l) => { q.push(l); pump(); });
"""

# Longer texts than the goldens' own, so that windows of 16 tokens overflow several times.
TEXTS = mtg.NER_TEXTS + [
    "Barack Obama visited Angela Merkel in Berlin, then flew to Paris to meet Emmanuel Macron and "
    "later to London where Boris Johnson and the Queen of England waited at Buckingham Palace.",
]
SETTINGS = [(16, 0), (16, 4), (16, 8), (24, 10)]  # (model_max_length, stride)


def main():
    for d in sys.argv[1:]:
        name = os.path.basename(os.path.normpath(d))
        types = name.startswith("bert")
        unk, pad = ("[UNK]", "[PAD]") if types else ("<unk>", "<pad>")
        model = AutoModelForTokenClassification.from_pretrained(d).eval()
        tokjson = os.path.join(d, "tokenizer.json")
        tok = mtg.RustTok(tokjson, unk, pad, types)
        pad_id = tok.req(op="tok2id", token=pad)["id"]
        js = os.path.join(mtg.HERE, "_stride_shim.js")
        open(js, "w").write(NODE)
        win = subprocess.Popen(["node", js, tokjson], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env=os.environ)
        ns = mtg.pipeline_methods("token_classification.py", "TokenClassificationPipeline",
                                  {"postprocess", "aggregate_overlapping_entities", "gather_pre_entities", "aggregate",
                                   "aggregate_word", "aggregate_words", "group_sub_entities", "get_tag",
                                   "group_entities"})
        P, AS = ns["TokenClassificationPipeline"], ns["AggregationStrategy"]
        pipe = P()
        pipe.tokenizer, pipe.model, pipe.framework = tok, model, "pt"
        cases = []
        for max_len, stride in SETTINGS:
            tok.model_max_length = max_len
            for text in TEXTS:
                win.stdin.write(json.dumps({"max": max_len, "stride": stride, "text": text}) + "\n")
                win.stdin.flush()
                windows = json.loads(win.stdout.readline())
                longest = max(len(w["ids"]) for w in windows)
                outs, saved = [], []
                for i, w in enumerate(windows):
                    n, padn = len(w["ids"]), longest - len(w["ids"])
                    # padding=True: every window padded to the longest, pads special.
                    inputs = {"input_ids": torch.tensor([w["ids"] + [pad_id] * padn]),
                              "attention_mask": torch.tensor([[1] * n + [0] * padn])}
                    if types:
                        inputs["token_type_ids"] = torch.tensor([w["types"] + [0] * padn])
                    with torch.no_grad():
                        logits = model(**inputs).logits
                    outs.append({"logits": logits, "special_tokens_mask": torch.tensor([w["special"] + [1] * padn]),
                                 "offset_mapping": torch.tensor([w["offsets"] + [[0, 0]] * padn]),
                                 "sentence": text if i == 0 else None, "is_last": i == len(windows) - 1,
                                 "input_ids": inputs["input_ids"]})
                    saved.append({"ids": w["ids"], "offsets": w["offsets"], "special": w["special"]})
                runs = []
                for strat in ("simple", "first", "average", "max"):
                    for ignore in (None, []):
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            ents = pipe.postprocess(outs, aggregation_strategy=AS(strat), ignore_labels=ignore)
                        runs.append({"aggregation_strategy": strat, "ignore_labels": ignore,
                                     "entities": [{k: (float(v) if k == "score" else int(v) if k in ("start", "end") else v)
                                                   for k, v in e.items()} for e in ents]})
                cases.append({"max_length": max_len, "stride": stride, "text": text, "windows": saved, "runs": runs})
        raw = json.dumps({"source": "transformers 4.31 TokenClassificationPipeline with stride (postprocess, "
                                    "aggregate_overlapping_entities); HF Rust tokenizers' overflowing windows",
                          "cases": cases}).encode()
        with open(os.path.join(d, "golden_stride.json.gz"), "wb") as fh:
            fh.write(gzip.compress(raw, compresslevel=9, mtime=0))
        tok.p.kill()
        win.kill()
        print(name, len(cases), "cases,", sum(len(c["windows"]) for c in cases), "windows,",
              sum(len(r["entities"]) for c in cases for r in c["runs"]), "entities")


if __name__ == "__main__":
    main()
