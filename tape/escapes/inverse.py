"""inv, det, logabsdet (slogdet's second result) and solve: the LU-based escapes."""
from __future__ import annotations

import math

import numpy as np

from . import Escape, diagonal, mT, mat, register, square


def _lu_work(sha, extra=0):
    n = sha[-1]
    return math.prod(sha[:-2]) * (1 + n ** 3) + extra


# inv: Y = A^-1; dY = -Y dA Y, gA = -Y^T g Y^T


def inv_value(a, b=None):
    return np.linalg.inv(a)


def inv_vjp(xp, g, y, a, b, need_a, need_b):
    yt = mT(xp, y)
    return -(yt @ g @ yt), None


def inv_jvp(xp, ta, tb, y, a, b):
    return -(y @ ta @ y)


def inv_outputs(sha, shb):
    square(sha, "inv")
    return (tuple(sha),)


register(Escape("inv", inv_value, inv_vjp, inv_jvp, inv_outputs,
                lambda sha, shb: _lu_work(sha, math.prod(sha))))


# det: d det(A) = tr(adj(A) dA), adj(A) = det(A) A^-1 when A is invertible. A singular A takes
# the adjugate from the SVD in NumPy, and from cofactors (determinants of minors, which record)
# on tensors, so that derivatives of every order stay exact there: det is a polynomial


def adjugate(a):
    """adj(A) for any square A (singular too), from the SVD A = U S V^T."""
    u, s, vt = np.linalg.svd(a)
    n = s.shape[-1]
    others = np.stack([np.prod(np.delete(s, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vt)
    return sign[..., None, None] * (np.swapaxes(vt, -1, -2) * others[..., None, :]) \
        @ np.swapaxes(u, -1, -2)


def cofactor_adjugate(xp, a):
    """adj(A)[j, i] = (-1)^(i + j) det(A without row i and column j), with any xp."""
    n = a.shape[-1]
    if n == 1:
        return xp.constant(np.ones(a.shape))
    rows = []
    for i in range(n):
        keep_i = [k for k in range(n) if k != i]
        ai = xp.take(a, keep_i, axis=-2)
        rows.append([(-1.0) ** (i + j) * xp.linalg.det(
            xp.take(ai, [k for k in range(n) if k != j], axis=-1)) for j in range(n)])
    cof = xp.stack([xp.stack(r, axis=-1) for r in rows], axis=-2)
    return mT(xp, cof)


def _adjugate(xp, a):
    return cofactor_adjugate(xp, a) if xp.tensors else adjugate(a)


def det_value(a, b=None):
    return np.linalg.det(a)


def det_vjp(xp, g, y, a, b, need_a, need_b):
    try:
        inv_t = mT(xp, xp.linalg.inv(a))
    except np.linalg.LinAlgError:
        return mat(xp, g) * mT(xp, _adjugate(xp, a)), None
    return mat(xp, g * y) * inv_t, None


def det_jvp(xp, ta, tb, y, a, b):
    try:
        return y * diagonal(xp.linalg.solve(a, ta)).sum(axis=-1)
    except np.linalg.LinAlgError:
        return diagonal(_adjugate(xp, a) @ ta).sum(axis=-1)


def det_outputs(sha, shb):
    square(sha, "det")
    return (tuple(sha[:-2]),)


register(Escape("det", det_value, det_vjp, det_jvp, det_outputs,
                lambda sha, shb: _lu_work(sha, math.prod(sha[:-2]))))


# logabsdet: d log|det A| = tr(A^-1 dA)


def logabsdet_value(a, b=None):
    return np.linalg.slogdet(a)[1]


def logabsdet_vjp(xp, g, y, a, b, need_a, need_b):
    return mat(xp, g) * mT(xp, xp.linalg.inv(a)), None


def logabsdet_jvp(xp, ta, tb, y, a, b):
    return diagonal(xp.linalg.solve(a, ta)).sum(axis=-1)


register(Escape("logabsdet", logabsdet_value, logabsdet_vjp, logabsdet_jvp, det_outputs,
                lambda sha, shb: _lu_work(sha, math.prod(sha[:-2]))))


# solve: Y = A^-1 B (B a batch of matrices of A's batch): gB = A^-T g, gA = -gB Y^T;
# dY = A^-1 (dB - dA Y)


def solve_value(a, b):
    return np.linalg.solve(a, b)


def solve_vjp(xp, g, y, a, b, need_a, need_b):
    gb = xp.linalg.solve(mT(xp, a), g)
    ga = -(gb @ mT(xp, y)) if need_a else None
    return ga, (gb if need_b else None)


def solve_jvp(xp, ta, tb, y, a, b):
    rhs = 0.0
    if tb is not None:
        rhs = tb
    if ta is not None:
        rhs = rhs - ta @ y
    return xp.linalg.solve(a, rhs)


def solve_outputs(sha, shb):
    square(sha, "solve")
    if shb is None or len(shb) != len(sha) or tuple(shb[:-1]) != tuple(sha[:-1]):
        raise ValueError(f"solve: right-hand side {shb} does not match {sha}")
    return (tuple(shb),)


register(Escape("solve", solve_value, solve_vjp, solve_jvp, solve_outputs,
                lambda sha, shb: _lu_work(sha, 2 * math.prod(shb) * sha[-1]), binary=True))
