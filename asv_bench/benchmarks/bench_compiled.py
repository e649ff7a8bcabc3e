"""asv benchmarks of compiled replay (``tape.compile``) beside the eager gradient, the NumPy
primal and the hand-written @njit adjoint of the same workload, in the same run.

Targets (issue: compiled replay): W1 replayed value_and_grad within 10x of the hand-written
adjoint; W5 replayed gradient faster than the NumPy primal alone; W2 no slower than JAX jit's
gradient, W3 within 2x of it (JAX runs in peer_workloads.py when it is installed).
"""
import tape
from references import REFERENCES
from workloads import WORKLOADS
from _setup_once import setup_once


class _Replay:
    name = None
    timeout = 180

    @setup_once
    def setup(self):
        w = WORKLOADS[self.name]
        self.args = w.inputs()
        self.loss = w.loss
        self.cf = tape.compile(w.loss, *self.args, argnums=w.argnums)
        self.vg = tape.value_and_grad(w.loss, argnums=w.argnums)
        self.cf.value_and_grad(*self.args)
        self.vg(*self.args)
        self.ref = REFERENCES.get(self.name)
        if self.ref is not None:
            self.ref(*self.args)

    def time_replay_value_and_grad(self):
        self.cf.value_and_grad(*self.args)

    def time_replay_value(self):
        self.cf(*self.args)

    def time_eager_value_and_grad(self):
        self.vg(*self.args)

    def time_numpy_primal(self):
        self.loss(*self.args)


class _Hvp:
    """cf.hvp (a compiled gradient replayed in tangent mode; the first call, in setup, records
    grad(f) once) beside the replayed gradient, in the same run."""
    name = None
    timeout = 180

    @setup_once
    def setup(self):
        import numpy as np

        w = WORKLOADS[self.name]
        self.args = w.inputs()
        i = w.argnums if isinstance(w.argnums, int) else w.argnums[0]
        self.cf = tape.compile(w.loss, *self.args, argnums=i)
        self.v = np.ones(np.shape(self.args[i]))
        self.cf.hvp(self.args, self.v)
        self.cf.value_and_grad(*self.args)

    def time_replay_hvp(self):
        self.cf.hvp(self.args, self.v)

    def time_replay_value_and_grad(self):
        self.cf.value_and_grad(*self.args)


class _Hand:
    def time_handwritten_grad(self):
        self.ref(*self.args)


class ReplayW1Lorenz(_Replay, _Hand):
    name = "lorenz"

    def time_record_and_first_replay(self):
        """tape.compile (one eager recording) plus the first value_and_grad, kernels loaded
        (target: under 0.1 s)."""
        tape.compile(self.loss, *self.args).value_and_grad(*self.args)


class ReplayW2Gmm(_Replay):
    name = "gmm"


class ReplayW3Elementwise(_Replay, _Hand):
    name = "elementwise"

    @setup_once
    def setup(self):
        super().setup()
        w = WORKLOADS[self.name]
        self.cf1 = tape.compile(w.loss, *self.args, argnums=w.argnums, threads=1)
        self.cf1.value_and_grad(*self.args)

    def time_replay_value_and_grad_one_thread(self):
        """The same replay with its seeded run in one thread (the default splits it among the
        cores, as JAX's jit uses them; the hand-written loop is single-threaded)."""
        self.cf1.value_and_grad(*self.args)


class ReplayW4Mlp(_Replay, _Hand):
    name = "mlp"


class ReplayW5Nbody(_Replay):
    name = "nbody"


class HvpW1Lorenz(_Hvp):
    name = "lorenz"


class HvpW2Gmm(_Hvp):
    name = "gmm"


class HvpW5Nbody(_Hvp):
    name = "nbody"
