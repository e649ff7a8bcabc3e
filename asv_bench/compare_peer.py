"""Time a peer's value+gradient of the workloads W1-W5: PyTorch eager (float64, one thread) or
JAX's ``jit(value_and_grad)`` (float64, one thread; W2-W4 only, see peer_workloads.py).

Standalone: run it with a Python that has the peer (neither is ever a dependency of tapejit):

    /tmp/torchenv/bin/python asv_bench/compare_peer.py torch [--repeats 9] [--json]
    /tmp/peerenv/bin/python asv_bench/compare_peer.py jax [--repeats 9] [--json]

It reuses the NumPy input builders of benchmarks/workloads.py and the peers' losses
(benchmarks/torch_workloads.py, benchmarks/peer_workloads.py), checks each value against
WORKLOADS.md's reference, and prints the median seconds per gradient (JSON with --json;
asv_bench/compare.py reads that).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks"))

import numpy as np  # noqa: E402

from workloads import WORKLOADS  # noqa: E402


def median_time(fn, repeats):
    fn()  # warm-up (JAX: the compile)
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return float(np.median(samples)), samples


def torch_runner():
    """(version, names it measures, name, inputs, workload -> a zero-argument gradient call)."""
    import torch

    import torch_workloads

    torch.set_num_threads(1)

    def make(name, inputs, w):
        torch_workloads.check(name, inputs, w)
        return torch_workloads.value_and_grad(name, inputs, w.argnums)
    return torch.__version__, set(WORKLOADS), make


def jax_runner():
    import jax

    import peer_workloads

    def make(name, inputs, w):
        peer_workloads.check("jax", name, inputs, w)
        return peer_workloads.value_and_grad("jax", name, inputs, w.argnums)
    return jax.__version__, set(peer_workloads.JAX_WORKLOADS), make


RUNNERS = {"torch": torch_runner, "jax": jax_runner}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("peer", choices=sorted(RUNNERS))
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--json", action="store_true", help="print {workload: [samples]} as JSON")
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    args = ap.parse_intermixed_args(argv)
    version, measured, make = RUNNERS[args.peer]()
    out = {}
    for name in args.workloads:
        if name not in measured:
            continue
        w = WORKLOADS[name]
        inputs = w.inputs()
        med, samples = median_time(make(name, inputs, w), args.repeats)
        out[name] = samples
        if not args.json:
            print(f"{name:12s} {args.peer} {version}  {med:.6f} s")
    if args.json:
        print(json.dumps({"version": version, "samples": out}))


if __name__ == "__main__":
    main()
