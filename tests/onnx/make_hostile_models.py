#!/usr/bin/python3
"""Writes ONNX files that mlstudio's importer must refuse with a message (not crash, not read
what they point at), with python3-onnx's helper API and no checker, as a hostile tool would:

    /usr/bin/python3 tests/onnx/make_hostile_models.py OUTDIR

-> OUTDIR/conv_strides0.onnx, maxpool_strides0.onnx, conv_dilations0.onnx, conv_group0.onnx,
   pool_kernel0.onnx, conv_pads_negative.onnx  (attributes libonnx's shape inference divides
   by or trusts)
   OUTDIR/opset18.onnx                            (an operator set newer than mlstudio knows)
   OUTDIR/linear_<name>.onnx                      (x [N, 4] -> MatMul -> y [N, 3], with
   "mlstudio.dataset" metadata: see DATASETS)
"""
import json
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

# The "mlstudio.dataset" metadata of each linear_<name>.onnx. Paths are what an attacker
# writes; the test makes link.csv (a symlink to /etc/passwd) and ok.csv itself.
DATASETS = {
    "abs": {"source": "csv", "path": "/etc/passwd", "csv": {"target": "label"}},
    "dotdot": {"source": "csv", "path": "../../../../../../../../etc/passwd", "csv": {"target": "label"}},
    "link": {"source": "csv", "path": "link.csv", "csv": {"target": "label"}},
    "labels": {"source": "npy", "path": "x.npy", "npy": {"labels": "/etc/passwd"}},
    "ok": {"source": "csv", "path": "ok.csv", "csv": {"target": "label"}},
    "none": None,
}


def save(model, path):
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def image_model(op, attrs, opset=17):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 28, 28])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 10, 10])
    inits = []
    inputs = ["x"]
    if op == "Conv":
        inits.append(numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w"))
        inputs.append("w")
    node = helper.make_node(op, inputs, ["y"], name="bad_" + op.lower(), **attrs)
    graph = helper.make_graph([node], "hostile", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def linear_model(metadata, opset=17):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")
    graph = helper.make_graph([node], "linear", [x], [y], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if metadata:
        helper.set_model_props(model, metadata)
    return model


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    k3 = {"kernel_shape": [3, 3]}
    save(image_model("Conv", dict(k3, strides=[0, 0])), os.path.join(out, "conv_strides0.onnx"))
    save(image_model("MaxPool", {"kernel_shape": [2, 2], "strides": [0, 0]}), os.path.join(out, "maxpool_strides0.onnx"))
    save(image_model("Conv", dict(k3, dilations=[0, 0])), os.path.join(out, "conv_dilations0.onnx"))
    save(image_model("Conv", dict(k3, group=0)), os.path.join(out, "conv_group0.onnx"))
    save(image_model("MaxPool", {"kernel_shape": [0, 0]}), os.path.join(out, "pool_kernel0.onnx"))
    save(image_model("Conv", dict(k3, pads=[-1, -1, -1, -1])), os.path.join(out, "conv_pads_negative.onnx"))
    save(linear_model(None, opset=18), os.path.join(out, "opset18.onnx"))
    for name, dataset in DATASETS.items():
        meta = {"mlstudio.dataset": json.dumps(dataset)} if dataset else None
        save(linear_model(meta), os.path.join(out, "linear_" + name + ".onnx"))


if __name__ == "__main__":
    main()
