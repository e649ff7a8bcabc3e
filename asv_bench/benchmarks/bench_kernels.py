"""asv benchmarks of tapejit's machinery: recording cost per op, reverse sweep cost vs tape
length, cold start (DESIGN.md section 13), and the vectorized math kernels.

Recording benchmarks time ``OPS`` ops recorded on a fresh tape (``tape.vjp`` records without
sweeping), so microseconds per op = reported milliseconds; each has a plain Python/NumPy baseline
doing the same arithmetic untaped.
"""
import os

import numpy as np

import tape
from _setup_once import setup_once
from jit._cache import cache_dir

OPS = 1000  # ops per recording benchmark: reported ms == us per op

_HERE = os.path.dirname(os.path.abspath(__file__))
_NUMBA_CACHE = cache_dir()  # NUMBA_CACHE_DIR, else the per-user directory every run shares


def _scalar_chain(p):
    """OPS multiplications of 0-d tensors, the operand read as p[0] like W1 reads its inputs."""
    x = p[0]
    y = x
    for _ in range(OPS):
        y = y * x
    return y


def _scalar_const_chain(p):
    """OPS ops of a 0-d tensor with a Python float constant (W1's dt * dx)."""
    y = p[0]
    for _ in range(OPS):
        y = 1.0000001 * y
    return y


def _leaf_chain(x):
    """As _scalar_chain, but multiplying by the 0-d leaf itself (f(x) called with a scalar x)."""
    y = x
    for _ in range(OPS):
        y = y * x
    return y


def _array_chain(a):
    for _ in range(OPS):
        a = np.sin(a)
    return a


def _broadcast_binary(a, b):
    """OPS x ((16, 16, 3) * (16, 1, 3)): a binary ufunc with broadcasting (W5's shapes)."""
    for _ in range(OPS):
        y = a * b
    return y


def _reduction(m):
    """OPS x np.sum(m, axis=1) on (64, 64)."""
    for _ in range(OPS):
        y = np.sum(m, axis=1)
    return y


def _gather_slice(m):
    """OPS x m[::2, 1:] (basic slicing) on (64, 64)."""
    for _ in range(OPS):
        y = m[::2, 1:]
    return y


_ROWS = np.array([3, 0, 63, 17, 17, 42, 8, 30])


def _gather_int(m):
    """OPS x m[_ROWS] (an integer-array index, repeated rows included) on (64, 64)."""
    for _ in range(OPS):
        y = m[_ROWS]
    return y


_MASK = np.random.default_rng(0).uniform(size=(64, 64)) > 0.5


def _where(a, b):
    """OPS x np.where(mask, a, b) on (64, 64), both branches tensors."""
    for _ in range(OPS):
        y = np.where(_MASK, a, b)
    return y


def _matmul(a, b):
    """OPS x (16, 16) @ (16, 16)."""
    for _ in range(OPS):
        y = a @ b
    return y


# small arrays (16 elements), where recording's fixed cost is all there is: the target is
# recorded minus NumPy <= 3 us per op (issue 29)
_MASK16 = np.random.default_rng(1).uniform(size=16) > 0.5


def _small_unary(a):
    for _ in range(OPS):
        y = np.exp(a)
    return y


def _small_binary(a, b):
    for _ in range(OPS):
        y = a + b
    return y


def _small_sum(a):
    for _ in range(OPS):
        y = np.sum(a)
    return y


def _small_slice(a):
    for _ in range(OPS):
        y = a[2:5]
    return y


def _small_where(a, b):
    for _ in range(OPS):
        y = np.where(_MASK16, a, b)
    return y


class Record:
    """Eager recording cost per op (OPS ops on a fresh tape: ms reported == us per op)."""

    @setup_once
    def setup(self):
        rng = np.random.default_rng(0)
        self.p = np.array([1.0000001])
        self.x = 1.0000001
        self.a = np.linspace(0.0, 1.0, 1000)
        self.bc_a = rng.normal(size=(16, 16, 3))
        self.bc_b = rng.normal(size=(16, 1, 3))
        self.m = rng.normal(size=(64, 64))
        self.m2 = rng.normal(size=(64, 64))
        self.sq_a = rng.normal(size=(16, 16))
        self.sq_b = rng.normal(size=(16, 16))
        tape.vjp(_scalar_chain, self.p)
        tape.vjp(_leaf_chain, self.x)
        tape.vjp(_array_chain, self.a)
        tape.vjp(_broadcast_binary, self.bc_a, self.bc_b)
        tape.vjp(_reduction, self.m)
        tape.vjp(_gather_slice, self.m)
        tape.vjp(_gather_int, self.m)
        tape.vjp(_where, self.m, self.m2)
        tape.vjp(_matmul, self.sq_a, self.sq_b)
        self.v16 = rng.normal(size=16)
        self.w16 = rng.normal(size=16)
        for f in (_small_unary, _small_sum, _small_slice):
            tape.vjp(f, self.v16)
        for f in (_small_binary, _small_where):
            tape.vjp(f, self.v16, self.w16)

    def time_scalar_binary_x1000(self):
        """1000 x (0-d tensor * 0-d tensor), recorded."""
        tape.vjp(_scalar_chain, self.p)

    def time_scalar_const_binary_x1000(self):
        """1000 x (Python float * 0-d tensor), recorded."""
        tape.vjp(_scalar_const_chain, self.p)

    def time_scalar_binary_0d_leaf_x1000(self):
        """1000 x (0-d tensor * the 0-d leaf of a scalar argument), recorded."""
        tape.vjp(_leaf_chain, self.x)

    def time_scalar_binary_x1000_python_floats(self):
        """Baseline: the same 1000 multiplications on Python floats."""
        _leaf_chain(self.x)

    def time_array_unary_1000elem_x1000(self):
        """1000 x np.sin on a 1000-element tensor, recorded."""
        tape.vjp(_array_chain, self.a)

    def time_array_unary_1000elem_x1000_numpy(self):
        """Baseline: the same 1000 np.sin calls on a NumPy array."""
        _array_chain(self.a)

    def time_array_binary_broadcast_x1000(self):
        """1000 x ((16, 16, 3) tensor * (16, 1, 3) tensor), recorded."""
        tape.vjp(_broadcast_binary, self.bc_a, self.bc_b)

    def time_array_binary_broadcast_x1000_numpy(self):
        """Baseline: the same 1000 broadcasting multiplications on NumPy arrays."""
        _broadcast_binary(self.bc_a, self.bc_b)

    def time_reduction_sum_axis1_x1000(self):
        """1000 x np.sum(axis=1) of a (64, 64) tensor, recorded."""
        tape.vjp(_reduction, self.m)

    def time_reduction_sum_axis1_x1000_numpy(self):
        """Baseline: the same 1000 np.sum calls on a NumPy array."""
        _reduction(self.m)

    def time_gather_slice_x1000(self):
        """1000 x t[::2, 1:] of a (64, 64) tensor, recorded."""
        tape.vjp(_gather_slice, self.m)

    def time_gather_slice_x1000_numpy(self):
        """Baseline: the same 1000 slices (views) of a NumPy array."""
        _gather_slice(self.m)

    def time_gather_int_index_x1000(self):
        """1000 x t[rows] (8 integer rows) of a (64, 64) tensor, recorded."""
        tape.vjp(_gather_int, self.m)

    def time_gather_int_index_x1000_numpy(self):
        """Baseline: the same 1000 integer-array indexings of a NumPy array."""
        _gather_int(self.m)

    def time_where_x1000(self):
        """1000 x np.where(mask, a, b) on (64, 64) tensors, recorded."""
        tape.vjp(_where, self.m, self.m2)

    def time_where_x1000_numpy(self):
        """Baseline: the same 1000 np.where calls on NumPy arrays."""
        _where(self.m, self.m2)

    def time_matmul_16x16_x1000(self):
        """1000 x (16, 16) @ (16, 16) tensors, recorded."""
        tape.vjp(_matmul, self.sq_a, self.sq_b)

    def time_matmul_16x16_x1000_numpy(self):
        """Baseline: the same 1000 matmuls on NumPy arrays."""
        _matmul(self.sq_a, self.sq_b)

    def time_small_unary_x1000(self):
        """1000 x np.exp of a 16-element tensor, recorded."""
        tape.vjp(_small_unary, self.v16)

    def time_small_unary_x1000_numpy(self):
        """Baseline: the same 1000 np.exp calls on a NumPy array."""
        _small_unary(self.v16)

    def time_small_binary_x1000(self):
        """1000 x (16-element tensor + 16-element tensor), recorded."""
        tape.vjp(_small_binary, self.v16, self.w16)

    def time_small_binary_x1000_numpy(self):
        """Baseline: the same 1000 additions of NumPy arrays."""
        _small_binary(self.v16, self.w16)

    def time_small_sum_x1000(self):
        """1000 x np.sum of a 16-element tensor, recorded."""
        tape.vjp(_small_sum, self.v16)

    def time_small_sum_x1000_numpy(self):
        """Baseline: the same 1000 np.sum calls on a NumPy array."""
        _small_sum(self.v16)

    def time_small_slice_x1000(self):
        """1000 x t[2:5] of a 16-element tensor, recorded."""
        tape.vjp(_small_slice, self.v16)

    def time_small_slice_x1000_numpy(self):
        """Baseline: the same 1000 slices (views) of a NumPy array."""
        _small_slice(self.v16)

    def time_small_where_x1000(self):
        """1000 x np.where(mask, a, b) on 16-element tensors, recorded."""
        tape.vjp(_small_where, self.v16, self.w16)

    def time_small_where_x1000_numpy(self):
        """Baseline: the same 1000 np.where calls on NumPy arrays."""
        _small_where(self.v16, self.w16)


def _scalar_tape(n):
    def f(p):
        x = p[0]
        y = x
        for _ in range(n):
            y = y * x
        return y

    return f


class ReverseSweep:
    """Cost vs tape length in scalar ops: the reverse sweep alone (``vjp`` pullback on a tape
    already built and retained), recording alone, and the whole ``value_and_grad`` (record, build
    the arrays, sweep, deliver)."""

    params = [1_000, 10_000, 100_000]
    param_names = ["ops"]
    timeout = 120

    @setup_once
    def setup(self, n):
        self.p = np.array([1.0000001])
        _, self.pullback = tape.vjp(_scalar_tape(n), self.p)
        self.pullback(1.0)

    def time_reverse_sweep(self, n):
        self.pullback(1.0)

    def time_record(self, n):
        tape.vjp(_scalar_tape(n), self.p)

    def time_value_and_grad(self, n):
        tape.value_and_grad(_scalar_tape(n))(self.p)


class ColdStart:
    """A fresh process with a warm Numba cache: ``import tape`` plus the first W1 gradient."""

    timeout = 120
    env = {"NUMBA_CACHE_DIR": _NUMBA_CACHE}

    def timeraw_import_tape(self):
        return "import tape"

    def timeraw_import_and_first_w1_gradient(self):
        setup = f"import sys; sys.path.insert(0, {_HERE!r})"
        stmt = """
import tape
from workloads import lorenz_inputs, lorenz_loss
tape.value_and_grad(lorenz_loss)(*lorenz_inputs())
"""
        return stmt, setup


class ColdStartEmptyCache:
    """A fresh process with an EMPTY Numba cache (a new temporary NUMBA_CACHE_DIR, set in the
    subprocess before numba is imported, removed at its exit): ``import tape`` plus the first W1
    gradient, which compiles the small passes and the scalar tier of the reverse sweep (~6 s;
    an array program compiles the eager tier too, ~35 s): a user's first run after install."""

    timeout = 240
    number = 1
    repeat = 1

    def timeraw_import_and_first_w1_gradient_empty_cache(self):
        setup = f"""
import atexit, os, shutil, sys, tempfile
sys.path.insert(0, {_HERE!r})
_cache = tempfile.mkdtemp(prefix="tapejit-numba-cold-")
os.environ["NUMBA_CACHE_DIR"] = _cache
atexit.register(shutil.rmtree, _cache, True)
"""
        stmt = """
import tape
from workloads import lorenz_inputs, lorenz_loss
tape.value_and_grad(lorenz_loss)(*lorenz_inputs())
"""
        return stmt, setup


class HookOverhead:
    """W5's backward (record once, sweep again with retain_graph) without hooks, and with an
    identity tensor hook about every 100 rows: each hook cuts the jitted sweep once."""

    @setup_once
    def setup(self):
        import workloads

        pos0, vel0, masses = workloads.nbody_inputs()
        dt = workloads.NBODY_DT

        def accel(pos):
            return workloads._accel(pos, masses)

        def loss(pos, hook_every):
            vel = tape.tensor(vel0)
            acc = accel(pos)
            for step in range(workloads.NBODY_STEPS):
                vel = vel + (0.5 * dt) * acc
                if hook_every and step % hook_every == 0:
                    vel.register_hook(lambda g: g)
                pos = pos + dt * vel
                acc = accel(pos)
                vel = vel + (0.5 * dt) * acc
            return 0.5 * np.sum(masses[:, None] * vel * vel)

        self.pos = tape.tensor(pos0, requires_grad=True)
        self.plain = loss(self.pos, 0)
        self.hooked = loss(self.pos, 6)  # ~19 rows per step: a hook every ~110 rows
        self.plain.backward(retain_graph=True)
        self.hooked.backward(retain_graph=True)

    def time_backward_no_hooks(self):
        self.plain.backward(retain_graph=True)

    def time_backward_hook_per_100_rows(self):
        self.hooked.backward(retain_graph=True)


class ReplayHookOverhead:
    """W5's compiled value_and_grad without hooks, and with an identity tensor hook about every
    100 rows (as HookOverhead): each hook cuts the replayed reverse sweep once."""

    @setup_once
    def setup(self):
        import workloads

        pos0, vel0, masses = workloads.nbody_inputs()
        dt = workloads.NBODY_DT

        def loss(pos, hook_every):
            vel = tape.tensor(vel0)
            acc = workloads._accel(pos, masses)
            for step in range(workloads.NBODY_STEPS):
                vel = vel + (0.5 * dt) * acc
                if hook_every and step % hook_every == 0:
                    vel.register_hook(lambda g: g)
                pos = pos + dt * vel
                acc = workloads._accel(pos, masses)
                vel = vel + (0.5 * dt) * acc
            return 0.5 * np.sum(masses[:, None] * vel * vel)

        self.pos0 = pos0
        self.plain = tape.compile(loss, pos0, 0)
        self.hooked = tape.compile(loss, pos0, 6)  # ~19 rows per step: a hook every ~110 rows
        self.plain.value_and_grad(pos0, 0)
        self.hooked.value_and_grad(pos0, 6)

    def time_replay_no_hooks(self):
        self.plain.value_and_grad(self.pos0, 0)

    def time_replay_hook_per_100_rows(self):
        self.hooked.value_and_grad(self.pos0, 6)


class VectorMath:
    """The sweeps' vectorized exp / log / log1p / tanh (jit/_vmath.py) over 1M elements, beside
    NumPy's ufunc and a jitted loop over libm's scalar function, in the same run."""
    params = ["exp", "log", "log1p", "tanh"]
    param_names = ["function"]
    timeout = 180

    @setup_once
    def setup(self, name):
        import math

        from numba import njit

        from jit import _interp

        def loop(f):
            @njit(error_model="numpy")
            def run(x, y):
                for j in range(x.shape[0]):
                    y[j] = f(x[j])
            return run

        x = np.random.default_rng(0).normal(size=1_000_000)
        self.x = np.abs(x) if name.startswith("log") else x
        self.y = np.empty_like(self.x)
        self.ufunc = getattr(np, name)
        self.vector = loop(getattr(_interp, "_v" + name))
        fn = getattr(math, name)
        self.libm = loop(njit(error_model="numpy")(lambda v: fn(v)))
        self.vector(self.x, self.y)
        self.libm(self.x, self.y)

    def time_vectorized(self, name):
        self.vector(self.x, self.y)

    def time_libm_loop(self, name):
        self.libm(self.x, self.y)

    def time_numpy_ufunc(self, name):
        self.ufunc(self.x, out=self.y)


_COMPOSITIONS = {
    "median": lambda a: np.median(a, axis=1),
    "quantile": lambda a: np.quantile(a, 0.3, axis=1),
    "nanmean": lambda a: np.nanmean(a, axis=1),
    "cov": lambda a: np.cov(a),
    "interp": lambda a: np.interp(a[0], np.linspace(-3.0, 3.0, 16), np.cos(np.arange(16.0))),
    "convolve": lambda a: np.convolve(a[0], a[1, :5]),
    "trapezoid": lambda a: np.trapezoid(a, axis=1),
    "gradient": lambda a: np.gradient(a, axis=1),
}


class RecordCompositions:
    """Recording one NumPy function built from recorded ops (tape/numpy_ops/_statistics.py, ...) on a small
    (8, 64) array, against NumPy's own call on the array (ratios, not absolute times)."""

    params = sorted(_COMPOSITIONS)
    param_names = ["function"]

    @setup_once
    def setup(self, name):
        self.a = np.random.default_rng(0).normal(size=(8, 64))
        self.f = _COMPOSITIONS[name]
        self.loss = lambda a: np.sum(self.f(a))
        tape.vjp(self.loss, self.a)

    def time_tapejit(self, name):
        tape.vjp(self.loss, self.a)

    def time_numpy(self, name):
        self.f(self.a)
