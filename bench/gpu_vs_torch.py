#!/usr/bin/env python3
"""One training epoch (batch 128) of the Fashion-MNIST MLP and LeNet-5 on a GPU: mlstudio's
CUDA and Vulkan backends beside PyTorch on CUDA, in one run, alternating.

  bench/gpu_vs_torch.py --device-epochs build-device/bench/device_epochs [--rounds 3] [--epochs 3]
                        [--devices cuda,vulkan] [--data /usr/share/datasets/fashion-mnist]

Each round runs each side as a fresh process training `--epochs` epochs; a round's figure is
the median epoch (training pass only, synchronised). Reported per model: the median over
rounds for each mlstudio device and PyTorch, and the ratio to PyTorch (the issue's target for
CUDA: <= 1.0). Runs where a GPU is lent (scripts/device-check); python3 is the one that holds
PyTorch there.
"""
import argparse, json, os, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, fatal=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        message = f"bench: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-400:]}"
        if fatal:
            sys.exit(message)
        print(message, flush=True)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device-epochs", default="build/bench/device_epochs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--devices", default="cuda,vulkan")
    ap.add_argument("--models", default="mlp,lenet")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    for model in args.models.split(","):
        project = os.path.join(HERE, "..", "resources", "examples", f"fashion-mnist-{model}.mls")
        ours = {d: [] for d in args.devices.split(",")}
        theirs = []
        for r in range(args.rounds):
            for d in list(ours):
                # A device that cannot train (no driver, say) is reported and left out.
                result = run([args.device_epochs, project, "--device", d, "--epochs", str(args.epochs)], fatal=False)
                if result is None:
                    del ours[d]
                else:
                    ours[d].append(result)
            theirs.append(run([args.python, os.path.join(HERE, "torch_reference.py"), "--epochs", str(args.epochs),
                               "--model", model, "--device", "cuda", "--data", args.data]))
            line = ", ".join(f"{d} {ours[d][-1]['epoch_seconds']:.3f} s" for d in ours)
            print(f"{model} round {r + 1}/{args.rounds}: {line}, torch cuda {theirs[-1]['epoch_seconds']:.3f} s", flush=True)
        t = statistics.median(x["epoch_seconds"] for x in theirs)
        print(f"{model}: PyTorch {theirs[-1]['torch']} on CUDA: {t:.3f} s/epoch, test accuracy {theirs[-1]['test_accuracy']:.4f}")
        for d, runs in ours.items():
            m = statistics.median(x["epoch_seconds"] for x in runs)
            print(f"{model}: mlstudio on {d}: {m:.3f} s/epoch = {m / t:.2f} x PyTorch, "
                  f"test accuracy {runs[-1]['test_accuracy']:.4f}")


if __name__ == "__main__":
    sys.exit(main())
