"""eigh: (w, V) of a symmetric matrix, from its lower triangle (as NumPy reads it).

With A = V diag(w) V^T and F[i, j] = 1 / (w_j - w_i) off the diagonal (Giles 2008):
forward  X = V^T dA V, dw = diag(X), dV = V (F * X);
reverse  gA = V (diag(gw) + F * (V^T gV)) V^T, symmetrized and folded onto the lower triangle.

Tied eigenvalues (equal to rounding): their eigenvectors are any basis of their eigenspace, and
F is set to 0 there. A loss of the eigenvalues alone (eigvalsh, a sum of functions of w), or
of an eigenspace as a whole (its projector), has a finite, correct gradient; a loss that
depends on the basis chosen inside an eigenspace has none, and the reverse rule raises a
ValueError saying so. Near-ties give large but finite gradients (1 / gap), as the derivative
itself is. Forward mode leaves the rotation inside a tied eigenspace out of dV. An individual
eigenvalue among tied ones is not differentiable: its gradient is v_i v_i^T for the
eigenvector LAPACK returned (for the largest or smallest, a subgradient). Second derivatives
at ties would need the limit of (gw_j - gw_i) / (w_j - w_i), which the rule cannot know: the
rules refuse to be recorded there (higher order, dual numbers) with a ValueError.
"""
from __future__ import annotations

import math

import numpy as np

from . import (Escape, check_gauge, check_recorded_ties, diag_embed, diagonal, fold_lower,
               gap_inverse, mT, register, square, sym_lower)


def value(a, b=None):
    w, v = np.linalg.eigh(a)
    return w, v


def vjp(xp, g, y, a, b, need_a, need_b):
    gw, gv = g
    w, v = y
    F, tied = gap_inverse(xp, w)
    check_recorded_ties(xp, tied, "eigh")
    k = mT(xp, v) @ gv
    check_gauge(xp, k, tied, "eigh")
    s = v @ (diag_embed(xp, gw) + F * k) @ mT(xp, v)
    return fold_lower(xp, s), None


def jvp(xp, ta, tb, y, a, b):
    w, v = y
    F, tied = gap_inverse(xp, w)
    check_recorded_ties(xp, tied, "eigh")
    x = mT(xp, v) @ sym_lower(xp, ta) @ v
    return diagonal(x), v @ (F * x)


def outputs(sha, shb):
    square(sha, "eigh")
    return (tuple(sha[:-1]), tuple(sha))


register(Escape("eigh", value, vjp, jvp, outputs,
                lambda sha, shb: math.prod(sha[:-2]) * (1 + 10 * sha[-1] ** 3) + math.prod(sha)))
