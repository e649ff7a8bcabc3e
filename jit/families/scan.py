"""Running sums and products along one axis: cumsum, cumprod.

Attribute layout at the row's int offset: (P, R, Q), as a reduction's (``layouts.encode_reduce``);
the result has the operand's shape.
"""
from ._scope import _ld, _st
from .layouts import reduce_layout


def forward_cumsum(iat, pa, py, IA):
    """y_0 = x_0, y_r = y_{r-1} + x_r along each line."""
    P, Rr, Q = reduce_layout(IA, iat)
    for p in range(P):
        for q in range(Q):
            acc = 0.0
            for r in range(Rr):
                off = (p * Rr + r) * Q + q
                x = _ld(pa, off)
                acc = x if r == 0 else acc + x
                _st(py, off, acc)


def reverse_cumsum(iat, ga, gy, G, IA):
    """Each x_r gets the sum of the adjoints of y_r and after."""
    P, Rr, Q = reduce_layout(IA, iat)
    for p in range(P):
        for q in range(Q):
            acc = 0.0
            for r in range(Rr - 1, -1, -1):
                off = (p * Rr + r) * Q + q
                acc += G[gy + off]
                G[ga + off] += acc


def tangent_cumsum(n, k, iat, ta, na, ty, T, IA):
    """The running sum of the tangents."""
    P, Rr, Q = reduce_layout(IA, iat)
    for j in range(k):
        oa = ta + j * na
        oy = ty + j * n
        for p in range(P):
            for q in range(Q):
                acc = 0.0
                for r in range(Rr):
                    off = (p * Rr + r) * Q + q
                    acc += T[oa + off]
                    T[oy + off] = acc


def forward_cumprod(iat, pa, py, IA):
    """y_0 = x_0, y_r = y_{r-1} x_r along each line."""
    P, Rr, Q = reduce_layout(IA, iat)
    for p in range(P):
        for q in range(Q):
            acc = 1.0
            for r in range(Rr):
                off = (p * Rr + r) * Q + q
                x = _ld(pa, off)
                acc = x if r == 0 else acc * x
                _st(py, off, acc)


def reverse_cumprod(iat, pa, ga, py, gy, G, IA):
    """The reverse of the running product without a division."""
    P, Rr, Q = reduce_layout(IA, iat)
    for p in range(P):
        for q in range(Q):
            # ga_r = y_{r-1} T_r with T_r = g_r + x_{r+1} T_{r+1}: no division, so exact at zeros
            # and infinities, and O(R). A zero factor ends the terms it multiplies, however large
            # the products after it have grown (they may overflow to inf: 0 * inf would be NaN)
            acc = 0.0
            for r in range(Rr - 1, -1, -1):
                off = (p * Rr + r) * Q + q
                xn = _ld(pa, off + Q) if r < Rr - 1 else 0.0
                if xn != 0.0:
                    acc = G[gy + off] + xn * acc
                else:
                    acc = G[gy + off]
                if r == 0:
                    G[ga + off] += acc
                elif _ld(py, off - Q) != 0.0:
                    G[ga + off] += _ld(py, off - Q) * acc


def tangent_cumprod(n, k, iat, pa, ta, na, py, ty, T, IA):
    """The product rule along the line, without a division (the transpose of
    ``reverse_cumprod``)."""
    P, Rr, Q = reduce_layout(IA, iat)
    for j in range(k):
        oa = ta + j * na
        oy = ty + j * n
        for p in range(P):
            for q in range(Q):
                # the product rule dy_r = x_r dy_{r-1} + y_{r-1} dx_r: no division, so exact at
                # zeros and infinities, and O(R)
                acc = 0.0
                for r in range(Rr):
                    off = (p * Rr + r) * Q + q
                    if r > 0:
                        acc = _ld(pa, off) * acc + _ld(py, off - Q) * T[oa + off]
                    else:
                        acc = T[oa + off]
                    T[oy + off] = acc


# each mode's body of every row of the family, by row name
KERNELS = {
    "forward": {"cumsum": forward_cumsum, "cumprod": forward_cumprod},
    "reverse": {"cumsum": reverse_cumsum, "cumprod": reverse_cumprod},
    "tangent": {"cumsum": tangent_cumsum, "cumprod": tangent_cumprod},
}
