#!/usr/bin/env python3
"""PyTorch reference for bench/epoch_vs_torch.py: the same model, data, batch and optimizer.

Prints one JSON line: median epoch seconds, samples/s, final test accuracy, peak RSS.
PyTorch runs with its default threads (on the 2-core CI machines: 1 OpenMP thread and
OpenBLAS's own threads), which is its fastest setting there; see the README.
"""
import argparse, gzip, json, resource, struct, sys, time

import numpy as np
import torch


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--model", choices=["mlp", "lenet"], default="mlp")
    # cuda: the data and the model on the GPU (bench/gpu_vs_torch.py), timed to completion.
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    dev = torch.device(args.device)
    mean, std = 0.2860, 0.3530
    shape = (-1, 784) if args.model == "mlp" else (-1, 1, 28, 28)
    x = torch.from_numpy(((read_idx(f"{args.data}/train-images-idx3-ubyte.gz").reshape(shape) / 255.0 - mean) / std).astype(np.float32))
    y = torch.from_numpy(read_idx(f"{args.data}/train-labels-idx1-ubyte.gz").astype(np.int64))
    xt = torch.from_numpy(((read_idx(f"{args.data}/t10k-images-idx3-ubyte.gz").reshape(shape) / 255.0 - mean) / std).astype(np.float32))
    yt = torch.from_numpy(read_idx(f"{args.data}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    x, y, xt, yt = x.to(dev), y.to(dev), xt.to(dev), yt.to(dev)
    torch.manual_seed(42)
    nn = torch.nn
    if args.model == "mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    else:  # LeNet-5 as in resources/examples/fashion-mnist-lenet.mls
        model = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    model = model.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = x.shape[0]
    times = []
    for epoch in range(args.epochs):
        perm = torch.randperm(n, device=dev)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(0, n, args.batch):
            idx = perm[i : i + args.batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    with torch.no_grad():
        acc = (model(xt).argmax(1) == yt).float().mean().item()
    med = sorted(times)[len(times) // 2]
    print(json.dumps({
        "epoch_seconds": med, "epoch_seconds_all": times, "samples_per_s": n / med, "test_accuracy": acc,
        "torch": torch.__version__, "threads": torch.get_num_threads(), "device": args.device,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    sys.exit(main())
