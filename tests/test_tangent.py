"""The tangent (forward-mode) sweep over the op database, row by row.

Every op of ``tests/_op_database.py`` that claims the tangent sweep is recorded on a fresh tape
on the database's samples (hypothesis shapes: 0-d, size 1, empty, broadcasting, the inline 0-d
path), its leaves are seeded with random directions and ``jit._tangent.tangent_sweep`` runs over
the whole tape (``tests/_tangent_sweep.py``). Checks: the tangent equals a central finite
difference; the dot-product test <v, J u> == <J^T v, u> against the reverse sweep, which also
holds at the database's near-non-differentiable points, where the derivative is a convention;
and k directions in one sweep equal k single-direction sweeps bit for bit.

This file also runs with ``NUMBA_DISABLE_JIT=1``: keep sizes small.
"""
from __future__ import annotations

import numba
import numpy as np
import pytest

import jit
from jit import _generate_tangent
from jit.table import OPCODE, TABLE

from _mode_checks import check_tangent_kinks, check_tangent_sweep, kinked, over_ops
from _op_database import REDUCE_FUNCS, claiming, distinct, signed
from _tangent_sweep import K, Recorded, check_tangent, fd_jvp

TANGENT = claiming("tangent")


@over_ops(TANGENT, max_examples=15)
def test_tangent(op, sample, rng):
    check_tangent_sweep(op, sample, rng)


@kinked(TANGENT)
def test_near_non_differentiable_points(op):
    check_tangent_kinks(op)


@pytest.mark.parametrize("name", sorted(REDUCE_FUNCS))
@pytest.mark.parametrize("axis", [None, 0, 1, 2, (1, 2), (0, 2)])
def test_reduce_jvp_every_axis(name, axis):
    """Each (P, R, Q) case of the kernels: Q == 1 (trailing axes), P == 1, both > 1."""
    rng = np.random.default_rng(6)
    x = (signed if name == "prod" else distinct)(rng, (3, 4, 2))
    fn = getattr(np, REDUCE_FUNCS[name])
    check_tangent(lambda a: fn(a, axis=axis), [x], (0,), rng, code=OPCODE[name])


# ---------------------------------------------------------------------------------------------
# Conventions at non-differentiable points: the tangent is the transpose of the reverse rule


@pytest.mark.parametrize("fn", [np.maximum, np.minimum, np.fmax, np.fmin])
def test_elementwise_max_min_ties(fn):
    rng = np.random.default_rng(0)
    a = np.array([1.0, 2.0, -1.0, np.nan, 3.0])
    b = np.array([1.0, 1.0, -1.0, 2.0, np.nan])
    check_tangent(fn, [a, b], (0, 1), rng, fd=False)
    check_tangent(lambda x, y: fn(x * 1.0, y * 1.0), [np.array(3.0), np.array(3.0)], (0, 1), rng,
              fd=False)


@pytest.mark.parametrize("fname", ["max", "min"])
def test_max_reduction_ties_and_nan(fname):
    fn = getattr(np, fname)
    v = 3.0 if fname == "max" else -3.0
    rng = np.random.default_rng(1)
    _, ty = check_tangent(fn, [np.array([1.0, v, 0.0, v, v])], (0,), rng, fd=False)
    rec = Recorded(fn, [np.array([1.0, v, 0.0, v, v])], (0,))
    u = np.zeros((1, 5))
    u[0, 1] = 3.0
    assert rec.jvp([u], 1)[0] == 1.0  # the mean of the tied tangents (0-d output)
    x = np.array([[v, v, 0.0], [v, 0.0, 0.0]])
    check_tangent(lambda a: fn(a, axis=0), [x], (0,), rng, fd=False)
    check_tangent(fn, [np.array([1.0, np.nan, 5.0])], (0,), rng, fd=False)


def test_prod_and_cumprod_with_zeros():
    rng = np.random.default_rng(2)
    for x in ([2.0, 0.0, 3.0], [2.0, 0.0, 0.0, 5.0], [[0.0, 4.0], [2.0, 3.0]],
              [1.5, 0.0, 2.0, 0.0, 3.0], [0.0, 2.0, 3.0]):
        x = np.array(x)
        check_tangent(np.prod, [x], (0,), rng, fd=False)
        check_tangent(lambda a: np.prod(a, axis=-1), [x], (0,), rng, fd=False)
        # cumprod is a polynomial: FD holds at zeros too
        check_tangent(lambda a: np.cumprod(a, axis=-1), [x], (0,), rng)


def test_chain_through_several_families():
    """A small program mixing families, 0-d and array rows, broadcasting and constants."""
    rng = np.random.default_rng(3)

    def f(a, s):
        b = np.tanh(a) * s + np.exp(-a[:, ::-1])
        c = np.max(b, axis=1, keepdims=True) - np.cumsum(b * b, axis=0)
        d = np.where(c > 0.1, c, 2.0 * c) @ np.ones((3, 2))
        return np.sum(np.sin(d)) * s + s * s

    check_tangent(f, [rng.uniform(-1, 1, (4, 3)), np.array(0.7)], (0, 1), rng)


def test_escape_rows_are_skipped_and_segments_compose():
    """The sweep leaves escape rows to the driver: sweeping up to the escape, running its JVP in
    NumPy on the (k, *shape) tangent blocks, then sweeping on gives the full tangent."""
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-1, 1, (20, 30)), rng.uniform(-1, 1, (30, 40))  # above BLAS_FLOPS

    def f(x, y):
        return np.sum(np.sin(np.tanh(x) @ y))

    rec = Recorded(f, [a, b], (0, 1))
    A, t = rec.A, rec.t
    (c,) = [s for s in t.escapes if rec.act[s]]
    assert TABLE[A.code[c]].name == "matmul_blas"
    n = len(A.sv)
    us = [rng.standard_normal((K,) + x.shape) for x in (a, b)]
    TO = np.full(n, -1, np.int64)
    live = np.flatnonzero(rec.live)
    sizes = A.size[live] * K
    TO[live] = np.cumsum(sizes) - sizes
    T = np.full(int(sizes.sum()), np.nan)
    for s, u in zip(rec.slots, us):
        T[TO[s]:TO[s] + K * A.size[s]] = u.reshape(-1)

    def block(s, shape):
        return T[TO[s]:TO[s] + K * A.size[s]].reshape((K,) + tuple(shape))

    args = (A.R, A.S, A.VA, TO, A.sv, T, A.IA, A.FA, rec.act, K)
    jit.tangent_sweep(*args, 0, n)  # over the escape: its block stays unwritten
    assert np.isnan(block(c, t.escapes[c][2])).all()
    jit.tangent_sweep(*args, 0, c)
    sa, sb = A.R[c, 1], A.R[c, 2]
    sha, shb, shy, _ = t.escapes[c]
    x, y = np.reshape(t.value(sa), sha), np.reshape(t.value(sb), shb)
    block(c, shy)[...] = block(sa, sha) @ y + x @ block(sb, shb)  # d(XY) = dX Y + X dY
    mid = (c + 1 + n) // 2  # two segments after the escape compose like one
    jit.tangent_sweep(*args, c + 1, mid)
    jit.tangent_sweep(*args, mid, n)
    ty = block(rec.y._slot, ())
    for j in range(2):
        np.testing.assert_allclose(ty[j], fd_jvp(f, [a, b], (0, 1), [us[0][j], us[1][j]]),
                                   rtol=1e-6)
    ga, gb = rec.vjp(np.array(1.0))
    np.testing.assert_allclose(ty, np.einsum("kij,ij->k", us[0], ga)
                               + np.einsum("kij,ij->k", us[1], gb), rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# The generated module


def test_tangent_module_is_fresh():
    with open(_generate_tangent.OUT) as fh:
        assert fh.read() == _generate_tangent.render(), \
            "jit/_tangent.py is stale: python -m jit._generate_tangent"
    from jit import _tangent

    assert _tangent.TABLE_HASH == jit.table_hash()


def test_tangent_sweep_has_exactly_one_signature():
    from numba.core.sigutils import normalize_signature

    if numba.config.DISABLE_JIT:
        pytest.skip("NUMBA_DISABLE_JIT=1: no signatures")
    from jit import _tangent

    rng = np.random.default_rng(4)
    check_tangent(lambda a, s: np.sum(np.exp(a) * s) + s * s, [rng.uniform(-1, 1, (2, 3)),
                                                             np.array(0.5)], (0, 1), rng)
    fn = _tangent.tangent_sweep
    assert len(fn.signatures) == 1, fn.signatures
    args, _ = normalize_signature(_tangent.SIG_TANGENT_SWEEP)
    fn.compile(tuple(args))  # the declared signature is the one already compiled: no new one
    assert len(fn.signatures) == 1, fn.signatures
