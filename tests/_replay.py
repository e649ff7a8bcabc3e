"""Replaying a recorded tape with the forward value sweep (``jit.forward_sweep``), row by row.

A function is recorded once with leaves; new input values are then written into the leaves'
buffers and the sweep recomputes every row in place. ``check_rows`` compares each row's value
with a fresh eager recording at the new inputs (same code, same tape layout): bit for bit,
except where the arithmetic differs on purpose (``ULPS`` and the per-family bounds below).
Escape rows are left alone by the sweep; ``run_with_escapes`` computes them with NumPy between
segments, as the compiled replay's driver does.

Not a test module: tests/test_forward_sweep.py and tests/test_op_database.py use it.
"""
from __future__ import annotations

import warnings

import numba
import numpy as np

import tape
from jit._interp import forward_sweep
from jit.table import OWN_VALUE, TABLE
from tape.transforms.functional import _FreshTape

NOJIT = bool(numba.config.DISABLE_JIT)

# Where the sweep and the eager value may differ, with operands equal bit for bit. Under the JIT
# no elementwise row does, on any CPU: eager computes the array rows of the primitives whose NumPy
# loops differ by CPU (jit.table.OWN_VALUE) with the sweep's own loops (jit.elementwise), its 0-d
# values with the same formulas through the same libm, and NumPy's value for the others is exact
# by IEEE 754 (jit.table.NUMPY_EXACT). tests/test_accuracy.py checks those loops against exact
# values. Without the JIT the kernels call NumPy's scalar functions where they call libm under
# it, so the eager 0-d path (Python's math, libm) may differ from them by a few ulps
# (``NOJIT_ULPS``). Other families:
# - sum: NumPy's order is reproduced (pairwise for a contiguous reduced run, in order otherwise),
#   so sums agree bit for bit unless the reduced axes are not adjacent (then the recorder
#   transposes first and the grouping differs): |error| <= 1e-14 * sum(|x|) per output.
# - amax / amin: the sweep reduces in order (a later tie wins, as NumPy's scalar loop); NumPy's
#   SIMD reductions combine lanes, so among +0.0 / -0.0 ties the sign of the zero it returns can
#   differ. Every other value is bit for bit.
# - matmul: NumPy calls BLAS (other order, maybe FMA): |error| <= 1e-13 |y| + 1e-14 K max|a| max|b|.
# - escape rows: computed by the test driver with NumPy on the recorded shapes (same bound).
NOJIT_ULPS = {TABLE[c].name: 8 for c in OWN_VALUE} if NOJIT else {}
ULPS = NOJIT_ULPS
SCALAR_PATH_ULPS = NOJIT_ULPS



def _record(f, args, wrt):
    """f on a fresh tape with leaves at the indices in `wrt` (NumPy constants elsewhere)."""
    xs = [tape.tensor(a, requires_grad=True) if i in wrt else (a if a.ndim else float(a))
          for i, a in enumerate(args)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with _FreshTape():
            y = f(*xs)
    return xs, y


class Replay:
    """f recorded once at `args`; `run(new)` writes new leaf values and sweeps the tape."""

    @classmethod
    def of(cls, f, args, wrt):
        """A Replay, or None when f records nothing (an empty result, a constant one)."""
        xs, y = _record(f, [np.array(a, dtype=np.float64) for a in args], tuple(wrt))
        if not isinstance(y, tape.Tensor) or y._tape is None:
            return None
        return cls(f, args, wrt)

    def __init__(self, f, args, wrt):
        self.f = f
        self.args = [np.array(a, dtype=np.float64) for a in args]
        self.wrt = tuple(wrt)
        self.xs, self.y = _record(f, self.args, self.wrt)
        assert isinstance(self.y, tape.Tensor) and self.y._tape is not None, "nothing recorded"
        self.t = self.y._tape
        self.A = self.t.build()
        self.n = len(self.A.sv)
        leaf_slot = {id(leaf): s for s, (leaf, _) in self.t.leaves.items()}
        self.slots = {i: leaf_slot.get(id(self.xs[i])) for i in self.wrt}

    def write_inputs(self, new):
        """Write new values of the leaves into the buffers the tape reads."""
        A = self.A
        for i in self.wrt:
            s = self.slots[i]
            if s is None:  # the leaf is not read by any row
                continue
            v = np.asarray(new[i], dtype=np.float64)
            if A.is_array[s]:
                buf = self.t.av[A.R[s, 3]]
                assert buf is self.xs[i]._v  # a leaf row references the leaf's own buffer
                buf[...] = v
            else:  # a 0-d leaf enters the tape as a Python float, collected into sv
                A.sv[s] = float(v)

    def sweep(self, lo=0, hi=None):
        A = self.A
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            forward_sweep(A.R, A.S, A.VA, A.sv, A.IA, A.FA, lo, self.n if hi is None else hi)

    def run(self, new):
        self.write_inputs(new)
        self.sweep()

    def value(self, s):
        return np.asarray(self.t.value(s), dtype=np.float64)

    def fresh(self, new):
        """The eager recording at the new inputs (constants unchanged)."""
        args = [np.array(new[i] if i in self.wrt else a, dtype=np.float64)
                for i, a in enumerate(self.args)]
        other = Replay.__new__(Replay)
        other.f, other.args, other.wrt = self.f, args, self.wrt
        other.xs, other.y = _record(self.f, args, self.wrt)
        other.t = other.y._tape
        other.A = other.t.build()
        other.n = len(other.A.sv)
        return other


def ulps(got, want):
    """Elementwise distance in units in the last place (+0.0 and -0.0 are 1 apart; NaN == NaN
    whatever its sign and payload; NaN vs a number is infinitely far)."""
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    want = np.asarray(want, dtype=np.float64).reshape(-1)
    assert got.shape == want.shape

    def key(x):  # the floats in order as int64: ..., -0.0 -> -1, +0.0 -> 0, ...
        b = np.ascontiguousarray(x).view(np.int64)
        return np.where(b < 0, -(b & np.int64(0x7FFFFFFFFFFFFFFF)) - 1, b)

    kg, kw = key(got), key(want)
    same = (kg < 0) == (kw < 0)  # exact in int64; across zero, far apart anyway
    d = np.where(same, np.abs(np.where(same, kg - kw, 0)).astype(np.float64),
                 np.abs(kg.astype(np.float64)) + np.abs(kw.astype(np.float64)))
    gn, wn = np.isnan(got), np.isnan(want)
    d[gn & wn] = 0.0
    d[gn != wn] = np.inf
    return d


def _group_abs_sum(x, P, R, Q):
    return np.abs(x).reshape(P, R, Q).sum(axis=1).reshape(-1)


def check_rows(rec, new, ulp=None):
    """Sweep `rec` at the new inputs and compare every row with a fresh eager recording.

    A row whose operands came out bit for bit equal must match within its primitive's documented
    tolerance (bit for bit for most); a row downstream of a tolerated difference is compared
    loosely. Returns the number of rows compared bit for bit."""
    rec.run(new)
    ref = rec.fresh(new)
    A = rec.A
    assert np.array_equal(A.R, ref.A.R), "the two recordings differ in layout"
    exact = np.zeros(rec.n, bool)
    for s in range(rec.n):
        code = int(A.code[s])
        p = TABLE[code]
        got, want = rec.value(s), ref.value(s)
        assert got.shape == want.shape, (p.name, s, got.shape, want.shape)
        d = ulps(got, want)
        exact[s] = not d.size or d.max() == 0
        if exact[s]:
            continue
        ops = [int(o) for o in A.R[s, 1:3] if o >= 0]
        where = f"row {s} ({p.name}, shape {want.shape}): got {got.reshape(-1)[:6]}, want " \
            f"{want.reshape(-1)[:6]}, max {d.max()} ulp"
        assert p.family != "input", where
        operands = [rec.value(o) for o in ops]
        if not all(exact[o] for o in ops):  # a tolerated difference upstream
            scale = max([np.max(np.abs(v), initial=0.0) for v in operands + [want]] +
                        [1e-300])
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11 * scale,
                                       equal_nan=True, err_msg=where)
            continue
        allowed = (ulp or {}).get(p.name, ULPS.get(p.name, 0))
        if p.name == "sum":
            iat = A.S[A.R[s, 3], 1]
            P, Rr, Q = (int(v) for v in A.IA[iat:iat + 3])
            bound = 1e-14 * _group_abs_sum(operands[0], P, Rr, Q)
            err = np.abs(got.reshape(-1) - want.reshape(-1))
            assert np.all((err <= bound) | (d == 0)), where
        elif p.name in ("amax", "amin"):  # only the sign of a zero chosen among +-0 ties
            zero = (got.reshape(-1) == 0.0) & (want.reshape(-1) == 0.0)
            assert np.all((d == 0) | zero), where
        elif p.name == "matmul" or p.family == "escape":
            scale = np.max(np.abs(want), initial=0.0) + np.prod(
                [np.max(np.abs(v), initial=0.0) for v in operands]) * max(
                1, max(v.shape[-1] if v.ndim else 1 for v in operands))
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14 * scale,
                                       equal_nan=True, err_msg=where)
        else:
            assert d.max() <= allowed, where
    np.testing.assert_allclose(rec.value(rec.y._slot), ref.value(ref.y._slot), rtol=1e-12,
                               atol=1e-300, equal_nan=True)
    return int(exact.sum())


def escape_value(rec, c):
    """An escape row's value from its operands' current values, in NumPy (the driver's job:
    the escape's own value function, tape/escapes/)."""
    from tape.escapes import ESCAPES, pack

    t, A = rec.t, rec.A
    name = TABLE[A.code[c]].name
    if name not in ESCAPES:
        raise NotImplementedError(name)  # function rows: the user's forward, in Python
    esc = ESCAPES[name]
    sa, sb = int(A.R[c, 1]), int(A.R[c, 2])
    sha, shb, shy, params = t.escapes[c]
    a = np.reshape(rec.value(sa), sha)
    b = np.reshape(rec.value(sb), shb) if sb >= 0 else None
    y = pack(np, esc.value(a, b, **params), esc.outputs(sha, shb, **params))
    return np.reshape(y, shy)


def write_value(rec, c, y):
    A = rec.A
    if A.is_array[c]:
        rec.t.av[A.R[c, 3]][...] = np.reshape(y, rec.t.av[A.R[c, 3]].shape)
    else:
        A.sv[c] = float(y)


def run_with_escapes(rec, new):
    """The compiled-replay driver in miniature: sweep, compute an escape in NumPy, continue."""
    rec.write_inputs(new)
    lo = 0
    for c in sorted(rec.t.escapes):
        rec.sweep(lo, c)
        write_value(rec, c, escape_value(rec, c))
        lo = c + 1
    rec.sweep(lo, rec.n)
