#!/usr/bin/env python3
"""Memory of one training step: what mlstudio's compiler plans beside what PyTorch holds.

  bench/step_memory.py --mlstudio build/app/mlstudio [--model mlp|lenet|both]

mlstudio: the planned peak of the compiled training step (forward, backward and the
gradients it writes: `planned_step_bytes` in `mlstudio --run --json`), read from a short
run of the bundled example.

PyTorch (Debian's python3-torch, CPU): the same model, batch 128 and loss; one step is
profiled with `profile_memory=True` after a warm-up step, and every allocation and free
during `zero_grad(set_to_none=True); loss = f(model(x), y); loss.backward()` is summed in
time order. The figure is the peak of that running sum: the activations it saves, the
gradients it creates and its temporaries, i.e. the live tensors the step adds on top of
the parameters, optimizer state and input batch, which both sides hold anyway. The
previous step's gradients are dropped before the profiled step starts, so both sides
count their gradients once.
"""
import argparse, json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def torch_step_peak(model_name, batch):
    import torch
    from torch.profiler import ProfilerActivity, profile

    nn = torch.nn
    torch.manual_seed(0)
    if model_name == "mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
        x = torch.randn(batch, 784)
    else:
        model = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
        x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    step()
    for p in model.parameters():
        p.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_us()):
        live += e.nbytes()
        peak = max(peak, live)
    grads = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"peak_bytes": peak, "gradient_bytes": grads, "torch": torch.__version__}


def mlstudio_step_peak(exe, model_name):
    project = os.path.join(HERE, "..", "resources", "examples", f"fashion-mnist-{model_name}.mls")
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([exe, "--run", project, "--epochs", "1", "--limit", "512", "--test-limit", "128",
                              "--json", "--quiet", "--db", os.path.join(tmp, "runs.db")],
                             check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return {"peak_bytes": r["planned_step_bytes"], "arena_bytes": r["planned_arena_bytes"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlstudio", default="build/app/mlstudio")
    ap.add_argument("--model", choices=["mlp", "lenet", "both"], default="both")
    args = ap.parse_args()
    models = ["mlp", "lenet"] if args.model == "both" else [args.model]
    print("| one training step, batch 128 | mlstudio planned peak | PyTorch live tensors (peak) | ratio |")
    print("|---|---|---|---|")
    for m in models:
        ours = mlstudio_step_peak(args.mlstudio, m)
        theirs = torch_step_peak(m, 128)
        title = "MLP 784-256-128-10" if m == "mlp" else "LeNet-5"
        print(f"| {title} | {ours['peak_bytes'] / 1024:.0f} KiB | {theirs['peak_bytes'] / 1024:.0f} KiB | "
              f"{ours['peak_bytes'] / theirs['peak_bytes']:.2f} |")
        print(json.dumps({"model": m, "mlstudio": ours, "pytorch": theirs}), file=sys.stderr)


if __name__ == "__main__":
    main()
