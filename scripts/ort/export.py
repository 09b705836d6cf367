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
# The tracer writes each view/reshape of the attention heads as a Reshape to a
# shape computed at run time (Shape, Gather, Unsqueeze, Concat of the batch and
# seq sizes with 12, 64 or 768). ONNX Runtime cannot infer the shape that comes
# out, and without it its SkipLayerNormalization fusion (the residual Add and
# the LayerNorm in one kernel, which a fixed-shape graph gets) does not fire. So
# each such shape is replaced by a constant one in which the copied leading
# sizes are 0 ("this dimension of the input", ONNX Reshape), e.g. [0, 0, 12, 64],
# and the shape computation left unused is dropped; ONNX shape inference then
# gives every activation [batch, seq, ...], checked on each Reshape's output.
# For the same reason the position ids are a cumulative sum over a row of ones
# made from attention_mask (0..seq-1 whatever the mask) rather than an arange of
# the traced length, and the token-type embedding (type 0 everywhere) is added
# as one vector.
#
# usage: python3 export.py OUT.onnx
import math
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
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
        # Positions 0..seq-1 and token type 0 everywhere, written so that
        # ONNX shape inference keeps [batch, seq] (an arange of the traced
        # length, or zeros_like, comes out of unknown shape).
        pos = torch.cumsum(attention_mask * 0 + 1, dim=1) - 1
        x = self.word(input_ids) + self.pos(pos) + self.typ.weight[0]
        x = self.ln(x)
        mask_add = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_add)
        return x


def constant_reshapes(model):
    """Rewrites Reshapes to run-time shapes of copied leading sizes and
    constants into Reshapes to constant shapes with 0s; returns how many."""
    g = model.graph
    prod = {o: n for n in g.node for o in n.output}
    inits = {t.name: t for t in g.initializer}

    def const(name):
        if name in inits:
            return numpy_helper.to_array(inits[name])
        n = prod.get(name)
        if n is not None and n.op_type == "Constant":
            return numpy_helper.to_array(n.attribute[0].t)
        return None

    def copied_dim(name):
        # Unsqueeze(Gather(Shape(x), k)): dimension k of some x, or None.
        u = prod.get(name)
        if u is None or u.op_type != "Unsqueeze":
            return None
        ga = prod.get(u.input[0])
        if ga is None or ga.op_type != "Gather" or prod.get(ga.input[0]) is None:
            return None
        if prod[ga.input[0]].op_type != "Shape":
            return None
        k = const(ga.input[1])
        return int(k) if k is not None and k.size == 1 else None

    count = 0
    for n in g.node:
        if n.op_type != "Reshape" or n.input[1] not in prod or prod[n.input[1]].op_type != "Concat":
            continue
        shape = []
        for i, part in enumerate(prod[n.input[1]].input):
            c = const(part)
            if c is not None:
                shape += [int(v) for v in c.reshape(-1)]
            elif copied_dim(part) == i == len(shape):
                shape.append(0)
            else:
                shape = None
                break
        if shape is None or any(v == 0 for v in shape[shape.count(0):]) or shape.count(0) == 0:
            continue
        name = n.output[0] + "_const_shape"
        g.initializer.append(numpy_helper.from_array(np.array(shape, np.int64), name))
        n.input[1] = name
        count += 1
    # Drop the nodes no longer used (the shape computations).
    while True:
        used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
        dead = [n for n in g.node if not any(o in used for o in n.output)]
        if not dead:
            break
        for n in dead:
            g.node.remove(n)
    used = {i for n in g.node for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    return count


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
    model = onnx.load(out)
    n = constant_reshapes(model)
    if n != 2 * LAYERS * 2:  # per layer: Q, K, V split, the merge after attention
        sys.exit(f"export.py: {n} Reshapes made constant, want {4 * LAYERS}")
    del model.graph.value_info[:]
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    g = model.graph
    for v in list(g.input) + list(g.output):
        dims = [d.dim_param or str(d.dim_value) for d in v.type.tensor_type.shape.dim]
        if dims[:2] != ["batch", "seq"]:
            sys.exit(f"export.py: {v.name} has shape {dims}, not [batch, seq, ...]")
    known = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in g.value_info}
    for node in g.node:
        if node.op_type == "Reshape" and known.get(node.output[0], [])[:2] != ["batch", "seq"]:
            sys.exit(f"export.py: {node.name}'s output has shape {known.get(node.output[0])}")
    del g.value_info[:]
    onnx.save(model, out)
    print(f"export.py: wrote {out} (dynamic batch and seq, {n} Reshapes to constant shapes, opset 13)")


if __name__ == "__main__":
    main()
