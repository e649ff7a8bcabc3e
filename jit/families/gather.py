"""gather (y[j] = x[idx[j]]) and scatter (y = x, y[pos[w]] = v[w]): linear index maps.

Attribute layouts at the row's int offset: gather, the n source indices; scatter, the count m of
writes, their m positions, then m win flags (1 for the last write to a position: the one NumPy
keeps; ``layouts.encode_scatter`` / ``decode_scatter``).
"""
import numpy as np

from ._scope import _ld, _st


def forward_gather(n, iat, pa, py, IA):
    """y[j] = x[idx[j]]."""
    for j in range(n):
        _st(py, j, _ld(pa, IA[iat + j]))


def reverse_gather(n, iat, ga, gy, G, IA):
    """x's adjoint gets y's adjoint at idx[j] (repeated indices add up)."""
    for j in range(n):
        G[ga + IA[iat + j]] += G[gy + j]


def tangent_gather(n, k, iat, ta, na, ty, T, IA):
    """The gathered tangents, direction by direction."""
    for j in range(k):
        oa = ta + j * na
        oy = ty + j * n
        for e in range(n):
            T[oy + e] = T[oa + IA[iat + e]]


def forward_scatter(n, iat, pa, pb, py, IA):
    """y = x, then y[pos[w]] = v[w] for each winning write w."""
    m = IA[iat]
    for j in range(n):
        _st(py, j, _ld(pa, j))
    for w in range(m):  # every written position has exactly one winning write (the last)
        if IA[iat + 1 + m + w]:
            _st(py, IA[iat + 1 + w], _ld(pb, w))


def reverse_scatter(nd, n, iat, ga, gb, gy, G, IA):
    """x's adjoint gets y's where no write landed; each winning write's value gets its
    position's."""
    m = IA[iat]
    if nd & 1:
        written = np.zeros(n, np.uint8)
        for j in range(m):
            written[IA[iat + 1 + j]] = 1
        for j in range(n):
            if written[j] == 0:
                G[ga + j] += G[gy + j]
    if nd & 2:
        for j in range(m):
            if IA[iat + 1 + m + j]:
                G[gb + j] += G[gy + IA[iat + 1 + j]]


def tangent_scatter(nd, n, k, iat, ta, na, tb, nb, ty, T, IA):
    """The tangent of x with the winning writes' tangents scattered in (the transpose of
    ``reverse_scatter``)."""
    m = IA[iat]
    for j in range(k):
        oy = ty + j * n
        if nd & 1:
            oa = ta + j * na
            for e in range(n):
                T[oy + e] = T[oa + e]
        else:
            for e in range(n):
                T[oy + e] = 0.0
        # every written position has exactly one winning write (the last, as in NumPy)
        for w in range(m):
            if IA[iat + 1 + m + w]:
                T[oy + IA[iat + 1 + w]] = T[tb + j * nb + w] if nd & 2 else 0.0


# each mode's body of every row of the family, by row name
KERNELS = {
    "forward": {"gather": forward_gather, "scatter": forward_scatter},
    "reverse": {"gather": reverse_gather, "scatter": reverse_scatter},
    "tangent": {"gather": tangent_gather, "scatter": tangent_scatter},
}
