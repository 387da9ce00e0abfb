#!/usr/bin/env python3
"""One training epoch on Fashion-MNIST (batch 128) of the MLP 784-256-128-10, LeNet-5 or the
residual CNN of resources/examples/fashion-mnist-resnet.mls, or of the character-level
transformer of resources/examples/words-transformer.mls on /usr/share/dict/words:
mlstudio beside PyTorch on CPU, in the same run, alternating, so both see the same load.

  bench/epoch_vs_torch.py --model mlp|lenet|resnet|transformer --mlstudio build/app/mlstudio [--rounds 3] [--epochs 3]

The transformer's PyTorch twin is bench/words_transformer_torch.py (same words, splits, model,
schemes, optimizer and schedule); both train the same number of steps (--epochs, default 1), and
the table gives each side's validation loss after them and ten words each sampled.

Each round runs each side as a fresh process training `--epochs` epochs; a round's figure
is the median epoch (training pass only). Reported: the median over rounds, the ratio
mlstudio/PyTorch, samples/s, and each process's peak RSS. Both sides use 2 threads'
worth of cores; OPENBLAS_CORETYPE is removed from both environments so OpenBLAS picks
its best kernels for this CPU.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The residual example holds out 10 % of the training set for validation: its epoch is the
# other 54,000 images, and PyTorch trains on as many (--limit) for the same work.
RESNET_TRAIN = 54000


def run(cmd, env):
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"bench: {' '.join(cmd)} failed with status {os.waitstatus_to_exitcode(status)}")
        out.seek(0)
        line = out.read().decode().strip().splitlines()[-1]
    r = json.loads(line)
    r["peak_rss_bytes"] = usage.ru_maxrss * 1024
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlstudio", default="build/app/mlstudio")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=None, help="default 3 (transformer: 1)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", choices=["mlp", "lenet", "resnet", "transformer"], default="mlp")
    ap.add_argument("--seed-per-round", action="store_true",
                    help="transformer: round r trains both sides with seed 7 + r (weights and order), "
                         "so the validation losses compared are medians over seeds")
    # Debian's interpreter: python3-torch installs there, not into other Pythons on PATH.
    ap.add_argument("--python", default="/usr/bin/python3")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    words = args.model == "transformer"
    if args.epochs is None:
        args.epochs = 1 if words else 3
    name = "words-transformer" if words else f"fashion-mnist-{args.model}"
    project = os.path.join(HERE, "..", "resources", "examples", f"{name}.mls")
    reference = os.path.join(HERE, "words_transformer_torch.py" if words else "torch_reference.py")
    db = tempfile.mktemp(suffix=".db")
    ours, theirs = [], []
    for r in range(args.rounds):
        seed = [] if not (words and args.seed_per_round) else [str(7 + r)]
        ours.append(run([args.mlstudio, "--run", project, "--epochs", str(args.epochs), "--threads",
                         str(args.threads), "--json", "--quiet", "--db", db]
                        + (["--set", f"training.seed={seed[0]}"] if seed else []), env))
        theirs.append(run([args.python, reference, "--epochs", str(args.epochs)]
                          + (["--seed", seed[0]] if seed else [])
                          + ([] if words else ["--model", args.model])
                          + (["--limit", str(RESNET_TRAIN)] if args.model == "resnet" else []), env))
        print(f"round {r + 1}/{args.rounds}: mlstudio {ours[-1]['epoch_seconds']:.3f} s/epoch, "
              f"PyTorch {theirs[-1]['epoch_seconds']:.3f} s/epoch", file=sys.stderr)
        if words:
            print(f"  validation loss: mlstudio {ours[-1]['val_loss']:.4f}, PyTorch {theirs[-1]['val_loss']:.4f}; "
                  f"steps {ours[-1]['steps']} / {theirs[-1]['steps']}", file=sys.stderr)
    for f in (db, db + "-wal", db + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    m = statistics.median(o["epoch_seconds"] for o in ours)
    t = statistics.median(o["epoch_seconds"] for o in theirs)
    rss_m = max(o["peak_rss_bytes"] for o in ours) / 2**20
    rss_t = max(o["peak_rss_bytes"] for o in theirs) / 2**20
    if words:
        return transformer_table(args, ours, theirs, m, t, rss_m, rss_t)
    title = {"mlp": "MLP 784-256-128-10", "lenet": "LeNet-5", "resnet": "residual CNN"}[args.model]
    samples = RESNET_TRAIN if args.model == "resnet" else 60000
    print(f"| {title}, batch 128, one epoch | mlstudio | PyTorch {theirs[0]['torch']} |")
    print("|---|---|---|")
    print(f"| epoch seconds (median of {args.rounds} rounds) | {m:.3f} | {t:.3f} |")
    print(f"| samples/s | {samples / m:,.0f} | {samples / t:,.0f} |")
    print(f"| test accuracy after {args.epochs} epochs | {statistics.median(o['test_accuracy'] for o in ours):.4f} | "
          f"{statistics.median(o['test_accuracy'] for o in theirs):.4f} |")
    print(f"| peak RSS | {rss_m:.0f} MiB | {rss_t:.0f} MiB |")
    print(f"| threads | {ours[0]['threads']} | torch {theirs[0]['threads']} (+ OpenBLAS) |")
    print(f"\nratio mlstudio/PyTorch (epoch time): {m / t:.2f}")
    print(json.dumps({"model": args.model, "mlstudio_epoch_s": m, "torch_epoch_s": t, "ratio": m / t,
                      "mlstudio_peak_rss_mib": rss_m, "torch_peak_rss_mib": rss_t}))


def transformer_table(args, ours, theirs, m, t, rss_m, rss_t):
    med = lambda side, k: statistics.median(o[k] for o in side)
    n = theirs[0]["train_samples"]
    vm, vt = med(ours, "val_loss"), med(theirs, "val_loss")
    print(f"| words transformer (E 64, 2 blocks, 4 heads, T 8), batch 256, one epoch | mlstudio | "
          f"PyTorch {theirs[0]['torch']} |")
    print("|---|---|---|")
    print(f"| epoch seconds (median of {args.rounds} rounds) | {m:.3f} | {t:.3f} |")
    print(f"| samples/s | {n / m:,.0f} | {n / t:,.0f} |")
    print(f"| steps | {ours[0]['steps']} | {theirs[0]['steps']} |")
    print(f"| validation loss after those steps (median) | {vm:.4f} | {vt:.4f} |")
    print(f"| final training loss (last epoch's mean) | {med(ours, 'final_loss'):.4f} | "
          f"{med(theirs, 'final_loss'):.4f} |")
    print(f"| test accuracy (next character) | {med(ours, 'test_accuracy'):.4f} | "
          f"{med(theirs, 'test_accuracy'):.4f} |")
    print(f"| peak RSS | {rss_m:.0f} MiB | {rss_t:.0f} MiB |")
    print(f"| threads | {ours[0]['threads']} | torch {theirs[0]['threads']} (+ OpenBLAS) |")
    print(f"| ten words (last round) | {' '.join(ours[-1].get('samples', []))} | {' '.join(theirs[-1]['samples'])} |")
    print(f"\nratio mlstudio/PyTorch (epoch time): {m / t:.2f}")
    print(f"validation loss mlstudio/PyTorch: {vm / vt:.4f} ({100 * (vm - vt) / vt:+.2f}%)")
    print(json.dumps({"model": args.model, "mlstudio_epoch_s": m, "torch_epoch_s": t, "ratio": m / t,
                      "mlstudio_val_loss": vm, "torch_val_loss": vt,
                      "mlstudio_val_losses": [o["val_loss"] for o in ours],
                      "torch_val_losses": [o["val_loss"] for o in theirs],
                      "mlstudio_samples": ours[-1].get("samples", []), "torch_samples": theirs[-1]["samples"],
                      "mlstudio_peak_rss_mib": rss_m, "torch_peak_rss_mib": rss_t}))


if __name__ == "__main__":
    main()
