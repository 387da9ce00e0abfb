#!/usr/bin/env python3
"""Per-op overhead of a tiny eager op: PyTorch's torch.add of two f32 [4] tensors from
Python, beside mlstudio's EagerSession add (bench/eager_overhead.cpp), in one run.

  /usr/bin/python3 bench/eager_overhead_torch.py [--mlstudio build/bench/eager_overhead]
                                                 [--ops 1000000] [--rounds 5]

PyTorch is timed the same way as the C++ side: `ops` calls per round, ns per call, the
median over rounds; modes "no grad" (neither input requires grad, under torch.no_grad()),
"tape" (one input requires grad, so autograd records a node per op) and relu. The figure
includes the Python loop (~15-30 ns per iteration, printed as `python loop`): that is the
cost a PyTorch user pays per op. Both sides use one thread. The rounds alternate between
the two programs so that both see the same load on a shared machine, and each side reports
wall-clock and thread CPU time: where other work competes for the cores, the wall clock
also counts time spent waiting for one, the CPU time does not.
Without --mlstudio only PyTorch is timed. Issue 3 asks mlstudio <= 0.1 x PyTorch.
"""
import argparse, json, statistics, subprocess, sys, time


def time_torch(ops):
    import torch
    torch.set_num_threads(1)
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    b = torch.tensor([0.5, -1.0, 2.0, 0.25])
    ag = a.clone().requires_grad_(True)
    add, relu = torch.add, torch.relu
    out = {}

    def timed(key, body):
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        body()
        c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
        out[key + "_ns"] = (t1 - t0) / ops
        out[key + "_cpu_ns"] = (c1 - c0) / ops

    def adds(x, y):
        for _ in range(ops):
            add(x, y)

    def relus():
        for _ in range(ops):
            relu(a)

    def empty():
        for _ in range(ops):
            pass

    with torch.no_grad():
        timed("add_no_grad", lambda: adds(a, b))
    timed("add_tape", lambda: adds(ag, b))  # each result holds an autograd node, freed at once
    with torch.no_grad():
        timed("relu_no_grad", relus)
    timed("python_loop", empty)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlstudio", help="path of the eager_overhead program")
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("bench: PyTorch is missing; run scripts/setup --bench (python3-torch for /usr/bin/python3)")

    torch_rounds, ours_rounds = [], []
    time_torch(min(args.ops, 100_000))  # warm-up
    for _ in range(args.rounds):
        torch_rounds.append(time_torch(args.ops))
        if args.mlstudio:
            p = subprocess.run([args.mlstudio, str(args.ops), "1", "--json"], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"bench: {args.mlstudio} failed: {p.stderr.strip()}")
            ours_rounds.append(json.loads(p.stdout.strip().splitlines()[-1]))

    def med(rounds, key):
        return statistics.median(r[key] for r in rounds)

    import torch
    print(f"eager per-op overhead, f32 [4], {args.ops} ops per round, median of {args.rounds} rounds "
          f"(PyTorch {torch.__version__}, 1 thread)")
    for clock, suffix in (("wall-clock", "_ns"), ("thread CPU time", "_cpu_ns")):
        print(f"  {clock}, ns per op")
        print(f"    {'op':<14}{'PyTorch':>10}{'mlstudio':>10}{'ratio':>8}")
        for key, name in (("add_no_grad", "add, no grad"), ("add_tape", "add, tape"),
                          ("relu_no_grad", "relu, no grad")):
            t = med(torch_rounds, key + suffix)
            if ours_rounds:
                o = med(ours_rounds, key + suffix)
                print(f"    {name:<14}{t:>10.1f}{o:>10.1f}{o / t:>8.3f}")
            else:
                print(f"    {name:<14}{t:>10.1f}{'-':>10}{'-':>8}")
        print(f"    {'python loop':<14}{med(torch_rounds, 'python_loop' + suffix):>10.1f}"
              "   (included in the PyTorch column)")


if __name__ == "__main__":
    main()
