"""``python -m jit.warmup``: fill Numba's on-disk cache for every interpreter entry point, on two
cores when the machine has them (``jit._warm``). ``--entries a,b`` (the warm-up's worker)
compiles only those, in this process."""
import os
import sys

from . import WARMUP, warmup
from ._warm import run

if __name__ == "__main__":
    if sys.argv[1:2] == ["--entries"]:
        names = set(sys.argv[2].split(","))
        run([(m, n) for m, n in WARMUP if n in names])
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)  # (the cores this process may run on)
        warmup(verbose=True, workers=min(2, cores))  # (it prints one line per step)
