"""Reductions along one axis: sum, prod, amax, amin.

Attribute layout at the row's int offset: (P, R, Q), the operand seen as a C-ordered (P, R, Q)
array reduced over R (a reduction over several adjacent axes is recorded over their product; over
non-adjacent ones, after a transpose). The result is (P, Q). ``layouts.encode_reduce`` and
``decode_reduce`` write and read it for the recorder and the file validator.
"""
from math import inf

import numpy as np

from .._cache import njit
from ._scope import _addr, _ld, _maximum, _minimum, _st
from .layouts import reduce_layout  # (P, R, Q): encode_reduce, decode_reduce there


# rendered whole into every generated interpreter (jit/_assemble.py)
LAYOUTS = (reduce_layout,)


@njit(error_model="numpy", inline="always")  # at Numba's level: LLVM does not inline across
def _pairwise_leaf(p, off, n):  # Numba's functions, and a call per line of 10 cost 2x (W2)
    """NumPy's pairwise sum of n <= 128 contiguous values at element off of buffer p: one leaf
    of its recursion (eight partial sums from 8 elements on)."""
    if n < 8:
        res = 0.0
        for j in range(n):
            res += _ld(p, off + j)
        return res
    r0 = _ld(p, off)
    r1 = _ld(p, off + 1)
    r2 = _ld(p, off + 2)
    r3 = _ld(p, off + 3)
    r4 = _ld(p, off + 4)
    r5 = _ld(p, off + 5)
    r6 = _ld(p, off + 6)
    r7 = _ld(p, off + 7)
    j = 8
    while j < n - n % 8:
        r0 += _ld(p, off + j)
        r1 += _ld(p, off + j + 1)
        r2 += _ld(p, off + j + 2)
        r3 += _ld(p, off + j + 3)
        r4 += _ld(p, off + j + 4)
        r5 += _ld(p, off + j + 5)
        r6 += _ld(p, off + j + 6)
        r7 += _ld(p, off + j + 7)
        j += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while j < n:
        res += _ld(p, off + j)
        j += 1
    return res


@njit(error_model="numpy")
def _pairwise(p, off, n):
    """NumPy's pairwise sum of the n contiguous values at element off of buffer p."""
    if n <= 128:
        return _pairwise_leaf(p, off, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(p, off, n2) + _pairwise(p, off + n2, n - n2)


# rendered whole into _interp.py, before the forward kernels
HELPERS = (_pairwise_leaf, _pairwise)


def forward_sum(iat, pa, py, IA):
    """Sums over the (P, R, Q) layout in NumPy's order: pairwise along a contiguous run, in
    sequence along a strided one."""
    P, Rr, Q = reduce_layout(IA, iat)
    if Q == 1 and Rr <= 128:  # the reduced run is contiguous: NumPy sums it pairwise
        for p in range(P):  # (W2's 25,000 lines of 10: 205 -> 95 us with the leaf inlined here)
            _st(py, p, 0.0 + _pairwise_leaf(pa, p * Rr, Rr))
    elif Q == 1:
        for p in range(P):
            _st(py, p, 0.0 + _pairwise(pa, p * Rr, Rr))
    else:  # a strided run: NumPy adds the slices in order
        for p in range(P):
            for q in range(Q):
                acc = 0.0
                for r in range(Rr):
                    acc += _ld(pa, (p * Rr + r) * Q + q)
                _st(py, p * Q + q, acc)


def reverse_sum(iat, ga, gy, G, IA):
    """Every element gets its line's adjoint."""
    P, Rr, Q = reduce_layout(IA, iat)
    if Q == 1:  # the reduced axis is the last: one adjoint per run of Rr (W2's
        for p in range(P):  # (25000, 10) -> 25000 row: 57 us so, 347 us a loop per element)
            g = G[gy + p]
            for r in range(Rr):
                G[ga + p * Rr + r] += g
    else:
        for p in range(P):
            for r in range(Rr):
                base = (p * Rr + r) * Q
                for q in range(Q):
                    G[ga + base + q] += G[gy + p * Q + q]


def tangent_sum(n, k, iat, ta, na, ty, T, IA):
    """The sum of the tangents over each line."""
    P, Rr, Q = reduce_layout(IA, iat)
    for j in range(k):
        oa = ta + j * na
        oy = ty + j * n
        if Q == 1:  # contiguous reduced runs: accumulate in a register
            for p in range(P):
                acc = 0.0
                for r in range(Rr):
                    acc += T[oa + p * Rr + r]
                T[oy + p] = acc
            continue
        for p in range(P):
            for q in range(Q):
                T[oy + p * Q + q] = 0.0
            for r in range(Rr):
                base = oa + (p * Rr + r) * Q
                for q in range(Q):
                    T[oy + p * Q + q] += T[base + q]


def forward_prod(iat, pa, py, IA):
    """Products over the (P, R, Q) layout, in sequence from 1.0."""
    P, Rr, Q = reduce_layout(IA, iat)
    for p in range(P):
        for q in range(Q):
            acc = 1.0
            for r in range(Rr):
                acc *= _ld(pa, (p * Rr + r) * Q + q)
            _st(py, p * Q + q, acc)


def reverse_prod(iat, pa, ga, gy, G, IA):
    """Each factor gets the adjoint times the product of the others: rest / x_r when that is safe,
    else prefix times suffix products (exact at zeros and infinities)."""
    P, Rr, Q = reduce_layout(IA, iat)
    left = np.empty(Rr)  # prefix products, for the rare lines without a safe division
    for p in range(P):
        for q in range(Q):
            g = G[gy + p * Q + q]
            rest = 1.0
            for r in range(Rr):
                rest *= _ld(pa, (p * Rr + r) * Q + q)
            if rest != 0.0 and abs(rest) < inf:  # every factor finite and nonzero: rest / x_r
                for r in range(Rr):
                    off = (p * Rr + r) * Q + q
                    G[ga + off] += g * (rest / _ld(pa, off))
            else:  # a zero, an inf, a NaN or an over/underflow: products of the others, exactly
                run = 1.0  # (prefix times suffix, no division: prod([inf, 2]) -> [2, inf])
                for r in range(Rr):
                    left[r] = run
                    run *= _ld(pa, (p * Rr + r) * Q + q)
                run = 1.0
                for r in range(Rr - 1, -1, -1):
                    off = (p * Rr + r) * Q + q
                    G[ga + off] += g * (left[r] * run)
                    run *= _ld(pa, off)


def tangent_prod(n, k, iat, pa, ta, na, ty, T, IA):
    """The tangents weighted as the reverse weights them (the transpose of ``reverse_prod``)."""
    P, Rr, Q = reduce_layout(IA, iat)
    left = np.empty(Rr)  # prefix and suffix products, for the lines without a safe division
    right = np.empty(Rr)
    for p in range(P):
        for q in range(Q):
            rest = 1.0
            for r in range(Rr):
                rest *= _ld(pa, (p * Rr + r) * Q + q)
            # the reverse's weights: rest / x_r when every factor is finite and nonzero, else the
            # products of the others (prefix times suffix, exact at zeros and infinities)
            safe = rest != 0.0 and abs(rest) < inf
            if not safe:
                run = 1.0
                for r in range(Rr):
                    left[r] = run
                    run *= _ld(pa, (p * Rr + r) * Q + q)
                run = 1.0
                for r in range(Rr - 1, -1, -1):
                    right[r] = run
                    run *= _ld(pa, (p * Rr + r) * Q + q)
            for j in range(k):
                oa = ta + j * na
                acc = 0.0
                for r in range(Rr):
                    off = (p * Rr + r) * Q + q
                    if safe:
                        acc += (rest / _ld(pa, off)) * T[oa + off]
                    else:
                        acc += (left[r] * right[r]) * T[oa + off]
                T[ty + j * n + p * Q + q] = acc


def forward_amax(iat, pa, py, IA):
    """The maximum of each line from its first element, NaN propagating, a later tie winning."""
    P, Rr, Q = reduce_layout(IA, iat)
    for p in range(P):
        for q in range(Q):
            acc = -inf
            if Rr > 0:
                acc = _ld(pa, p * Rr * Q + q)
            for r in range(1, Rr):
                acc = _maximum(acc, _ld(pa, (p * Rr + r) * Q + q))
            _st(py, p * Q + q, acc)


def reverse_amax(iat, pa, ga, py, gy, G, IA):
    """The adjoint shared evenly among the ties of each extreme (amax and amin alike)."""
    P, Rr, Q = reduce_layout(IA, iat)
    if Q == 1:  # one extreme per run of Rr: count its ties, then share the adjoint among them
        for p in range(P):
            y = _ld(py, p)
            ties = 0
            for r in range(Rr):
                x = _ld(pa, p * Rr + r)
                ties += (x == y) | ((x != x) & (y != y))
            share = G[gy + p] / ties
            for r in range(Rr):  # (a select, not a branch: the loop vectorizes)
                x = _ld(pa, p * Rr + r)
                old = G[ga + p * Rr + r]
                G[ga + p * Rr + r] = old + share if (x == y) | ((x != x) & (y != y)) else old
    else:  # the same, Q extremes at a time along the contiguous axis, branch-free (W2's max over
        # axis 0 of a (25, 1000) array: 77 -> 42 us a branch per element, 13 us so); each tie
        # gets the same share once, so the same bits
        share = np.empty(Q)
        ps = _addr(share)
        for p in range(P):
            for q in range(Q):
                _st(ps, q, 0.0)
            for r in range(Rr):
                o = (p * Rr + r) * Q
                for q in range(Q):
                    x = _ld(pa, o + q)
                    y = _ld(py, p * Q + q)
                    _st(ps, q, _ld(ps, q) + (1.0 if (x == y) | ((x != x) & (y != y)) else 0.0))
            for q in range(Q):  # the count of ties, now each one's share
                _st(ps, q, G[gy + p * Q + q] / _ld(ps, q))
            for r in range(Rr):
                o = (p * Rr + r) * Q
                for q in range(Q):
                    x = _ld(pa, o + q)
                    y = _ld(py, p * Q + q)
                    old = G[ga + o + q]
                    G[ga + o + q] = old + _ld(ps, q) if (x == y) | ((x != x) & (y != y)) else old


def tangent_amax(n, k, iat, pa, ta, na, py, ty, T, IA):
    """The mean of the ties' tangents (the transpose of ``reverse_amax``; amax and amin alike)."""
    P, Rr, Q = reduce_layout(IA, iat)
    for p in range(P):
        for q in range(Q):
            y = _ld(py, p * Q + q)
            ties = 0
            last = 0
            for r in range(Rr):
                x = _ld(pa, (p * Rr + r) * Q + q)
                if x == y or (x != x and y != y):
                    ties += 1
                    last = r
            if ties == 1:  # the common case: copy the tangent of the one extreme element
                for j in range(k):
                    T[ty + j * n + p * Q + q] = T[ta + j * na + (p * Rr + last) * Q + q]
                continue
            # the mean of the tangents of the ties (the reverse splits the adjoint evenly)
            for j in range(k):
                oa = ta + j * na
                acc = 0.0
                for r in range(Rr):
                    off = (p * Rr + r) * Q + q
                    x = _ld(pa, off)
                    if x == y or (x != x and y != y):
                        acc += T[oa + off]
                T[ty + j * n + p * Q + q] = acc / ties


def forward_amin(iat, pa, py, IA):
    """The minimum of each line from its first element, NaN propagating, a later tie winning."""
    P, Rr, Q = reduce_layout(IA, iat)
    for p in range(P):
        for q in range(Q):
            acc = inf
            if Rr > 0:
                acc = _ld(pa, p * Rr * Q + q)
            for r in range(1, Rr):
                acc = _minimum(acc, _ld(pa, (p * Rr + r) * Q + q))
            _st(py, p * Q + q, acc)


# each mode's body of every row of the family, by row name
KERNELS = {
    "forward": {"sum": forward_sum, "prod": forward_prod, "amax": forward_amax,
                "amin": forward_amin},
    "reverse": {"sum": reverse_sum, "prod": reverse_prod, "amax": reverse_amax},
    "tangent": {"sum": tangent_sum, "prod": tangent_prod, "amax": tangent_amax},
}
# rows whose reverse and tangent are another row's: ties and NaN are handled alike
SAME = {"amin": "amax"}
