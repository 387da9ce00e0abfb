#!/usr/bin/env python3
"""The scaling table from data-parallel runs of bench/device_epochs, one JSON object per line
with "model", "ranks" and "round" added (scripts/device-check dist writes dist.jsonl):
median over rounds of the global samples/s, the scaling efficiency samples/s(N) / (N x
samples/s(1)), and communication's share of the training time (comm_seconds / train_seconds).

  bench/dist_table.py dist.jsonl [--title "16-core Xeon, OpenMPI 4.1.6"]
"""
import argparse, json, statistics, sys
from collections import defaultdict

NAMES = {"mlp": "MLP 784-256-128-10", "cnn": "CNN (fashion-mnist-cnn.mls)"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    runs = defaultdict(list)
    with open(a.jsonl) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                j = json.loads(line)
            except json.JSONDecodeError:
                continue
            runs[(j["model"], int(j["ranks"]))].append(j)
    if not runs:
        sys.exit(f"dist_table: no results in {a.jsonl}")
    if a.title:
        print(a.title + "\n")
    print("| model | ranks | samples/s (median) | efficiency | comm share | rounds |")
    print("|---|---|---|---|---|---|")
    for model in sorted({m for m, _ in runs}, key=lambda m: list(NAMES).index(m) if m in NAMES else 9):
        base = None
        for ranks in sorted(n for m, n in runs if m == model):
            rs = runs[(model, ranks)]
            sps = statistics.median(r["samples_per_s"] for r in rs)
            comm = statistics.median(r["comm_seconds"] / r["train_seconds"] if r.get("train_seconds") else 0 for r in rs)
            if ranks == 1:
                base = sps
            eff = f"{100 * sps / (ranks * base):.0f}%" if base else "-"
            print(f"| {NAMES.get(model, model)} | {ranks} | {sps:,.0f} | {eff} | {100 * comm:.1f}% | {len(rs)} |")


if __name__ == "__main__":
    main()
