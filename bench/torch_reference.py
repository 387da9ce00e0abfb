#!/usr/bin/env python3
"""PyTorch reference for bench/epoch_vs_torch.py and bench/cost_curves.py: the same model,
data, batch and optimizer.

  --model mlp     784-W-W/2-10 (--width W, default 256: the MLP example, 784-256-128-10)
  --model lenet   LeNet-5 as in resources/examples/fashion-mnist-lenet.mls
  --model resnet  resources/examples/fashion-mnist-resnet.mls with --channels C (default 16):
                  stem conv C, a residual block of two convs C, conv 2C, global average pool
  --limit N       train on the first N training images only (mlstudio's --limit)
  --test-limit N  evaluate on the first N test images only (mlstudio's --test-limit)

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


class ResNet(torch.nn.Module):
    """resources/examples/fashion-mnist-resnet.mls with c channels (16 there): conv 3x3 c - BN -
    ReLU - max pool, a residual block (conv c - BN - ReLU - conv c - BN, + its input, ReLU), max
    pool, conv 3x3 2c - BN - ReLU, global average pool, linear to 10."""

    def __init__(self, c):
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(1, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2))
        self.res = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                                 nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        self.head = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(c, 2 * c, 3, padding=1, bias=False), nn.BatchNorm2d(2 * c),
                                  nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, 10))

    def forward(self, x):
        x = self.stem(x)
        return self.head(torch.relu(self.res(x) + x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--model", choices=["mlp", "lenet", "resnet"], default="mlp")
    ap.add_argument("--width", type=int, default=256, help="mlp: the first hidden layer (the second is half)")
    ap.add_argument("--channels", type=int, default=16, help="resnet: the stem's and the block's channels")
    ap.add_argument("--limit", type=int, default=0, help="train on the first N images (0: all)")
    ap.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test images (0: all)")
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
    if args.limit > 0:
        x, y = x[: args.limit], y[: args.limit]
    if args.test_limit > 0:
        xt, yt = xt[: args.test_limit], yt[: args.test_limit]
    x, y, xt, yt = x.to(dev), y.to(dev), xt.to(dev), yt.to(dev)
    torch.manual_seed(42)
    nn = torch.nn
    if args.model == "mlp":
        w = args.width
        model = nn.Sequential(nn.Linear(784, w), nn.ReLU(), nn.Linear(w, w // 2), nn.ReLU(), nn.Linear(w // 2, 10))
    elif args.model == "resnet":
        model = ResNet(args.channels)
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
