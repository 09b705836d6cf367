#!/usr/bin/python3
"""Tiny DeBERTa-v2/v3 golden models and outputs from Hugging Face transformers 4.31 (the oracle).

Writes, for each case below:
  OUT/<name>/config.json         as save_pretrained writes it
  OUT/<name>/model.safetensors   save_pretrained(safe_serialization=True)
  OUT/<name>/golden.json         inputs, outputs of the same weights run in float64
                                 (nested lists), the float32 run's largest difference
                                 from them, parameter shapes, versions, and
                                 relative_position_buckets: Hugging Face's
                                 build_relative_position (query - key, bucketed as the
                                 config says) of every relative position from -600 to 600

The cases (hidden 32, 2 heads, 2 layers, vocabulary 500, relative_attention true,
pos_att_type ["p2c", "c2p"], share_att_key true, norm_rel_ebd "layer_norm",
position_biased_input false, max_relative_positions -1 unless said):
  deberta-v3-base    DebertaV2Model, position_buckets 256 (as DeBERTa-v3)
  deberta-v3-seqcls  DebertaV2ForSequenceClassification (3 labels), position_buckets 256
  deberta-v3-tokcls  DebertaV2ForTokenClassification (5 labels), position_buckets 16, so
                     that the log-spaced buckets are used (distances above 8)
  deberta-v2-base    DebertaV2Model, position_buckets -1 (as DeBERTa-v2): unbucketed
                     relative positions over max_position_embeddings
  deberta-v2-qa      DebertaV2ForQuestionAnswering, position_buckets -1,
                     max_relative_positions 24 (relative positions clamped), type_vocab_size 2
                     with token_type_ids

Weights are HF's random init re-drawn as the shared goldens' (make_golden.py): LayerNorm
gamma = 1 + 0.1*N, every other tensor 0.1*N, except rel_embeddings = N, so that the
relative terms visibly move the attention. The inputs are three rows of 64, 45 and 13
tokens (padded to 64 with id 0; [CLS] 1, [SEP] 2 as DeBERTa-v3's vocabulary).

Run it from a set-up copy of the oracle (../shared/oracle: setup.sh), with /usr/bin/python3:
  ORACLE=/tmp/deberta-oracle /usr/bin/python3 scripts/oracle/make_deberta_golden.py \
      --out models/testdata/golden
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.environ.get("ORACLE", os.getcwd()))
import oracle_env  # noqa: F401,E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (DebertaV2Config, DebertaV2ForQuestionAnswering,  # noqa: E402
                          DebertaV2ForSequenceClassification, DebertaV2ForTokenClassification,
                          DebertaV2Model)
from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position  # noqa: E402


def rerandomize(model, gen):
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            r = torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype)
            if name.endswith("LayerNorm.weight"):
                p.copy_(1.0 + 0.1 * r)
            elif name.endswith("rel_embeddings.weight"):
                p.copy_(r)
            else:
                p.copy_(0.1 * r)


def make_inputs(vocab, gen, types, seq=64):
    """[CLS] ... [SEP] rows ([PAD] 0, [CLS] 1, [SEP] 2), one a pair ([CLS] A [SEP] B [SEP])."""
    lengths = [seq, 45, 13]
    ids = torch.zeros((len(lengths), seq), dtype=torch.long)
    mask = torch.zeros((len(lengths), seq), dtype=torch.long)
    tt = torch.zeros((len(lengths), seq), dtype=torch.long)
    for b, n in enumerate(lengths):
        body = torch.randint(5, vocab, (n,), generator=gen)
        body[0], body[n - 1] = 1, 2
        if b == 1:
            body[n // 2] = 2
            tt[b, n // 2 + 1:n] = 1
        ids[b, :n] = body
        mask[b, :n] = 1
    inp = {"input_ids": ids, "attention_mask": mask}
    if types:
        inp["token_type_ids"] = tt
    return inp


def run(model, inp, dtype):
    m = model.to(dtype).eval()
    with torch.no_grad():
        out = m(**inp, return_dict=True)
    res = {}
    for k in ("last_hidden_state", "logits", "start_logits", "end_logits"):
        v = getattr(out, k, None)
        if v is not None:
            res[k] = v.numpy()
    model.to(torch.float32)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)  # bit-reproducible across runs
    vocab = 500
    base = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=512, type_vocab_size=0,
                relative_attention=True, pos_att_type=["p2c", "c2p"], share_att_key=True,
                norm_rel_ebd="layer_norm", position_biased_input=False, max_relative_positions=-1,
                hidden_act="gelu", pad_token_id=0)
    seq_labels = {"id2label": {0: "contradiction", 1: "entailment", 2: "neutral"},
                  "label2id": {"contradiction": 0, "entailment": 1, "neutral": 2}}
    tok_names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    tok_labels = {"id2label": dict(enumerate(tok_names)), "label2id": {n: i for i, n in enumerate(tok_names)}}
    cases = [
        ("deberta-v3-base", DebertaV2Model, dict(position_buckets=256)),
        ("deberta-v3-seqcls", DebertaV2ForSequenceClassification, dict(position_buckets=256, **seq_labels)),
        ("deberta-v3-tokcls", DebertaV2ForTokenClassification, dict(position_buckets=16, **tok_labels)),
        ("deberta-v2-base", DebertaV2Model, dict(position_buckets=-1)),
        ("deberta-v2-qa", DebertaV2ForQuestionAnswering,
         dict(position_buckets=-1, max_relative_positions=24, type_vocab_size=2)),
    ]
    rel = torch.arange(-600, 601)
    for hi, (name, cls, extra) in enumerate(cases):
        cfg = DebertaV2Config(**{**base, **extra})
        inp = make_inputs(vocab, torch.Generator().manual_seed(a.seed * 1000 + 41), cfg.type_vocab_size > 0)
        torch.manual_seed(a.seed)
        model = cls(cfg)
        rerandomize(model, torch.Generator().manual_seed(a.seed * 1000 + 410 + hi))
        model.eval()
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            if f != "README.md":
                os.remove(os.path.join(d, f))
        model.save_pretrained(d, safe_serialization=True)
        out32 = run(model, inp, torch.float32)
        out64 = run(model, inp, torch.float64)
        m2 = cls.from_pretrained(d, use_safetensors=True)
        o2 = run(m2, inp, torch.float32)
        for k in out32:
            assert np.array_equal(out32[k], o2[k]), (name, k)
        # HF's relative position of query 600 and keys 0..1200 (query - key from 600 to -600),
        # bucketed as the encoder does; listed from -600 up.
        enc = model.deberta.encoder if hasattr(model, "deberta") else model.encoder
        rp = build_relative_position(601, 1201, bucket_size=enc.position_buckets,
                                     max_position=enc.max_relative_positions)[0, 600]
        buckets = rp.flip(0).tolist()
        assert rp[600].item() == 0
        golden = {
            "model_class": cls.__name__,
            "family": "deberta-v2",
            "head": name.split("-")[2],
            "seed": a.seed,
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
            "params": {k: list(v.shape) for k, v in model.state_dict().items()},
            "inputs": {k: v.tolist() for k, v in inp.items()},
            "outputs": {k: v.astype(np.float64).tolist() for k, v in out64.items()},
            "max_abs_diff_f32_vs_f64": {k: float(np.abs(out32[k] - out64[k]).max()) for k in out32},
            "relative_position_buckets": {"from": int(rel[0]), "buckets": buckets,
                                          "position_buckets": enc.position_buckets,
                                          "max_relative_positions": enc.max_relative_positions},
            "notes": "outputs: the float64 run, eval mode (no dropout), on CPU; "
                     "compare where attention_mask is 1",
        }
        with open(os.path.join(d, "golden.json"), "w") as fh:
            json.dump(golden, fh)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"{name:18s} {cls.__name__:36s} params={sum(p.numel() for p in model.parameters()):6d} "
              f"size={size / 1e3:.0f}KB f32-vs-f64 max={max(golden['max_abs_diff_f32_vs_f64'].values()):.2e}")


if __name__ == "__main__":
    main()
