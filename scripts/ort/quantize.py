# quantize.py: rewrites an FP32 ONNX encoder into its dynamic INT8 form.
#
# Part of scripts/bench-ort.sh. Needs Debian's python3-onnx (1.12) and numpy; no
# ONNX Runtime on the Python side. It produces the graph ONNX Runtime's own
# dynamic quantization produces for a linear layer, written here with the onnx
# helper API:
#
#   x --DynamicQuantizeLinear--> x_u8, x_scale, x_zero   (u8, one scale per tensor)
#   MatMulInteger(x_u8, W_s8, x_zero, W_zero=0) -> int32
#   Cast(float) -> Mul(., Mul(x_scale, W_scale[N])) -> the old MatMul's output
#
# W_s8 is per output column symmetric: scale[n] = max|W[:, n]| / 127, values
# rounded to [-127, 127], zero point 0. Every MatMul whose second input is a 2-D
# initializer (the 72 linears of BERT-base) is rewritten; the bias Add that
# follows is kept in FP32, and the attention MatMuls (activation x activation)
# stay FP32, as in ours. A quantized input shared by several linears (Q, K, V)
# is quantized once.
#
# usage: python3 quantize.py IN_fp32.onnx OUT_int8.onnx
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    src, dst = sys.argv[1], sys.argv[2]
    model = onnx.load(src)
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    used_as_weight = set()
    quantized_inputs = {}  # activation name -> (u8, scale, zero)
    new_inits = []
    nodes = []
    count = 0
    for node in g.node:
        w = inits.get(node.input[1]) if node.op_type == "MatMul" else None
        if w is None or len(w.dims) != 2:
            nodes.append(node)
            continue
        count += 1
        base = node.name or node.output[0]
        wf = numpy_helper.to_array(w).astype(np.float32)  # [K, N]
        scale = np.abs(wf).max(axis=0) / 127.0
        scale[scale == 0] = 1.0
        wq = np.clip(np.rint(wf / scale), -127, 127).astype(np.int8)
        wq_name, ws_name, wz_name = w.name + "_s8", w.name + "_scale", w.name + "_zero"
        if w.name not in used_as_weight:
            used_as_weight.add(w.name)
            new_inits += [
                numpy_helper.from_array(wq, wq_name),
                numpy_helper.from_array(scale.astype(np.float32), ws_name),
                numpy_helper.from_array(np.zeros(wq.shape[1], np.int8), wz_name),
            ]
        x = node.input[0]
        if x not in quantized_inputs:
            q = (x + "_u8", x + "_scale", x + "_zero")
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(q),
                                          name=x + "_dql"))
            quantized_inputs[x] = q
        xq, xs, xz = quantized_inputs[x]
        nodes += [
            helper.make_node("MatMulInteger", [xq, wq_name, xz, wz_name],
                             [base + "_i32"], name=base + "_mmi"),
            helper.make_node("Cast", [base + "_i32"], [base + "_f32"],
                             to=TensorProto.FLOAT, name=base + "_cast"),
            helper.make_node("Mul", [xs, ws_name], [base + "_scales"],
                             name=base + "_scales_mul"),
            helper.make_node("Mul", [base + "_f32", base + "_scales"],
                             [node.output[0]], name=base + "_rescale"),
        ]
    still_used = {i for n in nodes for i in n.input}
    keep = [t for t in g.initializer if t.name in still_used]
    del g.initializer[:]
    g.initializer.extend(keep + [t for t in new_inits if t.name in still_used])
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(model)
    onnx.save(model, dst)
    print(f"quantize.py: wrote {dst} ({count} linears to MatMulInteger, per-column s8)")


if __name__ == "__main__":
    main()
