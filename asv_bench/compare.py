"""tapejit eager gradient vs PyTorch eager vs NumPy primal vs hand-written, side by side in one run.

    OPENBLAS_NUM_THREADS=1 \\
        .venv/bin/python asv_bench/compare.py --torch-python /tmp/torchenv/bin/python

(or ``make compare``). Each round times, per workload, the tapejit gradient, the NumPy primal and
the hand-written gradient (interleaved, ``--repeats`` samples each), then runs compare_torch.py
under ``--torch-python`` for the PyTorch samples; medians are over all rounds' samples. Cold start
is the wall time of a fresh ``python -c "import tape; <first W1 gradient>"`` (warm Numba cache),
median of ``--cold`` runs. ``--profile W`` prints cProfile's top entries of W's tapejit gradient.
"""
import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "benchmarks"))

import numpy as np  # noqa: E402

import tape  # noqa: E402
from references import REFERENCES  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

# (workload, what tapejit is compared with, target ratio of that over tapejit, wording)
TARGETS = [
    ("lorenz", "torch", 10.0, "W1 tapejit >= 10x faster than torch"),
    ("nbody", "torch", 3.0, "W5 tapejit >= 3x faster than torch"),
    ("elementwise", "torch", 1.0, "W3 tapejit no slower than torch"),
    ("mlp", "hand-written", 1 / 1.1, "W4 tapejit within 1.1x of NumPy backprop"),
    ("gmm", "numpy", 1 / 1.3, "W2 tapejit within 1.3x of NumPy primal"),
]

COLD = f"""
import sys; sys.path.insert(0, {os.path.join(HERE, 'benchmarks')!r})
import tape
from workloads import lorenz_inputs, lorenz_loss
tape.value_and_grad(lorenz_loss)(*lorenz_inputs())
"""


def local_samples(names, repeats):
    """{workload: {tool: [seconds]}} for tapejit, numpy and hand-written, interleaved."""
    out = {}
    for name in names:
        w = WORKLOADS[name]
        args = w.inputs()
        vg = tape.value_and_grad(w.loss, argnums=w.argnums)
        tools = {"tapejit": lambda: vg(*args), "numpy": lambda: w.loss(*args)}
        if name in REFERENCES:
            ref = REFERENCES[name]
            tools["hand-written"] = lambda: ref(*args)
        for fn in tools.values():
            fn()  # warm-up: kernels loaded from the Numba cache, references compiled
        samples = {t: [] for t in tools}
        for _ in range(repeats):
            for t, fn in tools.items():
                t0 = time.perf_counter()
                fn()
                samples[t].append(time.perf_counter() - t0)
        out[name] = samples
    return out


def torch_samples(torch_python, names, repeats):
    script = os.path.join(HERE, "compare_torch.py")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([torch_python, script, "--json", "--repeats", str(repeats), *names],
                       capture_output=True, text=True, env=env, check=True)
    data = json.loads(r.stdout.strip().splitlines()[-1])
    return data["torch"], data["samples"]


def cold_start(n):
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", COLD], check=True)
        walls.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - t0
    return float(np.median(walls)), walls, bare


def profile(name, n=5, top=25):
    w = WORKLOADS[name]
    args = w.inputs()
    vg = tape.value_and_grad(w.loss, argnums=w.argnums)
    vg(*args)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        vg(*args)
    pr.disable()
    print(f"\n=== cProfile: tapejit gradient of {name}, {n} calls ===")
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)


def fmt(x):
    return "      -   " if x is None else f"{x:10.6f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-python", default="/tmp/torchenv/bin/python")
    ap.add_argument("--repeats", type=int, default=7, help="samples per tool per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cold", type=int, default=5, help="fresh processes for cold start")
    ap.add_argument("--profile", action="append", default=[], metavar="WORKLOAD")
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    args = ap.parse_args(argv)
    names = args.workloads

    pooled = {n: {} for n in names}
    torch_version = None
    for _ in range(args.rounds):
        for n, per_tool in local_samples(names, args.repeats).items():
            for t, s in per_tool.items():
                pooled[n].setdefault(t, []).extend(s)
        if args.torch_python:
            torch_version, ts = torch_samples(args.torch_python, names, args.repeats)
            for n, s in ts.items():
                pooled[n].setdefault("torch", []).extend(s)
    med = {n: {t: float(np.median(s)) for t, s in d.items()} for n, d in pooled.items()}

    print(f"median seconds per call ({args.rounds} rounds x {args.repeats} samples; "
          f"NumPy {np.__version__}, torch {torch_version}, torch.set_num_threads(1))")
    print(f"{'workload':12s} {'tapejit':>10s} {'torch':>10s} {'numpy':>10s} {'hand-wr.':>10s}"
          f"   torch/tj  tj/numpy  tj/hand")
    for n in names:
        m = med[n]
        tj = m["tapejit"]
        r_t = f"{m['torch'] / tj:8.2f}x" if "torch" in m else "      - "
        r_h = f"{tj / m['hand-written']:8.2f}x" if "hand-written" in m else "      - "
        print(f"{n:12s} {fmt(tj)} {fmt(m.get('torch'))} {fmt(m.get('numpy'))} "
              f"{fmt(m.get('hand-written'))}  {r_t} {tj / m['numpy']:8.2f}x {r_h}")

    print("\ntargets:")
    for n, other, target, text in TARGETS:
        if n not in med or other not in med[n]:
            continue
        ratio = med[n][other] / med[n]["tapejit"]
        ok = "MET " if ratio >= target else "MISS"
        print(f"  {ok} {text}: {other}/tapejit = {ratio:.3f} (needs >= {target:.3f})")

    if args.cold:
        c, walls, bare = cold_start(args.cold)
        ok = "MET " if c < 0.5 else "MISS"
        print(f"  {ok} cold start (fresh process, import tape + first W1 gradient, wall): "
              f"{c:.3f} s median of {args.cold} (< 0.5 s); samples "
              f"{', '.join(f'{x:.3f}' for x in walls)}; bare `python -c pass` {bare:.3f} s")

    for n in args.profile:
        profile(n)


if __name__ == "__main__":
    main()
