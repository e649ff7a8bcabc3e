"""Time PyTorch eager (float64, one thread) value+gradient of the workloads W1-W5.

Standalone: run it with a Python that has torch (PyTorch is never a dependency of tapejit):

    /tmp/torchenv/bin/python asv_bench/compare_torch.py [--repeats 9] [--json]

It reuses the NumPy input builders of benchmarks/workloads.py (NumPy only) and the PyTorch losses
of benchmarks/torch_workloads.py, checks each value against WORKLOADS.md's reference, and prints
the median seconds per gradient (JSON with --json; asv_bench/compare.py reads that).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import torch_workloads  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


def median_time(fn, repeats):
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return float(np.median(samples)), samples


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--json", action="store_true", help="print {workload: [samples]} as JSON")
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = {}
    for name in args.workloads:
        w = WORKLOADS[name]
        inputs = w.inputs()
        torch_workloads.check(name, inputs, w)
        run = torch_workloads.value_and_grad(name, inputs, w.argnums)
        med, samples = median_time(run, args.repeats)
        out[name] = samples
        if not args.json:
            print(f"{name:12s} torch {torch.__version__} eager  {med:.6f} s")
    if args.json:
        print(json.dumps({"torch": torch.__version__, "samples": out}))


if __name__ == "__main__":
    main()
