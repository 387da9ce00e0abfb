#!/usr/bin/env python3
"""Cost curves: how the time of one training epoch grows with the model, mlstudio beside
PyTorch on CPU, in one run, alternating per point (mlstudio, PyTorch, mlstudio, ...) so that
both sides see the same load.

  bench/cost_curves.py --mlstudio build/app/mlstudio --fma-peak build/bench/fma_peak [--quick]

Curves (each point trains a fixed subset of the training set, the same for both sides):
  mlp    MLP 784-W-W/2-10 (the shape of resources/examples/fashion-mnist-mlp.mls; W = 256 is
         that example), batch 128, W = 256 -> 4096
  cnn    the residual CNN of resources/examples/fashion-mnist-resnet.mls with C channels
         (stem C, a residual block of two 3x3 convolutions C, a 3x3 convolution 2C; C = 16 is
         that example), batch 128, C = 16 -> 128
  batch  the MLP example 784-256-128-10, batch 16 -> 1024
  transformer-width, transformer-context: the character-level transformer example
         (resources/examples/words-transformer.mls beside bench/words_transformer_torch.py),
         width 64 -> 512 and context 16 -> 256, when both files are in the tree (see
         TRANSFORMER below).

Each side runs as a fresh process training 3 epochs of the subset; its figure is the median
epoch (training pass only, evaluation excluded), and the point's figure the median over
`--rounds` rounds (default 1: the full run takes about 15 minutes on 2 cores). On Fashion-MNIST
both sides train with SGD (lr 0.05, momentum 0.9, no schedule); the transformer as its example
says (AdamW). mlstudio runs with --threads 2, PyTorch with its default threads (its fastest on
2 cores: see the README), OPENBLAS_CORETYPE removed from both environments. The benchmark runs
copies of mlstudio and fma_peak, so a rebuild meanwhile does not change them.

% of FMA peak: the FLOPs of one training step as mlstudio's op registry counts them (the
sum of the "flops" of every kernel of one step in a `--profile` trace: matrix products and
convolutions 2 per multiply-add, elementwise ops one per element; the optimizer update is
not in it), times the steps of an epoch, over the epoch's time, over the fp32 FMA peak of as
many threads that build/bench/fma_peak measures in the same run (the higher of a reading
before and after the curves). PyTorch trains the same model, so the same FLOP count serves
both sides. Peak RSS: each process's ru_maxrss (os.wait4).

Writes docs/cost-curves.md (a table per curve) and docs/cost-curves.png (a panel per curve).
A run that fails stops the benchmark with its command and the end of its output.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "resources", "examples")
FASHION = "/usr/share/datasets/fashion-mnist"
THREADS = 2


WORK_DIR = None  # the generated projects; kept when a run fails, to run its command again


def fail(msg):
    kept = f"\n(the generated projects are kept in {WORK_DIR})" if WORK_DIR else ""
    sys.exit(f"bench/cost_curves.py: {msg}{kept}")


def run_process(cmd, env, cwd=None):
    """Runs cmd; returns (stdout text, peak RSS bytes). Exits with the command on failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(p.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
        if code != 0:
            err.seek(0)
            tail = (text + err.read().decode(errors="replace")).strip().splitlines()[-15:]
            fail(f"this command failed with status {code}:\n  {shlex.join(cmd)}\n" + "\n".join("  | " + l for l in tail))
    return text, usage.ru_maxrss * 1024


def last_json(text, cmd):
    lines = text.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        fail(f"no JSON line at the end of the output of:\n  {shlex.join(cmd)}")


# ---------------------------------------------------------------------------------------
# The curves. A curve: what it varies, its points (full and --quick), the subset each point
# trains, and per point the project (an example's JSON, changed) and PyTorch's command.


def load_example(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return json.load(f)


def node(doc, node_id):
    for n in doc["model"]["nodes"]:
        if n["id"] == node_id:
            return n
    fail(f"node '{node_id}' not found in the example project (has it changed?)")


def plain_training(doc, batch):
    """SGD lr 0.05 momentum 0.9, no schedule, no early stopping, no validation split: what
    torch_reference.py trains."""
    t = doc["training"]
    t["batch_size"] = batch
    t["device"] = "cpu"
    t["mode"] = "static"
    t["optimizer"] = {"type": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": False, "weight_decay": 0.0}
    t.pop("schedule", None)
    t.pop("early_stopping", None)
    doc["dataset"] = {"source": "fashion-mnist", "path": FASHION}
    return doc


def mlp_project(width, batch):
    """The MLP example, widened, with PyTorch's default nn.Linear weights (uniform within
    1/sqrt(fan_in)), as torch_reference.py's twin has them (the example's He init is 2.4x
    wider)."""
    doc = plain_training(load_example("fashion-mnist-mlp.mls"), batch)
    node(doc, "fc1")["params"]["out_features"] = width
    node(doc, "fc2")["params"]["out_features"] = width // 2
    for n in ("fc1", "fc2", "fc3"):
        node(doc, n)["params"]["init"] = "uniform_fan_in"
    return doc


def cnn_project(channels):
    doc = plain_training(load_example("fashion-mnist-resnet.mls"), 128)
    for n in ("stem", "res_conv1", "res_conv2"):
        node(doc, n)["params"]["out_channels"] = channels
    node(doc, "conv3")["params"]["out_channels"] = 2 * channels
    return doc


def fashion_curve(key, title, x, points, quick, subset, batch, project, torch_model, torch_args):
    """A curve on Fashion-MNIST: each point trains the first `subset` training images."""
    def torch(args, v, tmp):
        return [args.python, os.path.join(HERE, "torch_reference.py"), "--model", torch_model, "--batch",
                str(batch(v)), "--limit", str(subset), "--test-limit", str(args.test_limit)] + torch_args(v)

    for v in points:
        if subset % batch(v):
            fail(f"curve {key}: subset {subset} is not a multiple of batch {batch(v)}")
    return {"key": key, "title": title, "x": x, "points": points, "quick": quick, "subset": subset,
            "subset_text": f"the first {subset:,} training images", "unit": f"{subset:,} images", "epochs": 3,
            "batch": batch, "project": lambda v, tmp: project(v), "flops_limit": batch,
            "mlstudio_args": lambda v, args: ["--limit", str(subset), "--test-limit", str(args.test_limit)],
            "torch": torch}


CURVES = [
    fashion_curve("mlp", "MLP width W (784-W-W/2-10, batch 128)", "width W", [256, 512, 1024, 2048, 4096],
                  [256, 1024, 4096], 4096, lambda w: 128, lambda w: mlp_project(w, 128), "mlp",
                  lambda w: ["--width", str(w)]),
    fashion_curve("cnn", "Residual CNN channels C (resnet example: C, C, C, 2C; batch 128)", "channels C",
                  [16, 32, 64, 128], [16, 64], 512, lambda c: 128, cnn_project, "resnet",
                  lambda c: ["--channels", str(c)]),
    fashion_curve("batch", "Batch size B (MLP 784-256-128-10)", "batch B", [16, 32, 64, 128, 256, 512, 1024],
                  [16, 128, 1024], 16384, lambda b: b, lambda b: mlp_project(256, b), "mlp",
                  lambda b: ["--width", "256"]),
]

# TRANSFORMER: the character-level transformer example of issue 31 part 2,
# resources/examples/words-transformer.mls, beside its PyTorch twin bench/words_transformer_torch.py
# (the same model and the same split of the same word file). Both curves are derived from the
# example: its embedding width E (the linear layers of width E and 4E follow it) or its context
# (the dataset's words.block_size), everything else as the example has it. The subset: a word
# file of the first TRANSFORMER_WORDS words of /usr/share/dict/words that the dataset keeps
# (^[a-z]+$), split by both sides as the example splits (test and validation fractions).
TRANSFORMER_MLS = os.path.join(EXAMPLES, "words-transformer.mls")
TRANSFORMER_TORCH = os.path.join(HERE, "words_transformer_torch.py")
DICT_WORDS = "/usr/share/dict/words"
TRANSFORMER_WORDS = 150


def write_word_subset(tmp):
    if not os.path.exists(DICT_WORDS):
        fail(f"{DICT_WORDS} is missing (apt-get install wamerican)")
    with open(DICT_WORDS, encoding="utf-8", errors="replace") as f:
        words = [w for w in (l.rstrip("\n") for l in f) if re.fullmatch(r"[a-z]+", w)][:TRANSFORMER_WORDS]
    with open(os.path.join(tmp, "words.txt"), "w") as f:
        f.write("\n".join(words) + "\n")


def transformer_project(tmp, width=None, context=None):
    doc = load_example("words-transformer.mls")
    nodes = doc["model"]["nodes"]
    emb = [n for n in nodes if n["type"] == "mls.embedding"]
    if len(emb) != 1:
        fail(f"{TRANSFORMER_MLS}: expected one mls.embedding node, found {len(emb)}")
    e0 = emb[0]["params"]["embedding_dim"]
    if width:
        emb[0]["params"]["embedding_dim"] = width
        for n in nodes:
            if n["type"] == "mls.linear" and n["params"].get("out_features") in (e0, 4 * e0):
                n["params"]["out_features"] = width * n["params"]["out_features"] // e0
    if context:
        doc["dataset"].setdefault("words", {})["block_size"] = context
    doc["dataset"]["path"] = os.path.join(tmp, "words.txt")
    for key in ("limit", "test_limit"):  # the subset is the word file
        doc["dataset"].pop(key, None)
    return doc


def transformer_torch(args, project, tmp):
    doc = json.load(open(project))
    nodes = doc["model"]["nodes"]
    attn = [n for n in nodes if n["type"] == "mls.multi_head_attention"]
    emb = next(n for n in nodes if n["type"] == "mls.embedding")
    d, t = doc["dataset"], doc["training"]
    opt = t.get("optimizer", {})
    cmd = [args.python, TRANSFORMER_TORCH, "--words", d["path"], "--embed", str(emb["params"]["embedding_dim"]),
           "--block", str(d.get("words", {}).get("block_size", 16)), "--heads", str(attn[0]["params"]["num_heads"]),
           "--layers", str(len(attn)), "--batch", str(t["batch_size"]), "--samples", "0"]
    for flag, value in (("--lr", opt.get("lr")), ("--weight-decay", opt.get("weight_decay")),
                        ("--seed", t.get("seed")), ("--split-seed", d.get("split_seed")),
                        ("--test", d.get("test_fraction")), ("--validation", d.get("validation"))):
        if value is not None:
            cmd += [flag, str(value)]
    return cmd


def transformer_curve(key, title, x, points, quick, vary):
    def project(v, tmp):
        return transformer_project(tmp, **{vary: v})

    def torch(args, v, tmp):
        return transformer_torch(args, os.path.join(tmp, f"{key}-{v}.mls"), tmp)

    return {"key": key, "title": title, "x": x, "points": points, "quick": quick, "subset": "words",
            "subset_text": f"the training split of the first {TRANSFORMER_WORDS} words of {DICT_WORDS} (^[a-z]+$), "
                           "one sample per character and one for the end",
            "unit": f"{TRANSFORMER_WORDS} words", "epochs": 3, "project": project,
            "setup": write_word_subset, "flops_limit": lambda v: 100, "mlstudio_args": lambda v, args: [],
            "torch": torch}


def transformer_curves():
    if not (os.path.exists(TRANSFORMER_MLS) and os.path.exists(TRANSFORMER_TORCH)):
        return [], ("transformer width 64 -> 512 and context 16 -> 256: not measured, "
                    f"{os.path.relpath(TRANSFORMER_MLS, ROOT)} or {os.path.relpath(TRANSFORMER_TORCH, ROOT)} "
                    "is not in this tree")
    doc = load_example("words-transformer.mls")
    e = next((n["params"].get("embedding_dim") for n in doc["model"]["nodes"] if n["type"] == "mls.embedding"), "?")
    t = doc["dataset"].get("words", {}).get("block_size", 16)
    b = doc["training"]["batch_size"]
    return [
        transformer_curve("transformer-width", f"Transformer width E (words example: E, MLP 4E; context {t}, batch {b})",
                          "width E", [64, 128, 256, 512], [64, 256], "width"),
        transformer_curve("transformer-context", f"Transformer context T (words example: width {e}, batch {b})",
                          "context T", [16, 32, 64, 128, 256], [16, 64], "context"),
    ], None


# ---------------------------------------------------------------------------------------


def fma_peak(tool, threads):
    cmd = [tool, "5"]
    text, _ = run_process(cmd, os.environ.copy())
    m = re.search(r"fp32 FMA peak: 1 thread ([\d.]+) GFLOP/s, (\d+) threads ([\d.]+) GFLOP/s", text)
    if not m:
        fail(f"no FMA peak line in the output of {shlex.join(cmd)}")
    one, hw, many = float(m.group(1)), int(m.group(2)), float(m.group(3))
    if threads == 1:
        return one
    if hw != threads:
        fail(f"{tool} measured {hw} threads, the curves run {threads}")
    return many


def step_flops(mlstudio, project, batch, limit, tmp, env):
    """FLOPs of one training step: the kernels' "flops" in a --profile trace of the first step
    (a full batch: checked)."""
    trace = os.path.join(tmp, "trace.json")
    db = os.path.join(tmp, "flops.db")
    cmd = [mlstudio, "--run", project, "--epochs", "1", "--limit", str(limit), "--test-limit", str(limit),
           "--threads", str(THREADS), "--json", "--quiet", "--db", db, "--profile", trace]
    run_process(cmd, env)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    steps, batches = {}, {}
    for e in events:
        a = e.get("args", {})
        if e.get("cat") == "op" and a.get("pass") in ("forward", "backward") and "step" in a:
            steps.setdefault(int(a["step"]), 0.0)
            steps[int(a["step"])] += float(a.get("flops", 0))
        elif e.get("cat") == "step" and "batch" in a:
            batches[e["name"]] = int(a["batch"])
    for f in (trace, db, db + "-wal", db + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    if not steps:
        fail(f"no training step in the trace of {shlex.join(cmd)}")
    first = min(steps)
    if batches.get(f"step {first}") != batch:
        fail(f"the first step in the trace of {shlex.join(cmd)} is not a batch of {batch}")
    if steps[first] <= 0:
        fail(f"no FLOPs in the trace of {shlex.join(cmd)}")
    return steps[first]


def measure_curve(curve, args, tmp, env, quick):
    points = curve["quick"] if quick else curve["points"]
    setup = curve.get("setup")
    if setup:
        setup(tmp)
    rows = []
    for v in points:
        doc = curve["project"](v, tmp)
        batch = doc["training"]["batch_size"]
        project = os.path.join(tmp, f"{curve['key']}-{v}.mls")
        with open(project, "w") as f:
            json.dump(doc, f, indent=1)
        flops = step_flops(args.mlstudio, project, batch, curve["flops_limit"](v), tmp, env)
        db = os.path.join(tmp, "runs.db")
        ours, theirs = [], []
        mls_cmd = [args.mlstudio, "--run", project, "--epochs", str(curve["epochs"]), "--threads", str(THREADS),
                   "--json", "--quiet", "--db", db] + curve["mlstudio_args"](v, args)
        py_cmd = curve["torch"](args, v, tmp) + ["--epochs", str(curve["epochs"])]
        for _ in range(args.rounds):
            text_ours, rss = run_process(mls_cmd, env)
            ours.append((last_json(text_ours, mls_cmd)["epoch_seconds"], rss))
            text, rss = run_process(py_cmd, env)
            r = last_json(text, py_cmd)
            theirs.append((r["epoch_seconds"], rss))
            torch_version = r.get("torch", "?")
            # The training samples of an epoch: the subset, or (words) what PyTorch's twin split;
            # mlstudio must have taken as many steps.
            samples = curve["subset"] if isinstance(curve["subset"], int) else r["train_samples"]
            steps = last_json(text_ours, mls_cmd)["steps"]
            if steps != curve["epochs"] * -(-samples // batch):
                fail(f"mlstudio took {steps} steps in {curve['epochs']} epochs, PyTorch's {samples} samples "
                     f"make {-(-samples // batch)} batches of {batch} an epoch:\n  "
                     f"{shlex.join(mls_cmd)}\n  {shlex.join(py_cmd)}")
        m = statistics.median(o[0] for o in ours)
        t = statistics.median(o[0] for o in theirs)
        row = {"x": v, "batch": batch, "samples": samples, "step_flops": flops,
               "epoch_flops": flops * samples / batch, "mlstudio_s": m, "torch_s": t, "ratio": m / t,
               "mlstudio_rss": max(o[1] for o in ours), "torch_rss": max(o[1] for o in theirs),
               "mlstudio_all": [o[0] for o in ours], "torch_all": [o[0] for o in theirs], "torch": torch_version}
        rows.append(row)
        print(f"{curve['key']} {v}: mlstudio {m:.4f} s/epoch, PyTorch {t:.4f} s/epoch, ratio {m / t:.2f}, "
              f"{flops / 1e6:.1f} MFLOP/step", flush=True)
    return rows


def pct(row, side, peak):
    return 100 * row["epoch_flops"] / row[f"{side}_s"] / (peak * 1e9)


def write_markdown(path, results, meta, left_out):
    peak = meta["peak"]
    out = ["# Cost curves: mlstudio beside PyTorch on CPU", "",
           "Written by `bench/cost_curves.py` (`make bench`); do not edit by hand. One run, "
           f"{meta['date']}, on {meta['cpu']}; load average before / after: {meta['load_before']} / "
           f"{meta['load_after']}. mlstudio with {THREADS} threads, PyTorch {meta['torch']} with its default "
           f"threads; each point alternates mlstudio and PyTorch, {meta['rounds']} round(s) of one fresh "
           "process per side, each training the subset for the epochs given, figure = median epoch "
           "(training pass only), median over rounds. Both sides train the same model on the same samples: "
           "on Fashion-MNIST with SGD (lr 0.05, momentum 0.9), the transformer as its example says "
           "(AdamW). Timings on this shared machine move with the load: compare the two sides of one "
           "row, which ran one after the other.", "",
           f"% of FMA peak: the FLOPs of an epoch (one step's kernels as mlstudio's op registry counts "
           f"them, times the steps) over its time, over the {THREADS}-thread fp32 FMA peak "
           f"`build/bench/fma_peak` measured in this run: **{peak:.1f} GFLOP/s** "
           f"(readings {', '.join(f'{p:.1f}' for p in meta['peaks'])}). The same FLOP count serves "
           "PyTorch (same model). Ratio = mlstudio / PyTorch time; **slower** marks a point where "
           "mlstudio took longer than PyTorch. Peak RSS: the whole process (ru_maxrss).", ""]
    for curve, rows in results:
        r0 = rows[0]
        out.append(f"## {curve['title']}")
        out.append("")
        batch = f", batch {r0['batch']}" if all(r["batch"] == r0["batch"] for r in rows) else ""
        out.append(f"Subset: {curve['subset_text']} ({r0['samples']:,} samples){batch}, "
                   f"{curve['epochs']} epochs per process.")
        out.append("")
        out.append(f"| {curve['x']} | MFLOP/step | mlstudio s/epoch | PyTorch s/epoch | ratio | mlstudio % FMA peak | "
                   "PyTorch % FMA peak | mlstudio peak RSS | PyTorch peak RSS |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            mark = " **slower**" if r["ratio"] > 1 else ""
            out.append(f"| {r['x']} | {r['step_flops'] / 1e6:,.1f} | {r['mlstudio_s']:.4f} | {r['torch_s']:.4f} | "
                       f"{r['ratio']:.2f}{mark} | {pct(r, 'mlstudio', peak):.1f} % | {pct(r, 'torch', peak):.1f} % | "
                       f"{r['mlstudio_rss'] / 2**20:,.0f} MiB | {r['torch_rss'] / 2**20:,.0f} MiB |")
        out.append("")
    slower = [(c["key"], r["x"]) for c, rows in results for r in rows if r["ratio"] > 1]
    out.append("Points where mlstudio is slower than PyTorch: " +
               (", ".join(f"{k} {x}" for k, x in slower) if slower else "none") + ".")
    out.append("")
    for note in left_out:
        out.append(f"Left out: {note}.")
        out.append("")
    out.append("![cost curves](cost-curves.png)")
    out.append("")
    with open(path, "w") as f:
        f.write("\n".join(out))


def write_png(path, results, peak):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    n = len(results)
    cols = min(n, 3)
    rows_n = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 4.2 * rows_n), squeeze=False)
    colors = {"mlstudio": "tab:blue", "torch": "tab:orange"}
    names = {"mlstudio": "mlstudio", "torch": "PyTorch"}
    for i, (curve, rows) in enumerate(results):
        ax = axes[i // cols][i % cols]
        xs = [r["x"] for r in rows]
        ax2 = ax.twinx()
        for side in ("mlstudio", "torch"):
            ax.plot(xs, [r[f"{side}_s"] for r in rows], "o-", color=colors[side], label=f"{names[side]} s/epoch")
            ax2.plot(xs, [pct(r, side, peak) for r in rows], "s--", color=colors[side], alpha=0.6,
                     label=f"{names[side]} % FMA peak")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(curve["x"])
        ax.set_ylabel(f"s per epoch of {curve['unit']} (solid)")
        ax2.set_ylabel("% of FMA peak (dashed)")
        ax2.set_ylim(0, 100)
        ax.set_title(curve["title"], fontsize=9.5)
        ax.grid(True, which="major", alpha=0.3)
        if i == 0:
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = ax2.get_legend_handles_labels()
            ax.legend(h1 + h2, l1 + l2, fontsize=7.5, loc="upper left")
    for j in range(n, rows_n * cols):
        axes[j // cols][j % cols].axis("off")
    fig.suptitle(f"mlstudio beside PyTorch on CPU: time per epoch and % of the {THREADS}-thread FMA peak "
                 f"({peak:.0f} GFLOP/s)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    # The plot is written last: a missing matplotlib found then would waste the whole run.
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(f"bench/cost_curves.py: {sys.executable} has no matplotlib, which draws "
                 "docs/cost-curves.png: run it with /usr/bin/python3 (make bench does; "
                 "scripts/setup --bench installs python3-matplotlib)")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mlstudio", default="build/app/mlstudio")
    ap.add_argument("--fma-peak", default="build/bench/fma_peak")
    # Debian's interpreter: python3-torch installs there, not into other Pythons on PATH.
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--quick", action="store_true", help="fewer points, one round")
    ap.add_argument("--rounds", type=int, default=1, help="rounds per point (each: mlstudio, then PyTorch)")
    ap.add_argument("--curves", default="", help="comma-separated subset of: " +
                    ", ".join(c["key"] for c in CURVES) + ", transformer-width, transformer-context")
    ap.add_argument("--test-limit", type=int, default=256, help="test images evaluated after each epoch")
    ap.add_argument("--out", default=None,
                    help="where cost-curves.md and .png go (default docs/, build/ with --quick)")
    args = ap.parse_args()
    args.out = args.out or os.path.join(ROOT, "build" if args.quick else "docs")
    for tool in (args.mlstudio, args.fma_peak):
        if not os.access(tool, os.X_OK):
            fail(f"{tool} is not an executable (build it first: mlstudio, fma_peak)")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    extra, note = transformer_curves()
    curves = CURVES + extra
    left_out = [note] if note else []
    if args.curves:
        wanted = args.curves.split(",")
        known = {c["key"] for c in CURVES} | {"transformer-width", "transformer-context"}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            fail(f"unknown curve(s): {', '.join(unknown)}")
        curves = [c for c in curves if c["key"] in wanted]
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.time()
    global WORK_DIR
    WORK_DIR = tempfile.mkdtemp(prefix="cost-curves-")
    # Copies of the two tools: a rebuild while the curves run must not change (or remove) them.
    for name in ("mlstudio", "fma_peak"):
        tool = getattr(args, name)
        setattr(args, name, shutil.copy2(tool, os.path.join(WORK_DIR, os.path.basename(tool))))
    peaks = [fma_peak(args.fma_peak, THREADS)]
    print(f"fp32 FMA peak, {THREADS} threads: {peaks[0]:.1f} GFLOP/s", flush=True)
    results = []
    for c in curves:
        results.append((c, measure_curve(c, args, WORK_DIR, env, args.quick)))
    peaks.append(fma_peak(args.fma_peak, THREADS))
    shutil.rmtree(WORK_DIR)
    WORK_DIR = None
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    cpu = "this machine"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            if m:
                cpu = f"{m.group(1).strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    meta = {"peak": max(peaks), "peaks": peaks, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            "cpu": cpu, "load_before": load_before, "load_after": load_after, "rounds": args.rounds,
            "torch": next((r["torch"] for _, rows in results for r in rows), "?")}
    os.makedirs(args.out, exist_ok=True)
    md, png = os.path.join(args.out, "cost-curves.md"), os.path.join(args.out, "cost-curves.png")
    write_markdown(md, results, meta, left_out)
    write_png(png, results, meta["peak"])
    print(f"wrote {md} and {png} in {time.time() - started:.0f} s")
    for note in left_out:
        print(f"left out: {note}")


if __name__ == "__main__":
    main()
