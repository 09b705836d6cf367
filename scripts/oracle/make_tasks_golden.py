#!/usr/bin/python3
"""Golden token-classification (NER) and zero-shot classification pipelines from Hugging Face
transformers 4.31 (the oracle), on tiny random-weight models over real tokenizers.

The oracle has only slow tokenizers, and the token-classification pipeline needs a fast one
(offsets; the first/average/max strategies). A shim stands in for the fast tokenizer: it
encodes with HF's Rust tokenizers (npm @anush008/tokenizers, through node, as rust_tok.js
does) and gives ids, tokens, offsets and the special-tokens mask, convert_ids_to_tokens, and
convert_tokens_to_string through the tokenizer.json decoder (what PreTrainedTokenizerFast
does). The pipelines' own methods (TokenClassificationPipeline.postprocess and its helpers,
ZeroShotClassificationPipeline.postprocess and the argument handler) are taken verbatim from
the vendored transformers source (importing the pipelines module needs the Rust tokenizers
for Python) and run on the model's logits.

  OUT/bert-ner/     BertForTokenClassification over bert-base-uncased's tokenizer (WordPiece)
  OUT/xlmr-ner/     XLMRobertaForTokenClassification over the shared SentencePiece unigram
  OUT/xlmr-nli/     XLMRobertaForSequenceClassification (contradiction/neutral/entailment)

usage: NODE_PATH=.../node_modules /usr/bin/python3 make_tasks_golden.py --out DIR
"""
import argparse, ast, json, os, shutil, subprocess, warnings

import oracle_env  # noqa: F401
import numpy as np
import torch
import transformers
from transformers import (BertConfig, BertForTokenClassification, XLMRobertaConfig,
                          XLMRobertaForTokenClassification, XLMRobertaForSequenceClassification)
from transformers.utils import ExplicitEnum

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("SHARED", "/work/shared")

NODE = r"""
const readline = require("readline");
const { Tokenizer } = require("@anush008/tokenizers");
const tok = Tokenizer.fromFile(process.argv[2]);
tok.disablePadding();
const rl = readline.createInterface({ input: process.stdin });
const q = [];
let busy = false;
async function pump() {
  if (busy) return; busy = true;
  while (q.length) {
    const r = JSON.parse(q.shift());
    let out;
    if (r.op === "encode") {
      tok.disableTruncation();
      if (r.max) tok.setTruncation(r.max, { strategy: r.strategy || "LongestFirst" });
      const e = await tok.encode(r.a, r.b === undefined ? null : r.b, { addSpecialTokens: true });
      out = { ids: Array.from(e.getIds()), types: Array.from(e.getTypeIds()), tokens: e.getTokens(),
              offsets: e.getOffsets(), special: Array.from(e.getSpecialTokensMask()) };
    } else if (r.op === "decode") {
      out = { text: tok.getDecoder().decode(r.tokens) };
    } else if (r.op === "id2tok") {
      out = { token: tok.idToToken(r.id) };
    } else if (r.op === "tok2id") {
      out = { id: tok.tokenToId(r.token) };
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  }
  busy = false;
}
rl.on("line", (l) => { q.push(l); pump(); });
"""


class RustTok:
    """The fast-tokenizer stand-in the pipelines read (see the module doc)."""

    def __init__(self, tokjson, unk, pad, types):
        js = os.path.join(HERE, "_shim.js")
        open(js, "w").write(NODE)
        self.p = subprocess.Popen(["node", js, tokjson], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=os.environ)
        model = json.load(open(tokjson))["model"]
        # PreTrainedTokenizerFast._tokenizer.model: WordPiece and BPE carry
        # continuing_subword_prefix, Unigram has no such attribute.
        m = type("M", (), {})()
        if model["type"] in ("WordPiece", "BPE"):
            m.continuing_subword_prefix = model.get("continuing_subword_prefix")
        self._tokenizer = type("T", (), {})()
        self._tokenizer.model = m
        self.is_fast = True
        self.model_max_length = 512
        self.unk_token_id = self.req(op="tok2id", token=unk)["id"]
        self.pad_token = pad
        self.types = types
        self.model_input_names = ["input_ids", "attention_mask"] + (["token_type_ids"] if types else [])

    def req(self, **r):
        self.p.stdin.write(json.dumps(r) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def convert_ids_to_tokens(self, i):
        return self.req(op="id2tok", id=int(i))["token"]

    def convert_tokens_to_string(self, tokens):
        return self.req(op="decode", tokens=list(tokens))["text"]

    def encode(self, a, b=None, strategy=None):
        r = self.req(op="encode", a=a, **({} if b is None else {"b": b}), max=self.model_max_length,
                     **({} if strategy is None else {"strategy": strategy}))
        out = {"input_ids": torch.tensor([r["ids"]]), "attention_mask": torch.ones(1, len(r["ids"]), dtype=torch.long)}
        if self.types:
            out["token_type_ids"] = torch.tensor([r["types"]])
        return out, r


def pipeline_methods(module, cls, names):
    src_path = os.path.join(os.path.dirname(transformers.__file__), "pipelines", module)
    tree = ast.parse(open(src_path).read())
    keep, classes = [], {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "AggregationStrategy":
            keep.append(node)
        elif isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in names:
                    item.decorator_list = []
                    classes[item.name] = item
        elif isinstance(node, ast.ClassDef) and node.name == "ZeroShotClassificationArgumentHandler":
            node.bases = []
            keep.append(node)
    body = keep + [ast.ClassDef(name=cls, bases=[], keywords=[], body=list(classes.values()), decorator_list=[])]
    from typing import List, Optional, Tuple
    ns = {"np": np, "ExplicitEnum": ExplicitEnum, "warnings": warnings, "List": List, "Optional": Optional,
          "Tuple": Tuple, "logger": type("L", (), {"warning": staticmethod(lambda *a: None)})()}
    mod = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    exec(compile(mod, src_path, "exec"), ns)
    return ns


def rerandomize(model, seed, cls_std):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "LayerNorm.weight" in n:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif n.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
        head = model.classifier if hasattr(model.classifier, "weight") else model.classifier.out_proj
        head.weight.copy_(cls_std * torch.randn(head.weight.shape, generator=g))
        head.bias.copy_(0.5 * torch.randn(head.bias.shape, generator=g))


NER_LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]

NER_TEXTS = [
    "My name is Wolfgang and I live in Berlin.",
    "Hugging Face Inc. is a company based in New York City; its headquarters are in DUMBO.",
    "Angela  Merkel met Emmanuel Macron at the Élysée Palace in Paris, didn't she?",
    "The unbelievably uncharacteristic antidisestablishmentarianism of São Paulo 🙂 surprised Zoë.",
    "John's friend works at Microsoft-Research (Cambridge), not at Google.",
    "naïve café owners in Zürich sell crème brûlée",
]


def make_ner(out, name, cfg_cls, model_cls, tokdir, types, unk, pad, seed, vocab, hidden):
    cfg = cfg_cls(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=2 * hidden, max_position_embeddings=66 if cfg_cls is XLMRobertaConfig else 64,
                  id2label=dict(enumerate(NER_LABELS)), label2id={l: i for i, l in enumerate(NER_LABELS)},
                  **({"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "type_vocab_size": 1}
                     if cfg_cls is XLMRobertaConfig else {}))
    cfg.architectures = [model_cls.__name__]
    torch.manual_seed(seed)
    model = model_cls(cfg).eval()
    rerandomize(model, seed, 1.0)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(tokdir, f), d)
    tok = RustTok(os.path.join(d, "tokenizer.json"), unk, pad, types)
    ns = pipeline_methods("token_classification.py", "TokenClassificationPipeline",
                          {"postprocess", "aggregate_overlapping_entities", "gather_pre_entities", "aggregate",
                           "aggregate_word", "aggregate_words", "group_sub_entities", "get_tag", "group_entities"})
    P = ns["TokenClassificationPipeline"]
    AS = ns["AggregationStrategy"]
    pipe = P()
    pipe.tokenizer, pipe.model, pipe.framework = tok, model, "pt"
    cases = []
    for text in NER_TEXTS:
        inputs, raw = tok.encode(text)
        with torch.no_grad():
            logits = model(**inputs).logits
        mo = {"logits": logits, "special_tokens_mask": torch.tensor([raw["special"]]),
              "offset_mapping": torch.tensor([raw["offsets"]]), "sentence": text, "is_last": True,
              "input_ids": inputs["input_ids"]}
        runs = []
        for strat in ("none", "simple", "first", "average", "max"):
            for ignore in (None, []):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ents = pipe.postprocess([mo], aggregation_strategy=AS(strat), ignore_labels=ignore)
                runs.append({"aggregation_strategy": strat, "ignore_labels": ignore,
                             "entities": [{k: (float(v) if k == "score" else int(v) if k in ("start", "end", "index") else v)
                                           for k, v in e.items()} for e in ents]})
        cases.append({"text": text, "ids": raw["ids"], "offsets": raw["offsets"], "tokens": raw["tokens"],
                      "logits": logits[0].tolist(), "runs": runs})
    json.dump({"source": "transformers 4.31 TokenClassificationPipeline.postprocess; HF Rust tokenizers",
               "labels": NER_LABELS, "cases": cases}, open(os.path.join(d, "golden.json"), "w"))
    tok.p.kill()
    print(name, sum(len(r["entities"]) for c in cases for r in c["runs"]), "entities")


NLI_TEXTS = [
    "The team won the championship after a thrilling final match.",
    "Parliament passed the new budget law on Tuesday.",
    "Scientists discovered a new species of frog in the rainforest.",
]
NLI_LABELS = ["sports", "politics", "science", "cooking"]


def make_nli(out, seed):
    tokdir = os.path.join(SHARED, "golden", "tokenizers", "xlmr-spm-unigram")
    id2label = {0: "contradiction", 1: "neutral", 2: "entailment"}
    cfg = XLMRobertaConfig(vocab_size=8002, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=130, pad_token_id=1, bos_token_id=0,
                           eos_token_id=2, type_vocab_size=1, id2label=id2label,
                           label2id={v: k for k, v in id2label.items()})
    cfg.architectures = ["XLMRobertaForSequenceClassification"]
    torch.manual_seed(seed)
    model = XLMRobertaForSequenceClassification(cfg).eval()
    rerandomize(model, seed, 1.0)
    d = os.path.join(out, "xlmr-nli")
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(tokdir, f), d)
    tok = RustTok(os.path.join(d, "tokenizer.json"), "<unk>", "<pad>", False)
    ns = pipeline_methods("zero_shot_classification.py", "ZeroShotClassificationPipeline", {"postprocess"})
    handler = ns["ZeroShotClassificationArgumentHandler"]()
    P = ns["ZeroShotClassificationPipeline"]
    cases = []
    # Each id2label order is a config the Go test writes beside the same weights.
    orders = {"cne": id2label, "enc": {0: "ENTAILMENT", 1: "neutral", 2: "contradiction"}}
    for text in NLI_TEXTS:
        for template in ("This example is {}.", "The topic is {}"):
            for labels in (NLI_LABELS, ["sports"], "politics, science ,cooking"):
                labs = handler._parse_labels(labels)
                pairs, seqs = handler(text, labs, template)
                outs = []
                for lab, (a, b) in zip(labs, pairs):
                    inputs, raw = tok.encode(a, b, strategy="OnlyFirst")
                    with torch.no_grad():
                        logits = model(**inputs).logits
                    outs.append({"candidate_label": lab, "sequence": seqs[0], "logits": logits, "ids": raw["ids"]})
                for order, i2l in orders.items():
                    model.config.id2label = i2l
                    model.config.label2id = {v: k for k, v in i2l.items()}
                    # ZeroShotClassificationPipeline.entailment_id, as HF's property reads it.
                    ent = next((ind for lab, ind in model.config.label2id.items() if lab.lower().startswith("entail")), -1)
                    pipe = type("Pipe", (P,), {"entailment_id": ent})()
                    pipe.model = model
                    for multi in (False, True):
                        r = pipe.postprocess(outs, multi_label=multi)
                        cases.append({"text": text, "template": template, "candidate_labels": labels,
                                      "order": order, "multi_label": multi, "result": r,
                                      "pair_ids": [o["ids"] for o in outs],
                                      "logits": [o["logits"][0].tolist() for o in outs]})
    model.config.id2label, model.config.label2id = id2label, {v: k for k, v in id2label.items()}
    json.dump({"source": "transformers 4.31 ZeroShotClassificationPipeline; HF Rust tokenizers",
               "orders": {k: {str(i): l for i, l in v.items()} for k, v in orders.items()}, "cases": cases},
              open(os.path.join(d, "golden.json"), "w"))
    tok.p.kill()
    print("xlmr-nli", len(cases), "cases")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="golden/tasks")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    toks = os.path.join(SHARED, "golden", "tokenizers")
    make_ner(a.out, "bert-ner", BertConfig, BertForTokenClassification, os.path.join(toks, "bert-base-uncased"),
             True, "[UNK]", "[PAD]", a.seed, 30522, 32)
    make_ner(a.out, "xlmr-ner", XLMRobertaConfig, XLMRobertaForTokenClassification,
             os.path.join(toks, "xlmr-spm-unigram"), False, "<unk>", "<pad>", a.seed + 1, 8002, 32)
    make_nli(a.out, a.seed + 2)


if __name__ == "__main__":
    main()
