#!/usr/bin/python3
"""Tiny golden models of the RoBERTa, CamemBERT and ELECTRA families (the oracle).

Made as make_golden.py makes the shared ones (HF random init, then every tensor
re-drawn: LayerNorm gamma = 1+0.1*N, biases and the rest 0.1*N), but small enough to
commit as test fixtures (hidden 32, 2 layers, vocab 1000). For each model this writes
  OUT/<name>/config.json         exactly as save_pretrained writes it
  OUT/<name>/model.safetensors   save_pretrained(safe_serialization=True)
  OUT/<name>/golden.json         inputs, outputs (float32 run) and outputs_f64 (the
                                 same weights run in float64), parameter shapes, versions

Padded positions hold whatever HF computes there: compare where attention_mask == 1.

For ElectraForPreTraining, last_hidden_state is also checked equal to what ElectraModel
(AutoModel's class) computes from the same folder, the head's weights left unread.

usage: /usr/bin/python3 make_golden_families.py [--seed 0] [--out golden/families] [--only NAME ...]
"""
import argparse
import json
import os

import oracle_env  # noqa: F401
import numpy as np
import torch
import transformers
from transformers import (CamembertConfig, CamembertModel, ElectraConfig, ElectraForPreTraining,
                          ElectraForSequenceClassification, ElectraModel, RobertaConfig,
                          RobertaForSequenceClassification, RobertaModel)

HERE = os.path.dirname(os.path.abspath(__file__))

LABELS = {"id2label": {0: "NEGATIVE", 1: "NEUTRAL", 2: "POSITIVE"},
          "label2id": {"NEGATIVE": 0, "NEUTRAL": 1, "POSITIVE": 2}}


def models(a):
    tiny = dict(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                num_attention_heads=a.heads, intermediate_size=a.intermediate)
    # RoBERTa-style positions start at pad_token_id+1: max_pos = longest sequence + 2.
    roberta = dict(tiny, max_position_embeddings=a.max_pos + 2, type_vocab_size=1, layer_norm_eps=1e-5)
    rob = lambda **kw: RobertaConfig(**roberta, pad_token_id=1, bos_token_id=0, eos_token_id=2, **kw)
    # camembert-base's special ids: <pad> 1, <s> 5, </s> 6.
    cam = lambda **kw: CamembertConfig(**roberta, pad_token_id=1, bos_token_id=5, eos_token_id=6, **kw)
    # ELECTRA discriminators: BERT's vocabulary layout, absolute positions, token types.
    ele = lambda emb, **kw: ElectraConfig(**tiny, embedding_size=emb, max_position_embeddings=a.max_pos,
                                          pad_token_id=0, **kw)
    # name: (config, class, token layout (cls, sep, pad), token types)
    return {
        "roberta-base-tiny": (rob(), RobertaModel, (0, 2, 1), False),
        "roberta-seqcls": (rob(**LABELS), RobertaForSequenceClassification, (0, 2, 1), False),
        "camembert-base": (cam(), CamembertModel, (5, 6, 1), False),
        # embedding_size != hidden_size: the embeddings_project linear.
        "electra-base": (ele(a.hidden // 2), ElectraModel, (101, 102, 0), True),
        # embedding_size == hidden_size: no projection (electra-base-discriminator's shape).
        "electra-seqcls": (ele(a.hidden, **LABELS), ElectraForSequenceClassification, (101, 102, 0), True),
        # A discriminator as google/electra-*-discriminator are published (ElectraForPreTraining):
        # embedding_size != hidden_size (electra-small's shape), the replaced-token detection head
        # (discriminator_predictions: dense, hidden_act, dense_prediction: one logit per token).
        "electra-discriminator": (ele(a.hidden // 2), ElectraForPreTraining, (101, 102, 0), True),
    }


def rerandomize(model, gen):
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            r = torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype)
            if name.endswith("LayerNorm.weight"):
                p.copy_(1.0 + 0.1 * r)
            else:
                p.copy_(0.1 * r)


def make_inputs(layout, types, vocab, gen, batch=4, seq=16):
    """Special tokens as the real tokenizers place them; rows padded differently."""
    cls_, sep, pad = layout
    lengths = [seq, seq - 3, 9, 3][:batch]
    ids = torch.full((batch, seq), pad, dtype=torch.long)
    mask = torch.zeros((batch, seq), dtype=torch.long)
    tt = torch.zeros((batch, seq), dtype=torch.long)
    for b, n in enumerate(lengths):
        body = torch.randint(7, vocab, (n,), generator=gen)
        while bool(((body == cls_) | (body == sep) | (body == pad)).any()):
            body = torch.randint(7, vocab, (n,), generator=gen)
        body[0], body[n - 1] = cls_, sep
        if n >= 8:  # sentence pair: <s> A </s></s> B </s> (RoBERTa), [CLS] A [SEP] B [SEP]
            split = n // 2
            body[split] = sep
            if types:
                tt[b, split + 1:n] = 1
            else:
                body[split + 1] = sep
        ids[b, :n] = body
        mask[b, :n] = 1
    inp = {"input_ids": ids, "attention_mask": mask}
    if types:
        inp["token_type_ids"] = tt
    return inp


def run(model, inp, dtype):
    m = model.to(dtype).eval()
    with torch.no_grad():
        out = m(**inp, output_hidden_states=True, return_dict=True)
    res = {}
    for k in ("last_hidden_state", "pooler_output", "logits", "start_logits", "end_logits"):
        v = getattr(out, k, None)
        if v is not None:
            res[k] = v.numpy()
    # A head's output has no last_hidden_state: the last of hidden_states is it.
    res.setdefault("last_hidden_state", out.hidden_states[-1].numpy())
    model.to(torch.float32)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(HERE, "golden", "families"))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--max-pos", dest="max_pos", type=int, default=64)
    ap.add_argument("--only", nargs="*", default=None, help="make only these models (the others' seeds are unchanged)")
    a = ap.parse_args()
    torch.set_num_threads(1)  # bit-reproducible across runs

    for mi, (name, (cfg, cls, layout, types)) in enumerate(models(a).items()):
        if a.only and name not in a.only:
            continue
        inp = make_inputs(layout, types, a.vocab, torch.Generator().manual_seed(a.seed * 1000 + 100 + mi))
        torch.manual_seed(a.seed)
        model = cls(cfg)
        rerandomize(model, torch.Generator().manual_seed(a.seed * 1000 + 200 + mi))
        model.eval()
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        model.save_pretrained(d, safe_serialization=True)
        out32 = run(model, inp, torch.float32)
        out64 = run(model, inp, torch.float64)
        m2 = cls.from_pretrained(d, use_safetensors=True)
        o2 = run(m2, inp, torch.float32)
        for k in out32:
            assert np.array_equal(out32[k], o2[k]), (name, k)
        if cls is ElectraForPreTraining:
            # What AutoModel opens from the folder: the encoder alone.
            base = ElectraModel.from_pretrained(d, use_safetensors=True)
            ob = run(base, inp, torch.float32)
            assert np.array_equal(ob["last_hidden_state"], out32["last_hidden_state"]), name
        sd = model.state_dict()
        golden = {
            "model_class": cls.__name__,
            "family": cfg.model_type,
            "seed": a.seed,
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
            "params": {k: list(v.shape) for k, v in sd.items()},
            "inputs": {k: v.tolist() for k, v in inp.items()},
            "outputs": {k: v.astype(np.float32).tolist() for k, v in out32.items()},
            "outputs_f64": {k: v.astype(np.float64).tolist() for k, v in out64.items()},
            "max_abs_diff_f32_vs_f64": {k: float(np.abs(out32[k] - out64[k]).max()) for k in out32},
            "notes": "outputs: eval mode (no dropout), float32 on CPU; outputs_f64: the same weights "
                     "and inputs in float64; compare where attention_mask is 1",
        }
        with open(os.path.join(d, "golden.json"), "w") as fh:
            json.dump(golden, fh)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"{name:18s} {cls.__name__:34s} params={sum(p.numel() for p in model.parameters()):7d} "
              f"size={size / 1e3:.0f}KB f32-vs-f64 max={max(golden['max_abs_diff_f32_vs_f64'].values()):.2e}")


if __name__ == "__main__":
    main()
