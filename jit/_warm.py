"""``jit.warmup``'s work: every entry point loaded from the cache, or compiled, split between this
process and one worker process on a machine with two cores or more.

Numba compiles one function on one core, and ``sweep`` alone is ~70% of a cold warm-up's CPU
time (docs/performance.md), so the split is by cost: the worker compiles ``sweep`` with the
entries that share its kernels, which a second process would type and compile again (the eager
backward's tiers ``scalar_sweep`` and ``eager_sweep``, its reverse: after them ``sweep`` costs
~60% of its cold compile, so the three take 0-25% more than ``sweep`` alone, against ~29 CPU-s
for the tiers apart; ``array_sweep`` and ``common_sweep``, whose family kernels but one are the
eager tier's: ~10 CPU-s more there against ~20 alone; ``common_run_sweep``,
``common_lines_sweep`` and ``rare_sweep``, whose kernels are theirs too; ``elementwise_unary``,
its forward kernel), while this process compiles the rest (the binary elementwise entries among
them: their kernels are no sweep's); then this process loads the worker's entries from the cache
they now share. Entries already in the cache are loaded here and start no worker, so a warm
warm-up costs what it did. The worker is a speed-up only: if it fails, this process compiles its
entries itself.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

# what the worker compiles: the costly sweep, with the entries that share its kernels
WORKER_SHARE = {"scalar_sweep", "array_sweep", "common_sweep", "common_run_sweep",
                "common_lines_sweep", "rare_sweep", "eager_sweep", "sweep", "elementwise_unary"}


def _module(name):
    import importlib
    return importlib.import_module(name)


def load_cached(module, name: str) -> bool:
    """Load module.name from the cache if it is there, without compiling; whether it is ready."""
    from ._cache import entry
    from ._cache_load import load_cached as cached

    fn, args = entry(module, name)
    return args is None or cached(fn, args)


def _start_worker(names):
    """A ``python -m jit.warmup --entries ...`` process compiling names into the shared cache;
    its stderr goes to a file (a pipe nobody reads until the end could fill and stall it)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    err = tempfile.TemporaryFile("w+")
    worker = subprocess.Popen([sys.executable, "-m", "jit.warmup", "--entries", ",".join(names)],
                              env=env, stdout=subprocess.DEVNULL, stderr=err)
    worker.err = err
    return worker


def _finish(worker, verbose):
    """Wait for the worker; say why if it failed (its entries then compile here)."""
    worker.wait()
    if worker.returncode != 0 and verbose:
        worker.err.seek(0)
        print(f"\nwarm-up worker failed (compiling here instead):\n{worker.err.read()}",
              file=sys.stderr)
    worker.err.close()


# what a user reads for each step of the warm-up: the entries of a module, or the worker's share
STEPS = {"jit._interp": "elementwise kernels and tape passes", "jit._tangent": "forward mode",
         "jit._plan": "the backward's per-tape passes",
         "jit._special_sweep": "scipy.special kernels", "jit._spin": "threaded replay",
         "jit._line_sums": "threaded replay"}
SHARE_STEP = "reverse sweep"
# a cold warm-up's wall time on the 2-core VM (empty cache, this split; README's Quick start)
COLD = "about 2 minutes on 2 cores"


def _steps(entries):
    """entries grouped into consecutive runs of one step: [(label, [(module, name), ...])]."""
    steps = []
    for m, n in entries:
        label = STEPS.get(m, m)
        if steps and steps[-1][0] == label:
            steps[-1][1].append((m, n))
        else:
            steps.append((label, [(m, n)]))
    return steps


def run(chosen, verbose: bool = False, workers: int = 1) -> float:
    """Load or compile the entries chosen ((module name, entry) pairs, in order), with the
    worker's share compiled in a second process when workers > 1 and any of it is not cached.
    With `verbose`, one line per step that compiles. Returns the seconds it took."""
    from ._cache import cache_dir, load

    def say(text, end="\n"):
        if verbose:
            print(text, end=end, flush=True)

    t0 = time.perf_counter()
    share = [(m, n) for m, n in chosen if n in WORKER_SHARE]
    own = [e for e in chosen if e not in share]
    # (load_cached loads what the cache has: what is left compiles)
    later = [(m, n) for m, n in share if not load_cached(_module(m), n)]
    worker = _start_worker([n for _, n in later]) if workers > 1 and later else None
    t_share = time.perf_counter()
    missing = {e for e in own if not load_cached(_module(e[0]), e[1])}
    if later:
        say(f"Compiling tapejit's kernels (first run only: {COLD}; cached in {cache_dir()})")
    elif missing:
        say(f"Compiling tapejit's kernels missing from the cache ({cache_dir()})")
    try:
        for label, entries in _steps(own) + [(SHARE_STEP, share)]:
            compiles = bool(missing.intersection(entries) or (label == SHARE_STEP and later))
            if compiles:
                meanwhile = " (in a second process)" if (
                    label == SHARE_STEP and worker is not None) else ""
                say(f"  {label}{meanwhile} ...", end="")
            t = time.perf_counter()
            if label == SHARE_STEP and worker is not None:
                _finish(worker, verbose)
                worker, t = None, t_share
            for m, n in entries:
                load(_module(m), n, notice=False)  # (asked for: no notice)
            if compiles:
                say(f" done in {time.perf_counter() - t:.1f} s")
    finally:
        if worker is not None:  # (this process failed or was interrupted first)
            worker.kill()
            worker.wait()
            worker.err.close()
    total = time.perf_counter() - t0
    if missing or later:
        say(f"tapejit's kernels are ready ({total:.0f} s).")
    else:
        say(f"tapejit's kernels: loaded from the cache in {total:.1f} s ({cache_dir()}).")
    return total
