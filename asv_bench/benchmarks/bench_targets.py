"""The compiled-replay targets as ratios, each measured in one process with the two sides
interleaved: rounds of a few calls of one, then of the other, and the median over rounds of each
round's ratio of medians.

Timed apart (``bench_compiled`` beside ``bench_workloads``), the two sides of a ratio may fall in
different spells of this VM, whose speed for the interpreters swings about 2x for seconds at a
time while a hand-written loop's barely moves. Interleaved, both sides of each round see the same
spell, and the median over rounds says how the spells went. Values are ratios (lower is better
for tapejit): ``track_`` benchmarks, run once per process.

- W1 replayed value_and_grad / the hand-written @njit adjoint (target: within 10x);
- W2 replayed value_and_grad / JAX jit's (target: no slower, 1.0), W3 (target: within 2x) and
  the fit of bench_fit (no target), when JAX is installed (``make bench-jax``);
- W5 replayed value_and_grad / the NumPy primal alone (target: below 1).
"""
import time

import numpy as np

import peer_workloads
import tape
from _setup_once import setup_once
from references import REFERENCES
from workloads import WORKLOADS

ROUNDS = 15


def interleaved_ratio(ours, base, seconds=4.0):
    """Median over ROUNDS rounds of median(ours) / median(base), each round timing a few calls
    of each (as many as fill about seconds / ROUNDS / 2 apiece)."""
    ours(), base()
    t = time.perf_counter()
    ours()
    one = max(time.perf_counter() - t, 1e-6)
    calls = int(min(200, max(3, seconds / ROUNDS / 2 / one)))
    ratios = []
    for _ in range(ROUNDS):
        sides = []
        for f in (ours, base):
            ts = []
            for _ in range(calls):
                t = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t)
            sides.append(np.median(ts))
        ratios.append(sides[0] / sides[1])
    return float(np.median(ratios))


class _Target:
    name = None
    timeout = 300
    unit = "ratio"
    number = 1
    repeat = 1

    def baseline_call(self):
        raise NotImplementedError

    def replay_call(self):
        w = WORKLOADS[self.name]
        args = w.inputs()
        cf = tape.compile(w.loss, *args, argnums=w.argnums)
        cf.value_and_grad(*args)
        return lambda: cf.value_and_grad(*args)

    @setup_once
    def setup(self):
        self.base, self.ours = self.baseline_call(), self.replay_call()

    def track_replay_over_baseline(self):
        return interleaved_ratio(self.ours, self.base)


class W1LorenzOverHandwritten(_Target):
    name = "lorenz"

    def baseline_call(self):
        args = WORKLOADS[self.name].inputs()
        ref = REFERENCES[self.name]
        return lambda: ref(*args)


class W5NbodyOverNumpyPrimal(_Target):
    name = "nbody"

    def baseline_call(self):
        w = WORKLOADS[self.name]
        args = w.inputs()
        return lambda: w.loss(*args)


class _OverJax(_Target):
    def baseline_call(self):
        if not peer_workloads.available("jax"):
            raise NotImplementedError("jax is not installed")
        w = WORKLOADS[self.name]
        return peer_workloads.value_and_grad("jax", self.name, w.inputs(), w.argnums)


class W2GmmOverJax(_OverJax):
    name = "gmm"


class W3ElementwiseOverJax(_OverJax):
    name = "elementwise"


class FitOverJax(_Target):
    def baseline_call(self):
        if not peer_workloads.available("jax"):
            raise NotImplementedError("jax is not installed")
        import jax
        import jax.numpy as jnp

        from bench_fit import data

        jax.config.update("jax_enable_x64", True)
        t, y = (jnp.asarray(v) for v in data())
        f = jax.jit(jax.value_and_grad(
            lambda a, b, t, y: jnp.sum((a * jnp.exp(-b * t) - y) ** 2), argnums=(0, 1)))
        return lambda: jax.block_until_ready(f(2.1, 0.65, t, y))

    def replay_call(self):
        from bench_fit import data, loss

        args = (2.1, 0.65, *data())
        cf = tape.compile(loss, *args, argnums=(0, 1))
        cf.value_and_grad(*args)
        return lambda: cf.value_and_grad(*args)
