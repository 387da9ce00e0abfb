#!/usr/bin/env python3
"""Per-op overhead of a tiny eager op called from a scripting language, side by side:
c = a + b on two f32 [16] tensors in a loop, from Lua (mlstudio lua, bench/lua_overhead.lua)
and from Python (PyTorch, one thread, no grad). Wall-clock ns per op, best of 5 rounds each.

  /usr/bin/python3 bench/lua_overhead_torch.py [--mlstudio build/app/mlstudio] [--ops 500000]
"""
import argparse, re, subprocess, time


def torch_ns(ops):
    import torch
    torch.set_num_threads(1)
    a, b = torch.ones(16), torch.ones(16)
    best = float("inf")
    with torch.no_grad():
        for _ in range(5):
            t0 = time.perf_counter_ns()
            for _ in range(ops):
                c = a + b
            best = min(best, (time.perf_counter_ns() - t0) / ops)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlstudio", default="build/app/mlstudio")
    ap.add_argument("--ops", type=int, default=500000)
    a = ap.parse_args()
    out = subprocess.run([a.mlstudio, "lua", "--trust", "bench/lua_overhead.lua", str(a.ops)],
                         check=True, capture_output=True, text=True).stdout
    lua = float(re.search(r"lua_add_16 ([0-9.]+) ns/op", out).group(1))
    pt = torch_ns(a.ops)
    print(f"tiny add [16] from a script: mlstudio (Lua) {lua:.0f} ns/op, PyTorch (Python) {pt:.0f} ns/op, "
          f"ratio {lua / pt:.2f}")


if __name__ == "__main__":
    main()
