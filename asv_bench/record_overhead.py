"""Recording overhead per small-array op: recorded minus NumPy, us per op.

Usage: PYTHONPATH=<checkout> python asv_bench/record_overhead.py [case ...]. ``tape`` comes from
PYTHONPATH, so running this script with another checkout's PYTHONPATH (and its NUMBA_CACHE_DIR)
compares the two side by side; alternate them, a few rounds (docs/performance.md). Each case is
N ops recorded under ``tape.vjp`` with the vjp's leaves as operands, best of 7 in CPU time. "numpy
keeping results" keeps every result alive as a tape does: for arrays of a few KB the fresh pages
that costs are much of a recording's time on a VM, and vary with the heap's state.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks"))
import tape  # noqa: E402
import bench_kernels as B  # noqa: E402

N = 1000
rng = np.random.default_rng(0)
a16 = rng.normal(size=16)
b16 = rng.normal(size=16)
m = rng.normal(size=(64, 64))
m2 = rng.normal(size=(64, 64))
bc_a = rng.normal(size=(16, 16, 3))
bc_b = rng.normal(size=(16, 1, 3))
MASK16 = a16 > 0
pos16 = rng.normal(size=(16, 3))  # W5's (nbody) operands: 16 bodies in 3-D
mass16 = rng.uniform(0.5, 2.0, 16)
r16 = rng.uniform(0.5, 2.0, (16, 16))


def chain(op):
    def f(*args):
        for _ in range(N):
            y = op(*args)
        return y
    f.op = op
    return f


def on_tape(op):
    """As chain, the operands first recorded once on the tape (x * 1.0): ops on results of
    earlier ops, as in most code, import no leaf."""
    def f(*args):
        args = [a * 1.0 for a in args]
        for _ in range(N):
            y = op(*args)
        return y
    f.op = op
    return f


CASES = {
    "exp16": (chain(lambda x: np.exp(x)), (a16,)),
    "neg16": (chain(lambda x: -x), (a16,)),
    "add16": (chain(lambda x, y: x + y), (a16, b16)),
    "mulc16": (chain(lambda x: x * 2.0), (a16,)),
    "sum16": (chain(lambda x: np.sum(x)), (a16,)),
    "slice16": (chain(lambda x: x[2:5]), (a16,)),
    "where16": (chain(lambda x, y: np.where(MASK16, x, y)), (a16, b16)),
    "bcast": (chain(lambda x, y: x * y), (bc_a, bc_b)),
    "sumax1": (chain(lambda x: np.sum(x, axis=1)), (m,)),
    "slice2d": (chain(lambda x: x[::2, 1:]), (m,)),
    "gint": (chain(lambda x: x[B._ROWS]), (m,)),
    "where64": (chain(lambda x, y: np.where(B._MASK, x, y)), (m, m2)),
    "matmul16": (chain(lambda x, y: x @ y), (m[:16, :16].copy(), m2[:16, :16].copy())),
    "exp16t": (on_tape(lambda x: np.exp(x)), (a16,)),
    "add16t": (on_tape(lambda x, y: x + y), (a16, b16)),
    "where16t": (on_tape(lambda x, y: np.where(MASK16, x, y)), (a16, b16)),
    "matmul16t": (on_tape(lambda x, y: x @ y), (m[:16, :16].copy(), m2[:16, :16].copy())),
    "w5none": (on_tape(lambda x: x[:, None, :]), (pos16,)),
    "w5bsub": (on_tape(lambda x: x[None, :, :] - x[:, None, :]), (pos16,)),
    "w5sumax2": (on_tape(lambda x: np.sum(x, axis=2)), (bc_a,)),
    "w5cdiv": (on_tape(lambda x: mass16[None, :] / x), (r16,)),
}


def best(fn, k=7):
    """Fastest of k runs in this process's CPU time (other processes on a shared machine
    preempt it; CPU time leaves their share out, page faults and all of our own work in)."""
    ts = []
    for _ in range(k):
        t = time.process_time()
        fn()
        ts.append(time.process_time() - t)
    return min(ts)


def kept(f):
    """f with every result kept alive, as a tape keeps them (fresh memory per op)."""
    def g(*args):
        out = []
        op = f.op
        for _ in range(N):
            out.append(op(*args))
        return out
    return g


def main(names):
    for name in names or list(CASES):
        f, args = CASES[name]
        tape.vjp(f, *args)
        rec = best(lambda: tape.vjp(f, *args)) / N * 1e6
        npt = best(lambda: f(*args)) / N * 1e6
        npk = best(lambda: kept(f)(*args)) / N * 1e6
        print(f"{name:10s} recorded {rec:6.2f} us  numpy {npt:5.2f} us  "
              f"overhead {rec - npt:6.2f} us  (numpy keeping results {npk:5.2f} us: "
              f"overhead {rec - npk:6.2f} us)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
