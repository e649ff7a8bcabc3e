"""qr: the reduced decomposition A = Q R of a square or tall A (m >= n), Q (..., m, n),
R (..., n, n) upper triangular.

Forward: X = Q^T dA R^-1, Omega = tril(X, -1) - tril(X, -1)^T (Q^T dQ, antisymmetric),
dR = (X - Omega) R, dQ = dA R^-1 - Q (X - Omega). Reverse (its transpose):
N = gR R^T - Q^T gQ, C = triu(N) + triu(N, 1)^T, gA = (gQ + Q C) R^-T.
A rank-deficient A (a zero on R's diagonal) has no derivative: the triangular solve raises.
"""
from __future__ import annotations

import math

import numpy as np

from . import Escape, mT, register


def value(a, b=None):
    q, r = np.linalg.qr(a)
    return q, r


def _check(r):
    d = np.abs(np.diagonal(np.asarray(r), axis1=-2, axis2=-1))
    if d.size and not np.all(d > 0.0):
        raise np.linalg.LinAlgError("qr: the matrix is rank-deficient (a zero on R's "
                                    "diagonal): its Q, R have no derivative there")


def _right_inverse(xp, z, r, trans):
    """z R^-1 (trans 0) or z R^-T (trans 1)."""
    return mT(xp, xp.solve_triangular(r, mT(xp, z), lower=False, trans=1 - trans))


def vjp(xp, g, y, a, b, need_a, need_b):
    gq, gr = g
    q, r = y
    _check(xp.value(r))
    nm = gr @ mT(xp, r) - mT(xp, q) @ gq
    c = xp.triu(nm) + mT(xp, xp.triu(nm, 1))
    return _right_inverse(xp, gq + q @ c, r, 1), None


def jvp(xp, ta, tb, y, a, b):
    q, r = y
    _check(xp.value(r))
    x = mT(xp, q) @ _right_inverse(xp, ta, r, 0)
    low = xp.tril(x, -1)
    xo = x - (low - mT(xp, low))
    return _right_inverse(xp, ta, r, 0) - q @ xo, xo @ r


def outputs(sha, shb):
    if len(sha) < 2 or sha[-2] < sha[-1]:
        raise ValueError(f"qr: gradients need a square or tall matrix (m >= n), got {sha}")
    m, n = sha[-2:]
    batch = tuple(sha[:-2])
    return (batch + (m, n), batch + (n, n))


register(Escape("qr", value, vjp, jvp, outputs,
                lambda sha, shb: math.prod(sha[:-2]) * (1 + 4 * sha[-2] * sha[-1] ** 2)
                + 2 * math.prod(sha)))
