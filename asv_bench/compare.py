"""tapejit eager and replay vs PyTorch eager vs JAX jit vs NumPy primal vs hand-written, in one run.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python asv_bench/compare.py \\
        --torch-python /tmp/torchenv/bin/python --jax-python /tmp/peerenv/bin/python

(or ``make compare``). Each round times, per workload, tapejit's eager gradient, its compiled
replay (``tape.compile``, one thread), the NumPy primal and the hand-written gradient
(interleaved, ``--repeats`` samples each), then runs compare_peer.py under each peer's Python
(a peer whose Python is missing is left out); medians are over all rounds' samples, everything
single-threaded. Cold start is the wall time of a fresh ``python -c "import tape; <first W1
gradient>"`` (warm Numba cache), median of ``--cold`` runs. ``--markdown`` also prints the
README's performance table, dated, with the machine named. ``--profile W`` prints cProfile's top
entries of W's eager gradient.
"""
import argparse
import cProfile
import datetime
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
    ("gmm", "numpy", 1 / 2.0, "W2 tapejit within 2x of NumPy primal"),
    ("gmm", "torch", 1.0, "W2 tapejit no slower than torch"),
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
        cf = tape.compile(w.loss, *args, argnums=w.argnums, threads=1)
        tools = {"tapejit": lambda: vg(*args), "replay": lambda: cf.value_and_grad(*args),
                 "numpy": lambda: w.loss(*args)}
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


def peer_samples(peer, python, names, repeats):
    """(version, {workload: [seconds]}) from compare_peer.py run under `python`."""
    script = os.path.join(HERE, "compare_peer.py")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([python, script, peer, "--json", "--repeats", str(repeats), *names],
                       capture_output=True, text=True, env=env, preexec_fn=_one_cpu)
    if r.returncode:
        raise SystemExit(f"compare_peer.py {peer} under {python} failed:\n{r.stderr}")
    data = json.loads(r.stdout.strip().splitlines()[-1])
    return data["version"], data["samples"]


def _one_cpu():
    """Pin the peer's process to one CPU: XLA's CPU client sizes its thread pool by the CPUs it
    may run on (its XLA_FLAGS for threads change nothing in jax 0.10), PyTorch is told too."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def machine():
    """The CPU's model name (``lscpu``'s), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


def markdown(names, med, versions):
    """The README's performance table: one run, dated, the machine named."""
    import numba

    cols = [("replay", "tapejit replay"), ("tapejit", "tapejit eager"), ("torch", "PyTorch eager"),
            ("jax", "JAX `jit(value_and_grad)`"), ("numpy", "NumPy primal (no gradient)"),
            ("hand-written", "hand-written gradient")]
    cols = [(k, h) for k, h in cols if any(k in med[n] for n in names)]
    peers = ", ".join(f"{p} {v}" for p, v in versions.items() if v)
    lines = [f"{datetime.date.today().isoformat()}, {machine()} ({os.cpu_count()} cores), one "
             f"thread everywhere; NumPy {np.__version__}, Numba {numba.__version__}"
             + (f", {peers}" if peers else "") + "; `make compare`, median seconds per value "
             "and gradient, in one run.", "",
             "| workload | " + " | ".join(h for _, h in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for n in names:
        cells = [_ms(med[n].get(k)) for k, _ in cols]
        lines.append(f"| {LABELS.get(n, n)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ms(x):
    if x is None:
        return "-"
    ms = 1e3 * x
    return f"{ms:.3g} ms" if ms >= 0.1 else f"{ms:.2g} ms"


LABELS = {"lorenz": "W1 lorenz (scalar loop)", "gmm": "W2 gmm (mixture likelihood)",
          "elementwise": "W3 elementwise (10^6)", "mlp": "W4 mlp (BLAS-bound)",
          "nbody": "W5 nbody (small-array ops)"}


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
    ap.add_argument("--jax-python", default="/tmp/peerenv/bin/python")
    ap.add_argument("--markdown", action="store_true", help="print the README's table too")
    ap.add_argument("--repeats", type=int, default=7, help="samples per tool per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cold", type=int, default=5, help="fresh processes for cold start")
    ap.add_argument("--profile", action="append", default=[], metavar="WORKLOAD")
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    args = ap.parse_args(argv)
    names = args.workloads

    peers = {p: py for p, py in (("torch", args.torch_python), ("jax", args.jax_python))
             if py and os.path.exists(py)}
    pooled = {n: {} for n in names}
    versions = dict.fromkeys(peers)
    for _ in range(args.rounds):
        for n, per_tool in local_samples(names, args.repeats).items():
            for t, s in per_tool.items():
                pooled[n].setdefault(t, []).extend(s)
        for peer, python in peers.items():
            versions[peer], ps = peer_samples(peer, python, names, args.repeats)
            for n, s in ps.items():
                pooled[n].setdefault(peer, []).extend(s)
    med = {n: {t: float(np.median(s)) for t, s in d.items()} for n, d in pooled.items()}

    print(f"median seconds per call ({args.rounds} rounds x {args.repeats} samples; one thread; "
          f"NumPy {np.__version__}, " + ", ".join(f"{p} {v}" for p, v in versions.items()) + ")")
    print(f"{'workload':12s} {'tapejit':>10s} {'replay':>10s} {'torch':>10s} {'jax':>10s} "
          f"{'numpy':>10s} {'hand-wr.':>10s}   torch/tj  tj/numpy  tj/hand")
    for n in names:
        m = med[n]
        tj = m["tapejit"]
        r_t = f"{m['torch'] / tj:8.2f}x" if "torch" in m else "      - "
        r_h = f"{tj / m['hand-written']:8.2f}x" if "hand-written" in m else "      - "
        print(f"{n:12s} {fmt(tj)} {fmt(m.get('replay'))} {fmt(m.get('torch'))} "
              f"{fmt(m.get('jax'))} {fmt(m.get('numpy'))} {fmt(m.get('hand-written'))}  "
              f"{r_t} {tj / m['numpy']:8.2f}x {r_h}")

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

    if args.markdown:
        print()
        print(markdown(names, med, versions))

    for n in args.profile:
        profile(n)


if __name__ == "__main__":
    main()
