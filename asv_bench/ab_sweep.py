"""Two builds of the jitted sweep, timed on the same rows of one workload, interleaved in one process.

    .venv/bin/python asv_bench/ab_sweep.py [--base REV] [--workload gmm] [--rows 23-25 18-58]

A change to a kernel moves a row by tens of microseconds, and this VM's spells move whole runs
by more than that: two processes, base then new, disagreed by over 20% on W2. Here both builds
live in one process and take turns, a few calls each, for ``--rounds`` rounds:

* base: ``jit/_interp.py`` at REV (default HEAD), loaded as a module of its own from
  ``<tmp>/tapejit-ab/<blob>/`` (Numba keys its cache by file path and content, so a second run
  on the same REV loads it; the first compiles it, ~80 s);
* new: the working tree's ``jit/_interp.py`` (run ``make generate`` after editing the generator).

Both sweep the same recording (the working tree's ``tape``), its forward rows lo..hi-1 and the
reverse of the same rows with the gradient's plan (need masks, adjoint arena), which they
overwrite as they go: only times are compared, not values (the tests compare those).
"""
import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(HERE, "benchmarks")]


def base_module(rev):
    blob = subprocess.check_output(["git", "-C", ROOT, "rev-parse", f"{rev}:jit/_interp.py"],
                                   text=True).strip()
    folder = os.path.join(tempfile.gettempdir(), "tapejit-ab", blob)
    path = os.path.join(folder, "interp_base.py")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        text = subprocess.check_output(["git", "-C", ROOT, "show", f"{rev}:jit/_interp.py"])
        with open(path, "wb") as f:
            f.write(text)
    sys.path.insert(0, folder)  # imported by name: Numba's cache finds a module that way
    return importlib.import_module("interp_base")


def interleaved(calls, rounds, k):
    """{name: (min, median)} in us over rounds, each round k calls of each in turn."""
    for f in calls.values():
        f()
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, f in calls.items():
            t = time.perf_counter()
            for _ in range(k):
                f()
            times[name].append((time.perf_counter() - t) / k * 1e6)
    return {name: (min(ts), float(np.median(ts))) for name, ts in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD")
    ap.add_argument("--workload", default="gmm")
    ap.add_argument("--rows", nargs="*", default=[], help="lo-hi row ranges (default: all rows)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--calls", type=int, default=5, help="calls of each build per round")
    args = ap.parse_args(argv)

    import tape
    from jit import _interp as new
    from workloads import WORKLOADS

    base = base_module(args.base)
    w = WORKLOADS[args.workload]
    inputs = w.inputs()
    cf = tape.compile(w.loss, *inputs, argnums=w.argnums, threads=1)
    cf.value_and_grad(*inputs)
    v = next(reversed(cf.variants.values()))
    A, p = v.A, v._plan(cf.nums)
    ranges = [tuple(map(int, r.split("-"))) for r in args.rows] or [(0, len(A.sv))]
    print(f"{args.workload}: {len(A.sv)} rows; base {args.base}, new: the working tree")
    print(f"{'rows':>9} {'sweep':>8} {'base min / median':>20} {'new min / median':>20} "
          f"{'new/base':>9}")
    for lo, hi in ranges:
        for sweep in ("forward", "reverse"):
            def call(m, lo=lo, hi=hi, sweep=sweep):
                if sweep == "forward":
                    return lambda: m.forward_sweep(A.R, A.S, A.VA, A.sv, A.IA, A.FA, lo, hi)
                return lambda: m.reverse_sweep(A.R, A.S, A.VA, p.GO, A.sv, p.G, A.IA, A.FA,
                                               p.need, lo, hi)

            t = interleaved({"base": call(base), "new": call(new)}, args.rounds, args.calls)
            (b0, b1), (n0, n1) = t["base"], t["new"]
            print(f"{lo:>4}-{hi:<4} {sweep:>8} {b0:9.1f} / {b1:8.1f} {n0:9.1f} / {n1:8.1f} "
                  f"{n1 / b1:9.2f}")


if __name__ == "__main__":
    main()
