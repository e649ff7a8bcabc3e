"""cholesky and solve_triangular: the triangular escapes.

cholesky reads the lower triangle of A (NumPy's; an upper factor is the lower one of A^T), so
its gradient goes to that triangle: the rules work with the symmetric matrix it sees
(``sym_lower``) and fold its adjoint back (``fold_lower``). Reverse rule: Murray (2016),
"Differentiation of the Cholesky decomposition", with Phi(X) = tril(X), diagonal halved:
gA = sym(L^-T Phi(L^T gL) L^-1); forward: dL = L Phi(L^-1 dA L^-T).

solve_triangular(a, b, lower, trans, unit): X = op(T)^-1 B with T the triangle of a that is
read (its diagonal taken as ones when `unit`) and op(T) = T or T^T (trans 0 / 1). SciPy's
solver when SciPy is importable, else NumPy's general solve on the triangle.
"""
from __future__ import annotations

import math

import numpy as np

from . import Escape, fold_lower, mT, register, square, sym_lower


def _phi(xp, x):
    return xp.tril(x) - 0.5 * x * np.eye(x.shape[-1])


def cholesky_value(a, b=None):
    return np.linalg.cholesky(a)


def cholesky_vjp(xp, g, L, a, b, need_a, need_b):
    p = _phi(xp, mT(xp, L) @ g)
    x = xp.solve_triangular(L, p, lower=True, trans=1)  # L^-T P
    s = mT(xp, xp.solve_triangular(L, mT(xp, x), lower=True, trans=1))  # L^-T P L^-1
    return fold_lower(xp, s), None


def cholesky_jvp(xp, ta, tb, L, a, b):
    da = sym_lower(xp, ta)
    y = xp.solve_triangular(L, da, lower=True)  # L^-1 dA
    x = mT(xp, xp.solve_triangular(L, mT(xp, y), lower=True))  # L^-1 dA L^-T
    return L @ _phi(xp, x)


def cholesky_outputs(sha, shb):
    square(sha, "cholesky")
    return (tuple(sha),)


register(Escape("cholesky", cholesky_value, cholesky_vjp, cholesky_jvp, cholesky_outputs,
                lambda sha, shb: math.prod(sha[:-2]) * (1 + sha[-1] ** 3) + math.prod(sha)))


def triangle(xp, a, lower, unit):
    """The part of `a` a triangular solve reads (with the unit diagonal left out)."""
    k = -1 if unit else 0
    return xp.tril(a, k) if lower else xp.triu(a, -k)


def st_value(a, b, lower=True, trans=0, unit=False):
    batch = np.broadcast_shapes(np.shape(a)[:-2], np.shape(b)[:-2])
    a = np.broadcast_to(a, batch + np.shape(a)[-2:])
    b = np.broadcast_to(b, batch + np.shape(b)[-2:])
    try:
        from scipy.linalg import solve_triangular
    except ImportError:
        t = triangle(np, a, lower, unit) + (np.eye(a.shape[-1]) if unit else 0.0)
        return np.linalg.solve(np.swapaxes(t, -1, -2) if trans else t, b)
    if 0 in a.shape or 0 in b.shape:
        return np.zeros(b.shape)
    return solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit,
                            check_finite=False)


def st_vjp(xp, g, x, a, b, need_a, need_b, lower=True, trans=0, unit=False):
    gb = xp.solve_triangular(a, g, lower=lower, trans=1 - trans, unit=unit)
    ga = None
    if need_a:
        gt = -(gb @ mT(xp, x)) if trans == 0 else -(x @ mT(xp, gb))
        ga = triangle(xp, gt, lower, unit)
    return ga, (gb if need_b else None)


def st_jvp(xp, ta, tb, x, a, b, lower=True, trans=0, unit=False):
    rhs = 0.0
    if tb is not None:
        rhs = tb
    if ta is not None:
        dt = triangle(xp, ta, lower, unit)
        rhs = rhs - (mT(xp, dt) if trans else dt) @ x
    return xp.solve_triangular(a, rhs, lower=lower, trans=trans, unit=unit)


def st_outputs(sha, shb, lower=True, trans=0, unit=False):
    square(sha, "solve_triangular")
    if shb is None or len(shb) != len(sha) or tuple(shb[:-1]) != tuple(sha[:-1]):
        raise ValueError(f"solve_triangular: right-hand side {shb} does not match {sha}")
    return (tuple(shb),)


register(Escape("solve_triangular", st_value, st_vjp, st_jvp, st_outputs,
                lambda sha, shb, **p: math.prod(sha[:-2]) * (1 + sha[-1] ** 2 * shb[-1])
                + math.prod(shb), binary=True,
                params={"lower": (True, False), "trans": (0, 1), "unit": (False, True)}))
