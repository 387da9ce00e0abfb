#!/usr/bin/python3
"""Builds a small Fashion-MNIST-shaped classifier with python3-onnx's helper API, as another
tool would write one, and numpy reference outputs for a fixed batch: what mlstudio's import
test reads back.

    /usr/bin/python3 tools/onnx/make_foreign_model.py OUTDIR
    -> OUTDIR/foreign.onnx, OUTDIR/input.npy (f32 [8,1,28,28]), OUTDIR/logits.npy (f32 [8,10])

The graph: Conv 3x3 (4 channels, pad 1, bias) - BatchNormalization - Relu - MaxPool 2 -
Flatten - Gemm (transB = 1, as PyTorch writes Linear) - Relu - MatMul + Add - Softmax.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    o, _, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, o, h, wd), dtype=np.float64)
    for i in range(k):
        for j in range(k):
            patch = xp[:, :, i:i + h, j:j + wd]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + b.reshape(1, o, 1, 1)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    w1 = rng.normal(0, 0.3, (4, 1, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (4,)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, (4,)).astype(np.float32)
    beta = rng.normal(0, 0.1, (4,)).astype(np.float32)
    mean = rng.normal(0, 0.1, (4,)).astype(np.float32)
    var = rng.uniform(0.5, 2.0, (4,)).astype(np.float32)
    w2 = rng.normal(0, 0.05, (32, 4 * 14 * 14)).astype(np.float32)  # [out, in]: transB
    b2 = rng.normal(0, 0.1, (32,)).astype(np.float32)
    w3 = rng.normal(0, 0.2, (32, 10)).astype(np.float32)
    b3 = rng.normal(0, 0.1, (10,)).astype(np.float32)

    inits = [numpy_helper.from_array(a, name) for a, name in [
        (w1, "conv.w"), (b1, "conv.b"), (gamma, "bn.scale"), (beta, "bn.bias"), (mean, "bn.mean"),
        (var, "bn.var"), (w2, "dense.w"), (b2, "dense.b"), (w3, "head.w"), (b3, "head.b")]]
    nodes = [
        helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c1"], name="conv", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["n1"],
                         name="bn", epsilon=1e-5),
        helper.make_node("Relu", ["n1"], ["r1"], name="act1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p1"], ["f1"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f1", "dense.w", "dense.b"], ["d1"], name="dense", transB=1),
        helper.make_node("Relu", ["d1"], ["r2"], name="act2"),
        helper.make_node("MatMul", ["r2", "head.w"], ["m3"], name="head_matmul"),
        helper.make_node("Add", ["m3", "head.b"], ["logits"], name="head_bias"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "foreign_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 28, 28])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])], inits)
    model = helper.make_model(graph, producer_name="python3-onnx helper",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "foreign.onnx"))

    x = rng.normal(0, 1, (8, 1, 28, 28)).astype(np.float32)
    h = conv2d(x.astype(np.float64), w1.astype(np.float64), b1.astype(np.float64), 1)
    h = (h - mean.reshape(1, 4, 1, 1)) / np.sqrt(var.reshape(1, 4, 1, 1) + 1e-5) * gamma.reshape(1, 4, 1, 1) \
        + beta.reshape(1, 4, 1, 1)
    h = np.maximum(h, 0)
    h = h.reshape(8, 4, 14, 2, 14, 2).max(axis=(3, 5))
    h = h.reshape(8, -1) @ w2.T.astype(np.float64) + b2
    h = np.maximum(h, 0)
    logits = h @ w3.astype(np.float64) + b3
    np.save(os.path.join(out, "input.npy"), x)
    np.save(os.path.join(out, "logits.npy"), logits.astype(np.float32))


if __name__ == "__main__":
    main()
