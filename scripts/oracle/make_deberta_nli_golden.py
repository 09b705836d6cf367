#!/usr/bin/python3
"""Golden zero-shot classification through a DeBERTa-v3 NLI cross-encoder, from Hugging Face
transformers 4.31 (the oracle): DebertaV2ForSequenceClassification (the deberta-v3-seqcls
configuration of make_deberta_golden.py: hidden 32, 2 layers, 256 position buckets, labels
contradiction/entailment/neutral) with a vocabulary as large as the DeBERTa-v3-layout
tokenizer's (tokenizer/testdata/deberta-v3-spm/tokenizer.json, 2903 ids), random weights.

As make_tasks_golden.py (whose RustTok shim and verbatim pipeline methods it reuses; copy both
scripts into the oracle): the oracle has only slow tokenizers, so the pairs are encoded with
HF's Rust tokenizers through node (truncation OnlyFirst), and ZeroShotClassificationPipeline's
argument handler and postprocess, taken from the vendored transformers source, run on the
model's logits: single- and multi-label, the default template and a custom one, a list, one
label and a comma-separated string of labels, under two id2label orders of the same weights.

  OUT/deberta-nli/  config.json, model.safetensors, golden.json (no tokenizer: the Go test
                    copies tokenizer/testdata/deberta-v3-spm/tokenizer.json beside them)

usage: NODE_PATH=.../node_modules /usr/bin/python3 make_deberta_nli_golden.py --tok TOKENIZER_JSON --out DIR
"""
import argparse, json, os

import oracle_env  # noqa: F401
import torch
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

from make_tasks_golden import RustTok, pipeline_methods

TEXTS = [
    "The team won the championship after a thrilling final match.",
    "Parliament passed the new budget law on Tuesday.",
    "Scientists discovered a new species of frog in the rainforest.",
    "  Die Köchin bereitete ein köstliches Abendessen zu, n'est-ce pas?  ",
]
LABELS = ["sports", "politics", "science", "cooking"]
TEMPLATES = ["This example is {}.", "The topic is {}"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tok", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    vocab = len(json.load(open(a.tok))["model"]["vocab"]) + 1  # the pieces and [MASK]
    id2label = {0: "contradiction", 1: "entailment", 2: "neutral"}
    cfg = DebertaV2Config(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, max_position_embeddings=512, type_vocab_size=0,
                          relative_attention=True, pos_att_type=["p2c", "c2p"], share_att_key=True,
                          norm_rel_ebd="layer_norm", position_biased_input=False, max_relative_positions=-1,
                          position_buckets=256, hidden_act="gelu", pad_token_id=0, id2label=id2label,
                          label2id={v: k for k, v in id2label.items()})
    cfg.architectures = ["DebertaV2ForSequenceClassification"]
    torch.manual_seed(a.seed)
    model = DebertaV2ForSequenceClassification(cfg).eval()
    g = torch.Generator().manual_seed(a.seed)
    with torch.no_grad():
        for n, p in sorted(model.named_parameters()):
            r = torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype)
            if n.endswith("LayerNorm.weight"):
                p.copy_(1.0 + 0.1 * r)
            elif n.endswith("rel_embeddings.weight"):
                p.copy_(r)
            elif n == "classifier.weight":
                p.copy_(2.0 * r)  # wide, so that different labels win
            elif n == "classifier.bias":
                p.zero_()  # no label favoured whatever the input
            else:
                p.copy_(0.1 * r)
    d = os.path.join(a.out, "deberta-nli")
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    tok = RustTok(a.tok, "[UNK]", "[PAD]", False)
    ns = pipeline_methods("zero_shot_classification.py", "ZeroShotClassificationPipeline", {"postprocess"})
    handler = ns["ZeroShotClassificationArgumentHandler"]()
    P = ns["ZeroShotClassificationPipeline"]
    orders = {"cen": id2label, "enc": {0: "ENTAILMENT", 1: "neutral", 2: "contradiction"}}
    cases = []
    for text in TEXTS:
        for template in TEMPLATES:
            for labels in (LABELS, ["sports"], "politics, science ,cooking"):
                labs = handler._parse_labels(labels)
                pairs, seqs = handler(text, labs, template)
                outs = []
                for lab, (x, y) in zip(labs, pairs):
                    inputs, raw = tok.encode(x, y, strategy="OnlyFirst")
                    with torch.no_grad():
                        logits = model(**inputs).logits
                    outs.append({"candidate_label": lab, "sequence": seqs[0], "logits": logits, "ids": raw["ids"]})
                for order, i2l in orders.items():
                    model.config.id2label = i2l
                    model.config.label2id = {v: k for k, v in i2l.items()}
                    # ZeroShotClassificationPipeline.entailment_id, as HF's property reads it.
                    ent = next((i for lab, i in model.config.label2id.items() if lab.lower().startswith("entail")), -1)
                    pipe = type("Pipe", (P,), {"entailment_id": ent})()
                    pipe.model = model
                    for multi in (False, True):
                        r = pipe.postprocess(outs, multi_label=multi)
                        cases.append({"text": text, "template": template, "candidate_labels": labels, "order": order,
                                      "multi_label": multi, "result": r, "pair_ids": [o["ids"] for o in outs],
                                      "logits": [o["logits"][0].tolist() for o in outs]})
    json.dump({"source": "transformers 4.31 ZeroShotClassificationPipeline; HF Rust tokenizers on "
                         "tokenizer/testdata/deberta-v3-spm/tokenizer.json",
               "orders": {k: {str(i): l for i, l in v.items()} for k, v in orders.items()}, "cases": cases},
              open(os.path.join(d, "golden.json"), "w"))
    tok.p.kill()
    print("deberta-nli", len(cases), "cases")


if __name__ == "__main__":
    main()
