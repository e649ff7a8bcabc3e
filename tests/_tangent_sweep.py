"""The tangent (forward-mode) sweep driven directly: record, seed leaves, sweep.

``Recorded`` records f on a fresh tape and runs ``jit._tangent.tangent_sweep`` over the whole
tape with its leaves seeded by k directions (a test-only stand-in for the forward-mode driver).
``check_tangent`` checks a tangent three ways: against a central finite difference, by the
dot-product test <v, J u> == <J^T v, u> against the reverse sweep (which also holds at ties,
zeros and NaN, where the derivative is a convention), and k directions in one sweep against k
single-direction sweeps, bit for bit.

Not a test module: tests/test_tangent.py and tests/test_op_database.py use it.
"""
from __future__ import annotations

import warnings

import numpy as np

import jit
import tape
from jit.table import TABLE
from tape.transforms.functional import _FreshTape

K = 8  # directions per sweep in the tests


class Recorded:
    """f recorded on a fresh tape with leaves at the indices in `wrt`, NumPy constants elsewhere."""

    def __init__(self, f, args, wrt):
        self.args = [np.array(a, dtype=np.float64) for a in args]
        self.wrt = tuple(wrt)
        self.f = f
        # 0-d constants as Python floats, so that 0-d rows take the inline path
        self.xs = [tape.tensor(a, requires_grad=True) if i in self.wrt else
                   (a if a.ndim else float(a)) for i, a in enumerate(self.args)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with _FreshTape():
                self.y = f(*self.xs)
        self.t = self.y._tape
        self.A = self.t.build()
        n = len(self.A.sv)
        leaf_slot = {id(leaf): s for s, (leaf, _) in self.t.leaves.items()}
        self.slots = [leaf_slot.get(id(self.xs[i])) for i in self.wrt]
        src = np.zeros(n, np.uint8)
        for s in self.slots:
            if s is not None:
                src[s] = 1
        # forward activity: need_pass with every slot a root marks the operands with tangents
        self.live = np.zeros(n, np.uint8)
        self.act = np.zeros(n, np.uint8)
        jit.need_pass(self.A.R, src, np.ones(n, np.uint8), self.live, self.act)
        self.codes = set(self.A.code[self.act != 0].tolist())

    def jvp(self, us, k):
        """Tangent of the output along directions us[i] (shape (k, *args[i].shape)) per wrt."""
        A = self.A
        n = len(A.sv)
        TO = np.full(n, -1, np.int64)
        live = np.flatnonzero(self.live)
        sizes = A.size[live] * k
        TO[live] = np.cumsum(sizes) - sizes
        T = np.full(int(sizes.sum()), np.nan)  # unwritten entries read as NaN, not as zero
        for s, u in zip(self.slots, us):
            if s is not None:
                T[TO[s]:TO[s] + k * A.size[s]] = np.reshape(u, -1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            jit.tangent_sweep(A.R, A.S, A.VA, TO, A.sv, T, A.IA, A.FA, self.act, k, 0, n)
        ys = self.y._slot
        shape = (k,) + self.y.shape
        if not self.live[ys]:
            return np.zeros(shape)
        return T[TO[ys]:TO[ys] + k * A.size[ys]].reshape(shape).copy()

    def vjp(self, v):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            gs = tape.autograd.grad(self.y, [self.xs[i] for i in self.wrt], grad_outputs=v,
                                    retain_graph=True, allow_unused=True)
        return [np.zeros(self.args[i].shape) if g is None else np.asarray(g)
                for i, g in zip(self.wrt, gs)]


def fd_jvp(f, args, wrt, us, h=1e-6):
    """Central difference of the NumPy function f along one direction (us[i] per wrt)."""
    scale = max([1.0] + [float(np.max(np.abs(args[i]), initial=0.0)) for i in wrt])
    step = h * scale
    out = []
    for sign in (1.0, -1.0):
        a = [np.array(x, dtype=np.float64) for x in args]
        for i, u in zip(wrt, us):
            a[i] = a[i] + sign * step * u
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out.append(np.asarray(f(*a), dtype=np.float64))
    return (out[0] - out[1]) / (2.0 * step)


def check_tangent(f, args, wrt, rng, code=None, fd=True, f_np=None, rtol=1e-6, atol=1e-7):
    """FD, dot-product and k-directions checks of f's tangent; `code` must be a swept row."""
    rec = Recorded(f, args, wrt)
    if code is not None:
        assert code in rec.codes, f"{TABLE[code].name} was not recorded (got " \
            f"{sorted(TABLE[c].name for c in rec.codes)})"
    us = [rng.standard_normal((K,) + rec.args[i].shape) for i in wrt]
    ty = rec.jvp(us, K)
    # (c) k directions in one sweep == k sweeps of one direction, bit for bit
    for j in range(K):
        one = rec.jvp([u[j:j + 1] for u in us], 1)[0]
        np.testing.assert_array_equal(one, ty[j], err_msg=f"direction {j} of {K}")
    # (b) dot-product test against the reverse sweep
    v = rng.standard_normal(rec.y.shape)
    gs = rec.vjp(v)
    for j in range(K):
        lhs = float(np.sum(v * ty[j]))
        terms = [g * u[j] for g, u in zip(gs, us)]
        rhs = float(sum(np.sum(t) for t in terms))
        scale = float(np.sum(np.abs(v * ty[j])) + sum(np.sum(np.abs(t)) for t in terms))
        if np.isnan(lhs) or np.isnan(rhs):
            assert np.isnan(lhs) and np.isnan(rhs), (lhs, rhs)
        elif np.isinf(lhs) or np.isinf(rhs):  # an infinite slope (sqrt at 0): the same one
            assert lhs == rhs, (j, lhs, rhs)
        else:
            assert abs(lhs - rhs) <= 1e-10 * scale + 1e-300, (j, lhs, rhs, scale)
    # (a) finite differences along the first two directions
    if fd:
        f_np = f if f_np is None else f_np
        for j in range(2):
            num = fd_jvp(f_np, rec.args, wrt, [u[j] for u in us])
            tol = atol * max(1.0, float(np.max(np.abs(num), initial=0.0)))
            np.testing.assert_allclose(ty[j], num, rtol=rtol, atol=tol,
                                       err_msg=f"JVP vs FD, direction {j}")
    return rec, ty
