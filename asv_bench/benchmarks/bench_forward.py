"""asv benchmarks of forward mode and second order, beside the eager gradient of the same run.

- ``ForwardW*``: per workload, ``tape.jvp`` (one random direction through all differentiable
  arguments) and ``tape.hvp`` (exact, reverse over forward), with the eager gradient
  (``tape.value_and_grad``) as the baseline in the same class: targets jvp <= 2x gradient (W2,
  W5) and hvp <= 4x gradient (W2).
- ``HessianW2``: reverse over reverse against forward over reverse (target <= 2x).
- ``JacfwdBatch``: the sensitivities of the W5 n-body final positions (48 outputs) to 8 masses:
  ``tape.jacfwd`` pushes the 8 directions through one sweep; the baseline is 8 separate
  ``tape.jvp`` calls (target: at least 2x faster), and ``linearize`` shows the sweeps alone.
"""
import numpy as np

import tape
from workloads import NBODY_DT, NBODY_STEPS, WORKLOADS, _accel, nbody_inputs
from _setup_once import setup_once


class _Forward:
    name = None
    timeout = 180

    @setup_once
    def setup(self):
        w = WORKLOADS[self.name]
        args = w.inputs()
        nums = w.argnums

        def sub(*xs):
            a = list(args)
            for i, x in zip(nums, xs):
                a[i] = x
            return w.loss(*a)

        rng = np.random.default_rng(0)
        self.args = args
        self.vg = tape.value_and_grad(w.loss, argnums=nums)
        self.sub = sub
        self.primals = tuple(args[i] for i in nums)
        self.tangents = tuple(rng.normal(size=np.shape(p)) for p in self.primals)
        self.vg(*args)  # load the kernels from Numba's cache
        tape.jvp(sub, self.primals, self.tangents)

    def time_tapejit_grad(self):
        self.vg(*self.args)

    def time_tapejit_jvp(self):
        tape.jvp(self.sub, self.primals, self.tangents)


class _Hvp:
    def time_tapejit_hvp(self):
        tape.hvp(self.sub, self.primals, self.tangents)


class ForwardW1Lorenz(_Forward):
    name = "lorenz"


class ForwardW2Gmm(_Forward, _Hvp):
    name = "gmm"


class ForwardW5Nbody(_Forward, _Hvp):
    name = "nbody"


def _final_positions(masses_tail, pos0, vel0):
    def f(m8):
        m = np.concatenate([m8, masses_tail])
        pos, vel = pos0, vel0
        acc = _accel(pos, m)
        for _ in range(NBODY_STEPS):
            vel = vel + (0.5 * NBODY_DT) * acc
            pos = pos + NBODY_DT * vel
            acc = _accel(pos, m)
            vel = vel + (0.5 * NBODY_DT) * acc
        return pos

    return f


class JacfwdBatch:
    timeout = 180

    @setup_once
    def setup(self):
        pos0, vel0, masses = nbody_inputs()
        self.f = _final_positions(masses[8:], pos0, vel0)
        self.m8 = masses[:8].copy()
        self.eye = np.eye(8)
        self.jac = tape.jacfwd(self.f)
        self.jac(self.m8)
        _, self.f_jvp = tape.linearize(self.f, self.m8)

    def time_jacfwd_8_directions_one_sweep(self):
        self.jac(self.m8)

    def time_8_separate_jvps(self):
        for e in self.eye:
            tape.jvp(self.f, (self.m8,), (e,))

    def time_8_linearized_pushes(self):
        for e in self.eye:
            self.f_jvp(e)


class HessianW2:
    """The 25 x 25 Hessian of W2 with respect to the mixture weights, three ways: reverse over
    reverse (jacrev of grad: one recorded backward, 25 jitted reverse sweeps over it), forward
    over reverse (jacfwd of grad: 25 tangent directions through it), and reverse over forward
    (tape.hessian: 25 exact HVPs). Target: reverse over reverse at most 2x forward over reverse."""

    timeout = 180

    @setup_once
    def setup(self):
        w = WORKLOADS["gmm"]
        args = w.inputs()
        self.x0 = args[0]
        self.f = lambda x: w.loss(x, *args[1:])
        self.g = tape.grad(self.f)
        self.g(self.x0)

    def time_gradient(self):
        self.g(self.x0)

    def time_reverse_over_reverse(self):
        tape.jacrev(tape.grad(self.f))(self.x0)

    def time_forward_over_reverse(self):
        tape.jacfwd(tape.grad(self.f))(self.x0)

    def time_reverse_over_forward(self):
        tape.hessian(self.f)(self.x0)
