# export.py: writes a BERT-base encoder with random weights to an FP32 ONNX graph.
#
# Part of scripts/bench-ort.sh (the optional comparison against ONNX Runtime).
# Needs Debian's python3-torch (1.13); transformers is not used: the model is
# written here in plain torch with BERT-base's shapes (12 layers, hidden 768,
# 12 heads, FFN 3072, vocab 30522, 512 positions), post-LayerNorm, erf GELU,
# softmax attention with an additive padding mask. Weights are N(0, 0.02),
# seeded, so the graph is the same on every run. Inputs: input_ids and
# attention_mask, int64 [batch, seq]; output: last_hidden_state, float
# [batch, seq, 768]. Both axes are dynamic (dynamic_axes): one graph serves
# every batch and sequence length (up to the 512 positions). It is traced
# with a batch of 2 and 16 tokens, so that no size 1 is baked in as a
# broadcast, and the export is checked by giving the graph's inputs and
# output named (symbolic) dimensions.
#
# usage: python3 export.py OUT.onnx
import math
import sys

import onnx
import torch
from torch import nn

HIDDEN, LAYERS, HEADS, FFN, VOCAB, POSITIONS = 768, 12, 12, 3072, 30522, 512


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(HIDDEN, HIDDEN)
        self.k = nn.Linear(HIDDEN, HIDDEN)
        self.v = nn.Linear(HIDDEN, HIDDEN)
        self.o = nn.Linear(HIDDEN, HIDDEN)
        self.ln1 = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.up = nn.Linear(HIDDEN, FFN)
        self.down = nn.Linear(FFN, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.gelu = nn.GELU()  # erf form

    def forward(self, x, mask_add):
        b, s, _ = x.shape
        d = HIDDEN // HEADS

        def heads(t):
            return t.view(b, s, HEADS, d).transpose(1, 2)  # [b, h, s, d]

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + mask_add
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.transpose(1, 2).reshape(b, s, HIDDEN)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.down(self.gelu(self.up(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Embedding(POSITIONS, HIDDEN)
        self.typ = nn.Embedding(2, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long).unsqueeze(0)
        x = self.word(input_ids) + self.pos(pos) + self.typ(torch.zeros_like(input_ids))
        x = self.ln(x)
        mask_add = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_add)
        return x


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    torch.manual_seed(13)
    model = Encoder().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.02)
            elif ".ln" in name or name.startswith("ln."):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    ids = torch.randint(0, VOCAB, (2, 16), dtype=torch.long)
    mask = torch.ones(2, 16, dtype=torch.long)
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(
        model, (ids, mask), out,
        input_names=["input_ids", "attention_mask"],
        output_names=["last_hidden_state"],
        dynamic_axes={"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes},
        opset_version=13, do_constant_folding=True)
    g = onnx.load(out, load_external_data=False).graph
    for v in list(g.input) + list(g.output):
        dims = [d.dim_param or str(d.dim_value) for d in v.type.tensor_type.shape.dim]
        if dims[:2] != ["batch", "seq"]:
            sys.exit(f"export.py: {v.name} has shape {dims}, not [batch, seq, ...]")
    print(f"export.py: wrote {out} (dynamic batch and seq, opset 13)")


if __name__ == "__main__":
    main()
