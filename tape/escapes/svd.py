"""svd: the reduced decomposition A = U diag(S) Vh, U (..., m, k), S (..., k), Vh (..., k, n),
k = min(m, n).

Rules of Townsend (2016), "Differentiating the singular value decomposition" (the real case of
Seeger et al. 2017), with F[i, j] = 1 / (s_j^2 - s_i^2) off the diagonal and V = Vh^T:
forward  P = U^T dA V, dS = diag(P),
         dU = U (F * (P S + S P^T)) + (I - U U^T) dA V S^-1,
         dV = V (F * (S P + P^T S)) + (I - V V^T) dA^T U S^-1;
reverse  gA = U [(F * (U^T gU - gU^T U)) S + diag(gS) + S (F * (V^T gV - gV^T V))] V^T
              + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T).
The projector terms exist for a tall (m > k) or wide (n > k) A only. Tied singular values
are treated as eigh's tied eigenvalues (F = 0 there; a loss that depends on the basis inside
their subspace raises); a zero singular value of a non-square A leaves its singular vectors
undefined, and a loss that reads them raises.
"""
from __future__ import annotations

import math

import numpy as np

from . import (Escape, check_gauge, check_recorded_ties, col, diag_embed, diagonal, gap_inverse,
               mT, register, row)


def value(a, b=None):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u, s, vh


def _inverse_values(xp, s, need, what):
    """1 / s, with 0 where s is 0 (a rule reading it there raises when `need`)."""
    zero = s == 0.0
    if need and np.any(np.asarray(xp.value(zero))):
        raise ValueError(f"{what}: a zero singular value of a non-square matrix leaves its "
                         "singular vectors undefined: the loss depends on them")
    return xp.where(zero, 0.0, 1.0 / xp.where(zero, 1.0, s))


def vjp(xp, g, y, a, b, need_a, need_b):
    gu, gs, gvh = g
    u, s, vh = y
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    v, gv = mT(xp, vh), mT(xp, gvh)
    F, tied = gap_inverse(xp, s * s, s)
    check_recorded_ties(xp, tied, "svd")
    ju = mT(xp, u) @ gu
    jv = mT(xp, v) @ gv
    check_gauge(xp, ju + jv, tied, "svd")
    inner = (F * (ju - mT(xp, ju))) * row(xp, s) + diag_embed(xp, gs) \
        + col(xp, s) * (F * (jv - mT(xp, jv)))
    ga = u @ inner @ vh
    if m > k:
        sinv = _inverse_values(xp, s, bool(np.any(xp.value(gu))), "svd")
        pu = gu - u @ ju
        ga = ga + (pu * row(xp, sinv)) @ vh
    if n > k:
        sinv = _inverse_values(xp, s, bool(np.any(xp.value(gv))), "svd")
        pv = gv - v @ jv
        ga = ga + (u * row(xp, sinv)) @ mT(xp, pv)
    return ga, None


def jvp(xp, ta, tb, y, a, b):
    u, s, vh = y
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    v = mT(xp, vh)
    F, tied = gap_inverse(xp, s * s, s)
    check_recorded_ties(xp, tied, "svd")
    p = mT(xp, u) @ ta @ v
    ds = diagonal(p)
    ps = p * row(xp, s)
    sp = col(xp, s) * p
    du = u @ (F * (ps + mT(xp, ps)))  # P S + S P^T
    dv = v @ (F * (sp + mT(xp, sp)))  # S P + P^T S
    if m > k:
        sinv = _inverse_values(xp, s, False, "svd")
        du = du + ((ta @ v) - u @ p) * row(xp, sinv)
    if n > k:
        sinv = _inverse_values(xp, s, False, "svd")
        dv = dv + ((mT(xp, ta) @ u) - v @ mT(xp, p)) * row(xp, sinv)
    return du, ds, mT(xp, dv)


def outputs(sha, shb):
    if len(sha) < 2:
        raise ValueError(f"svd: the array must be at least 2-D (got {sha})")
    m, n = sha[-2:]
    k = min(m, n)
    batch = tuple(sha[:-2])
    return (batch + (m, k), batch + (k,), batch + (k, n))


register(Escape("svd", value, vjp, jvp, outputs,
                lambda sha, shb: math.prod(sha[:-2]) * (1 + 20 * max(sha[-2:]) ** 3)
                + 3 * math.prod(sha)))
