#!/usr/bin/python3
"""Golden masked-LM models for int8bert's fill-mask and SPLADE tests (issue 31).

Writes, under OUT (models/testdata/mlm in the repository), one folder per
family with a masked language modeling head:

  bert-mlm/        BertForMaskedLM        + the 1,000-entry WordPiece vocab.txt
  distilbert-mlm/  DistilBertForMaskedLM  + the same vocab.txt
  xlm-roberta-mlm/ XLMRobertaForMaskedLM  (token ids only: the oracle has no
                                           sentencepiece to run its tokenizer)

each holding config.json and model.safetensors as save_pretrained writes them
(the decoder's weight and bias tied to the word embeddings and the head's
bias, so left out), the tokenizer files save_pretrained writes, and:

  logits.f32   the head's logits on golden.json's padded id inputs, float32
               little-endian, [batch][seq][vocab] (rows where attention_mask
               is 0 hold whatever HF computes there)
  golden.json  the inputs; the logits' shape; "splade": for each input row,
               the non-zero entries [index, value] of max over the rows whose
               mask is 1 of log(1 + relu(logits)), computed in float64 from
               HF's float32 logits; and for the folders with a tokenizer
               "fill_mask": HF transformers 4.31's FillMaskPipeline outputs
               (calls with top_k and targets) and "splade_text": SPLADE
               vectors of texts tokenized by HF's tokenizer.

Weights are HF's random init re-drawn as make_golden.py does (LayerNorm
gamma 1 + 0.1 N, everything else 0.1 N); shapes are tiny (hidden 32, 2
layers, 2 heads, intermediate 64, vocabulary 1,000).

The reference is the project's offline oracle (shared/oracle: transformers
4.31.0, Debian python3-torch 1.13); run it from a set-up copy of it:

    cp -r ../shared/oracle /tmp/o && (cd /tmp/o && ./setup.sh)
    ORACLE=/tmp/o /usr/bin/python3 scripts/oracle/make_mlm_golden.py models/testdata/mlm

vocab.txt is models/testdata/sentence_text/vocab.txt (drawn from
bert-base-uncased's vocabulary, Apache-2.0: see the README there).
"""
import json
import logging
import os
import shutil
import sys

ORACLE = os.environ.get("ORACLE", "/tmp/mlm-oracle")
sys.path.insert(0, ORACLE)
import oracle_env  # noqa: F401,E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (BertConfig, BertForMaskedLM, BertTokenizer, DistilBertConfig,  # noqa: E402
                          DistilBertForMaskedLM, DistilBertTokenizer, XLMRobertaConfig,
                          XLMRobertaForMaskedLM)
import transformers.models.bert as _bert  # noqa: E402

# Without the Rust tokenizers package, transformers.pipelines fails to import
# (transformers.data asks for BertTokenizerFast); the fill-mask pipeline itself
# runs on the slow tokenizer, so a placeholder class lets the import through.
_bert.BertTokenizerFast = type("BertTokenizerFast", (), {})
from transformers import pipeline  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "..", "models", "testdata", "sentence_text", "vocab.txt")

SIZES = dict(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, max_position_embeddings=64)

FILL_TEXTS = [
    "the man went to the [MASK].",
    "she [MASK] the house in the city, and he knew it.",
    "[MASK] is a good song",
    "the [MASK] of the [MASK] is here!",
    "Héllo, the old [MASK] road's end",
]
FILL_CALLS = [
    {},
    {"top_k": 3},
    {"top_k": 30},
    {"targets": ["house", "city", "car", "music"]},
    {"targets": ["house", "house", "City", "zzqx"], "top_k": 2},
]
SPLADE_TEXTS = ["the man went to the city.", "a good song", "Héllo world, this is a longer text about the river and the king"]


def rerandomize(model, gen):
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            r = torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype)
            if name.endswith("LayerNorm.weight") or name.endswith("layer_norm.weight"):
                p.copy_(1.0 + 0.1 * r)
            else:
                p.copy_(0.1 * r)


def splade(logits, mask):
    v = np.log1p(np.maximum(logits.astype(np.float64), 0.0)) * mask[..., None]
    v = v.max(axis=1)
    return [[[int(j), float(x)] for j, x in enumerate(row) if x != 0] for row in v]


def id_inputs(family, gen):
    cls_, sep, pad = (0, 2, 1) if family == "xlm-roberta" else (101, 102, 0)
    mask_id = 999 if family == "xlm-roberta" else 103
    lengths, seq = [10, 7, 4], 10
    ids = torch.full((3, seq), pad, dtype=torch.long)
    att = torch.zeros((3, seq), dtype=torch.long)
    for b, n in enumerate(lengths):
        body = torch.randint(5, 999, (n,), generator=gen)
        body[0], body[n - 1] = cls_, sep
        if n > 4:
            body[2] = mask_id
        ids[b, :n], att[b, :n] = body, 1
    inp = {"input_ids": ids, "attention_mask": att}
    if family == "bert":
        inp["token_type_ids"] = torch.zeros_like(ids)
    return inp


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    fams = {
        "bert": (BertForMaskedLM, lambda: BertConfig(**SIZES), BertTokenizer),
        "distilbert": (DistilBertForMaskedLM, lambda: DistilBertConfig(
            vocab_size=1000, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64),
            DistilBertTokenizer),
        "xlm-roberta": (XLMRobertaForMaskedLM, lambda: XLMRobertaConfig(
            **{**SIZES, "max_position_embeddings": 66}, type_vocab_size=1, pad_token_id=1,
            bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5), None),
    }
    warnings = []

    class Catch(logging.Handler):
        def emit(self, rec):
            warnings.append(rec.getMessage())
    logging.getLogger("transformers.pipelines.fill_mask").addHandler(Catch())

    for fi, (family, (cls, mkcfg, tokcls)) in enumerate(fams.items()):
        torch.manual_seed(fi)
        model = cls(mkcfg())
        rerandomize(model, torch.Generator().manual_seed(31000 + fi))
        model.eval()
        d = os.path.join(out, f"{family}-mlm")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        model.save_pretrained(d, safe_serialization=True)
        inp = id_inputs(family, torch.Generator().manual_seed(fi))
        with torch.no_grad():
            logits = model(**inp).logits.numpy().astype(np.float32)
        m2 = cls.from_pretrained(d)
        with torch.no_grad():
            assert np.array_equal(logits, m2.eval()(**inp).logits.numpy())
        logits.astype("<f4").tofile(os.path.join(d, "logits.f32"))
        golden = {
            "model_class": cls.__name__,
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
            "inputs": {k: v.tolist() for k, v in inp.items()},
            "logits_shape": list(logits.shape),
            "splade": splade(logits, inp["attention_mask"].numpy()),
        }
        if tokcls is not None:
            tokcls(VOCAB, do_lower_case=True).save_pretrained(d)
            # Loaded back as a user loads it (from_pretrained registers the
            # special tokens that must not be split: [MASK]).
            tok = tokcls.from_pretrained(d)
            fm = pipeline("fill-mask", model=model, tokenizer=tok, framework="pt")
            calls = []
            for c in FILL_CALLS:
                warnings.clear()
                res = [fm(t, **c) for t in FILL_TEXTS]
                calls.append({"args": c, "results": res, "warnings": list(warnings)})
            golden["fill_mask"] = {"texts": FILL_TEXTS, "calls": calls}
            enc = tok(SPLADE_TEXTS, padding=True, return_tensors="pt")
            with torch.no_grad():
                tl = model(**enc).logits.numpy().astype(np.float32)
            golden["splade_text"] = {"texts": SPLADE_TEXTS, "input_ids": enc["input_ids"].tolist(),
                                     "vectors": splade(tl, enc["attention_mask"].numpy())}
        with open(os.path.join(d, "golden.json"), "w") as fh:
            json.dump(golden, fh, indent=None, separators=(",", ":"))
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"{family:12s} {cls.__name__:24s} {size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
