#!/usr/bin/python3
"""Tiny MPNet golden models and outputs from Hugging Face transformers 4.31 (the oracle).

Writes, for MPNetModel (mpnet-base) and MPNetForSequenceClassification (mpnet-seqcls):
  OUT/<name>/config.json         as save_pretrained writes it
  OUT/<name>/model.safetensors   save_pretrained(safe_serialization=True)
  OUT/<name>/golden.json         inputs, outputs of the same weights run in float64
                                 (nested lists), the float32 run's largest difference
                                 from them, parameter shapes, versions, and
                                 relative_position_buckets: Hugging Face's bucket of every
                                 relative position (key - query) from -600 to 600

Weights are HF's random init re-drawn as the shared goldens' (make_golden.py): LayerNorm
gamma = 1 + 0.1*N, every other tensor 0.1*N, except relative_attention_bias = N, so that
the bias visibly moves the attention. The inputs are three rows of 96, 70 and 23 tokens
(padded to 96): relative distances up to 95 use every bucket of both halves (but 16,
which no position reaches), the log-spaced ones included (32 buckets, max distance 128
in HF's code).

Run it from a set-up copy of the oracle (../shared/oracle: setup.sh), with /usr/bin/python3:
  ORACLE=/tmp/mpnet-oracle /usr/bin/python3 scripts/oracle/make_mpnet_golden.py \
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
from transformers import MPNetConfig, MPNetForSequenceClassification, MPNetModel  # noqa: E402
from transformers.models.mpnet.modeling_mpnet import MPNetEncoder  # noqa: E402


def rerandomize(model, gen):
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            r = torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype)
            if name.endswith("LayerNorm.weight"):
                p.copy_(1.0 + 0.1 * r)
            elif name.endswith("relative_attention_bias.weight"):
                p.copy_(r)
            else:
                p.copy_(0.1 * r)


def make_inputs(vocab, gen, seq=96):
    """<s> ... </s> rows (<s> 0, <pad> 1, </s> 2), one a pair (<s> A </s></s> B </s>)."""
    lengths = [seq, 70, 23]
    ids = torch.full((len(lengths), seq), 1, dtype=torch.long)
    mask = torch.zeros((len(lengths), seq), dtype=torch.long)
    for b, n in enumerate(lengths):
        body = torch.randint(5, vocab, (n,), generator=gen)
        body[0], body[n - 1] = 0, 2
        if b == 1:
            body[n // 2], body[n // 2 + 1] = 2, 2
        ids[b, :n] = body
        mask[b, :n] = 1
    return {"input_ids": ids, "attention_mask": mask}


def run(model, inp, dtype):
    m = model.to(dtype).eval()
    with torch.no_grad():
        out = m(**inp, return_dict=True)
    res = {}
    for k in ("last_hidden_state", "pooler_output", "logits"):
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
    labels = {"id2label": {0: "NEGATIVE", 1: "NEUTRAL", 2: "POSITIVE"},
              "label2id": {"NEGATIVE": 0, "NEUTRAL": 1, "POSITIVE": 2}}
    base = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=130, relative_attention_num_buckets=32)
    rel = torch.arange(-600, 601)
    buckets = MPNetEncoder.relative_position_bucket(rel).tolist()
    inp = make_inputs(vocab, torch.Generator().manual_seed(a.seed * 1000 + 31))
    for hi, (name, cls, extra) in enumerate([("mpnet-base", MPNetModel, {}),
                                             ("mpnet-seqcls", MPNetForSequenceClassification, labels)]):
        torch.manual_seed(a.seed)
        model = cls(MPNetConfig(**base, **extra))
        rerandomize(model, torch.Generator().manual_seed(a.seed * 1000 + 310 + hi))
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
        golden = {
            "model_class": cls.__name__,
            "family": "mpnet",
            "head": name.split("-")[1],
            "seed": a.seed,
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
            "params": {k: list(v.shape) for k, v in model.state_dict().items()},
            "inputs": {k: v.tolist() for k, v in inp.items()},
            "outputs": {k: v.astype(np.float64).tolist() for k, v in out64.items()},
            "max_abs_diff_f32_vs_f64": {k: float(np.abs(out32[k] - out64[k]).max()) for k in out32},
            "relative_position_buckets": {"from": -600, "buckets": buckets},
            "notes": "outputs: the float64 run, eval mode (no dropout), on CPU; "
                     "compare where attention_mask is 1",
        }
        with open(os.path.join(d, "golden.json"), "w") as fh:
            json.dump(golden, fh)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"{name:13s} {cls.__name__:32s} params={sum(p.numel() for p in model.parameters()):6d} "
              f"size={size / 1e3:.0f}KB f32-vs-f64 max={max(golden['max_abs_diff_f32_vs_f64'].values()):.2e}")


if __name__ == "__main__":
    main()
