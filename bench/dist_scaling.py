#!/usr/bin/env python3
"""Data-parallel scaling over MPI ranks: `mpirun -np N mlstudio --run P.mls --threads 1` on
the MLP and the CNN examples, for N = 1 and 2 (and 4 and 8 where the machine has that many
cores), one thread per rank, alternating the rank counts within each round so that every
count sees the same load. Each run trains `--epochs` epochs on the first `--limit` samples
(the per-rank batch is the project's: the global batch is N times it).

  bench/dist_scaling.py --mlstudio build/app/mlstudio [--rounds 3] [--limit 30000] [--epochs 2]
                        [--ranks 1,2,4,8] [--out docs/dist-scaling.md]

Reported per model and rank count, the median over rounds of:
  samples/s   the job's global training rate (rank 0's --json samples_per_s)
  efficiency  samples/s(N) / (N x samples/s(1)): 100% is perfect weak scaling
  comm        communication's share of the training time (the JSON's comm_fraction, or
              comm_seconds / seconds where only those are given): the all-reduce waits
The table is printed and written to --out (Markdown), with the machine it was measured on.
"""
import argparse, datetime, json, os, platform, shutil, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
MODELS = {"mlp": ("MLP 784-256-128-10", "fashion-mnist-mlp.mls"),
          "cnn": ("CNN: LeNet-5 with batch norm", "fashion-mnist-cnn.mls")}


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def mpirun_args(mpirun, ranks, cores):
    args = [mpirun, "-np", str(ranks)]
    if ranks > cores:
        args.append("--oversubscribe")  # more ranks than cores: only to see it run, not to time
    if os.geteuid() == 0:
        args.append("--allow-run-as-root")  # OpenMPI refuses root without it (containers)
    return args


def comm_share(r):
    if isinstance(r.get("comm_fraction"), (int, float)):
        return float(r["comm_fraction"])
    if isinstance(r.get("comm_seconds"), (int, float)) and r.get("seconds"):
        return float(r["comm_seconds"]) / float(r["seconds"])
    return None


def run_once(args, model_file, ranks, cores, db):
    cmd = mpirun_args(args.mpirun, ranks, cores) + [
        args.mlstudio, "--run", os.path.join(ROOT, "resources", "examples", model_file),
        "--threads", "1", "--json", "--quiet", "--epochs", str(args.epochs),
        "--limit", str(args.limit), "--test-limit", str(args.test_limit), "--db", db]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [l for l in p.stdout.strip().splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        sys.exit(f"dist_scaling: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mlstudio", default=os.path.join(ROOT, "build", "app", "mlstudio"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=30000)
    ap.add_argument("--test-limit", type=int, default=1000)
    ap.add_argument("--ranks", default="", help="comma list (default 1,2 and 4,8 where nproc allows)")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "dist-scaling.md"))
    args = ap.parse_args()
    if not shutil.which(args.mpirun):
        sys.exit(f"dist_scaling: no {args.mpirun} (scripts/setup installs openmpi-bin and "
                 "libopenmpi-dev; rebuild so that mlstudio has MPI)")
    cores = os.cpu_count() or 1
    ranks = [int(x) for x in args.ranks.split(",")] if args.ranks else \
        [n for n in (1, 2, 4, 8) if n <= max(2, cores)]
    if 1 not in ranks:
        ranks = [1] + ranks
    load = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="mls-dist-scaling-")
    db = os.path.join(tmp, "runs.db")
    tables = []
    for key in args.models.split(","):
        title, model_file = MODELS[key]
        runs = {n: [] for n in ranks}
        for r in range(args.rounds):
            for n in ranks:
                runs[n].append(run_once(args, model_file, n, cores, db))
                print(f"{key} round {r + 1}/{args.rounds}, {n} rank{'s' if n > 1 else ''}: "
                      f"{runs[n][-1]['samples_per_s']:.0f} samples/s", file=sys.stderr)
        sps1 = statistics.median(o["samples_per_s"] for o in runs[1])
        rows = []
        for n in ranks:
            sps = statistics.median(o["samples_per_s"] for o in runs[n])
            shares = [s for s in (comm_share(o) for o in runs[n]) if s is not None]
            comm = f"{100 * statistics.median(shares):.1f}%" if shares and n > 1 else "-"
            rows.append(f"| {n} | {sps:,.0f} | {100 * sps / (n * sps1):.0f}% | {comm} |")
        tables.append(f"### {title} ({model_file}), {args.limit} samples, {args.epochs} epoch"
                      f"{'s' if args.epochs > 1 else ''}, one thread per rank\n\n"
                      "| ranks | samples/s | scaling efficiency | communication |\n"
                      "|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)
    head = (f"# Data-parallel scaling (bench/dist_scaling.py)\n\n"
            f"Measured {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC on {cpu_name()}, {cores} "
            f"cores, {platform.system()} {platform.release()}; OpenMPI `mpirun -np N`, median of "
            f"{args.rounds} rounds (rank counts alternating within each round). Samples/s is the "
            "job's global training rate; the per-rank batch is the project's, so N ranks train "
            "a global batch N times as large. Scaling efficiency = samples/s(N) / (N x "
            "samples/s(1)). Communication: the share of training time spent inside the "
            "collective's calls (the gradient all-reduce, waiting for a slower rank included). "
            f"Load average before the run: {load[0]:.2f}, after: {os.getloadavg()[0]:.2f}.\n\n")
    text = head + "\n".join(tables)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
