"""expm: the matrix exponential (SciPy's ``scipy.linalg.expm``; escapes need SciPy only when
one of them runs).

Its derivative is the Frechet derivative L(A, E), the upper right block of
expm([[A, E], [0, A]]) (Higham, "Functions of Matrices", 2008, 3.2): forward dY = L(A, dA);
reverse gA = L(A^T, g). Both call expm itself, so they record it again at higher order.
"""
from __future__ import annotations

import math

import numpy as np

from . import Escape, mT, register, square


def value(a, b=None):
    from scipy.linalg import expm

    if 0 in np.shape(a):
        return np.zeros(np.shape(a))
    return expm(a)


def frechet(xp, a, e):
    """L(A, E): E may carry more leading axes than A."""
    n = a.shape[-1]
    batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(e.shape[:-2]))
    a = xp.broadcast_to(a, batch + (n, n))
    e = xp.broadcast_to(e, batch + (n, n))
    zero = np.zeros(batch + (n, n))
    top = xp.concatenate([a, e], axis=-1)
    bottom = xp.concatenate([zero, a], axis=-1) if n else zero
    big = xp.concatenate([top, bottom], axis=-2)
    return xp.expm(big)[..., :n, n:]


def vjp(xp, g, y, a, b, need_a, need_b):
    return frechet(xp, mT(xp, a), g), None


def jvp(xp, ta, tb, y, a, b):
    return frechet(xp, a, ta)


def outputs(sha, shb):
    square(sha, "expm")
    return (tuple(sha),)


register(Escape("expm", value, vjp, jvp, outputs,
                lambda sha, shb: math.prod(sha[:-2]) * (1 + 30 * sha[-1] ** 3)
                + math.prod(sha)))
